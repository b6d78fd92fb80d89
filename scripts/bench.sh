#!/usr/bin/env bash
# Benchmarks, each writing JSON under bench/ (or $1): the embedded target in-process,
# placement at scale, P4Runtime write/read rates against a real switch process, its cost under hostile
# clients beside BMv2's, one worker's
# all-reduce packets/s against a loopback peer (old client vs new), and
# forwarding through a switch process between two namespaces, all-reduce goodput,
# in-network vs parameter server, the 1M-element all-reduce on star4 (allreduce-1m/*/results.json) and
# with 16 workers on fattree4 (fattree-16/*/results.json),
# and the headline on Mininet (root only): the 1M-element all-reduce and training, in-network vs
# ring vs parameter server, at 4 workers (star8) and 8 (star9), each in
# headline-{allreduce,train}-{4,8}/compare-*/comparison.json (and the scale runs, below). Link rates: the
# highest at which the fidelity monitor still names a link as what bound the in-network all-reduce on this 2-core
# machine ($AGGNET_BENCH_MBPS_4, default 100; $AGGNET_BENCH_MBPS_8, default 50: above it 8 worker
# processes and the switch keep both cores busy), and for training $AGGNET_BENCH_TRAIN_MBPS
# (default 10), where the gradients' transfers, not the workers' compute, take most of a step.
# Then the 8-worker all-reduce on emulated 10 and 100 Gb/s links, time-scaled (--scale) so that they
# run at $AGGNET_BENCH_SCALED_MBPS (default 25: where the fidelity monitor named a link for in-network
# with other sessions on the cores) in real time, timers scaled from their unscaled values
# (scaled-allreduce-{10,100}g/compare-*/comparison.json, times in the emulated cluster's).
# Then the real-model figure (scripts/bench_models.py, runs on its own too): per model, with its GPU
# profile, in-network's DDP iteration speedup over ring and PS, 4, 8 and 16 workers, emulated 10, 25
# and 100 Gb/s ($AGGNET_BENCH_MODEL_GBPS), in models/models.{json,png}; and the all-reduce's goodput
# against workers at 100 Gb/s (scripts/bench_goodput.py), in goodput/goodput.{json,png}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-bench}
mkdir -p "$out"
py=.venv/bin/python
$py scripts/bench_target.py --out "$out/target.json"
$py scripts/bench_placement.py --out "$out/placement.json"
$py scripts/bench_runtime.py --out "$out/runtime.json"
# What hostile or careless clients cost a switch (issue 30's probes), aggnet beside simple_switch_grpc when
# /opt/p4ref's is on PATH: idle streams, malformed streams then SIGTERM, floods, huge values, large reads
# and writes; time, peak memory and the answer of each.
$py scripts/bench_server_limits.py --out "$out/server_limits.json"
$py scripts/bench_hosts.py --out "$out/hosts.json"
if [ "$(id -u)" -eq 0 ]; then
  $py scripts/bench_switch.py --out "$out/switch.json"
  $py scripts/bench_allreduce.py --out "$out/allreduce.json"
  $py -m testbed.cli run --workload allreduce --topo star4 --elements 1000000 --out "$out/allreduce-1m"
  # 16 workers on the fat-tree at default options (364 lanes, AIMD pacing); results.json's phases_s says
  # where the command's time went, and the link-bound time is the busiest link's bytes over 100 Mb/s.
  $py -m testbed.cli run --workload allreduce --topo fattree4 --workers 16 --k 3 --elements 1000000 --link-mbps 100 \
    --out "$out/fattree-16"
  for spec in "4 star8 ${AGGNET_BENCH_MBPS_4:-100}" "8 star9 ${AGGNET_BENCH_MBPS_8:-50}"; do
    read -r workers topo mbps <<< "$spec"  # the parameter server gets a host of its own
    common=(--schemes innet,ring,ps --topo "$topo" --workers "$workers")  # default lanes: a full packet
    $py -m testbed.cli compare "${common[@]}" --link-mbps "$mbps" --workload allreduce --elements 1000000 \
      --out "$out/headline-allreduce-$workers"
    $py -m testbed.cli compare "${common[@]}" --link-mbps "${AGGNET_BENCH_TRAIN_MBPS:-10}" --steps 100 \
      --out "$out/headline-train-$workers"
  done
  # Scale (issue 22): one switch's memory by port count and the largest fat-tree that fits; the generated
  # fat-tree k=8 (80 switches, 128 hosts) running a 64-worker all-reduce (fattree8/*/results.json: phases,
  # seconds, exactness); and three jobs placed by SOAR and by min-congestion on it, their per-link packet
  # counts against the placement's prediction (placement-fattree8.txt).
  $py scripts/bench_scale.py --out "$out/scale.json"
  $py -m testbed.cli run --workload allreduce --topo fattree8 --workers 64 --lanes 364 --pacing aimd \
    --elements 36400 --out "$out/fattree8"
  AGGNET_SCALE_TESTS=1 $py -m pytest -q -s -p no:cacheprovider tests/test_e2e_placement.py -k fattree8 \
    > "$out/placement-fattree8.txt"
  real=${AGGNET_BENCH_SCALED_MBPS:-25}
  for gbps in 10 100; do
    scale=$((gbps * 1000 / real))
    $py -m testbed.cli compare --schemes innet,ring,ps --topo star9 --workers 8 --lanes 364 --workload allreduce \
      --elements 1000000 --link-mbps $((gbps * 1000)) --scale "$scale" \
      --out "$out/scaled-allreduce-${gbps}g"
  done
  # Datacenter speed (issue 34): the models with their GPU profiles at emulated 10, 25 and 100 Gb/s for
  # 4, 8 and 16 workers, and the all-reduce's goodput against workers at 100 Gb/s (hours on 2 cores).
  $py scripts/bench_models.py --out "$out/models" --rates-gbps "${AGGNET_BENCH_MODEL_GBPS:-10,25,100}"
  $py scripts/bench_goodput.py --out "$out/goodput"
else
  echo "bench.sh: not root, skipping the Mininet benchmarks (switch process, all-reduce)" >&2
fi
echo "bench.sh: results in $out/"
