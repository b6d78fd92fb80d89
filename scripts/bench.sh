#!/usr/bin/env bash
# Benchmarks, each writing JSON under bench/ (or $1): the embedded target in-process,
# placement at scale, P4Runtime write/read rates against a real switch process, one worker's
# all-reduce packets/s against a loopback peer (old client vs new), and
# forwarding through a switch process between two namespaces, all-reduce goodput,
# in-network vs parameter server, the 1M-element all-reduce on star4 (allreduce-1m/*/results.json),
# and the headline on Mininet (root only): the 1M-element all-reduce and training, in-network vs
# ring vs parameter server, at 4 workers (star8) and 8 (star9), each in
# headline-{allreduce,train}-{4,8}/compare-*/comparison.json. Link rates: the highest at which the
# fidelity monitor still names a link as what bound the in-network all-reduce on this 2-core
# machine ($AGGNET_BENCH_MBPS_4, default 100; $AGGNET_BENCH_MBPS_8, default 50: above it 8 worker
# processes and the switch keep both cores busy), and for training $AGGNET_BENCH_TRAIN_MBPS
# (default 10), where the gradients' transfers, not the workers' compute, take most of a step.
# Then the real-model figure (scripts/bench_models.py, runs on its own too): per model, in-network's
# DDP iteration speedup over ring and PS, 4 and 8 workers, emulated 1 and 10 Gb/s
# ($AGGNET_BENCH_MODEL_GBPS) over real $AGGNET_BENCH_MODEL_MBPS (default 50) Mb/s links, in
# models/models.{json,png}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-bench}
mkdir -p "$out"
py=.venv/bin/python
$py scripts/bench_target.py --out "$out/target.json"
$py scripts/bench_placement.py --out "$out/placement.json"
$py scripts/bench_runtime.py --out "$out/runtime.json"
$py scripts/bench_hosts.py --out "$out/hosts.json"
if [ "$(id -u)" -eq 0 ]; then
  $py scripts/bench_switch.py --out "$out/switch.json"
  $py scripts/bench_allreduce.py --out "$out/allreduce.json"
  $py -m testbed.cli run --workload allreduce --topo star4 --elements 1000000 --lanes 364 --out "$out/allreduce-1m"
  for spec in "4 star8 ${AGGNET_BENCH_MBPS_4:-100}" "8 star9 ${AGGNET_BENCH_MBPS_8:-50}"; do
    read -r workers topo mbps <<< "$spec"  # the parameter server gets a host of its own
    common=(--schemes innet,ring,ps --topo "$topo" --workers "$workers" --lanes 364)
    $py -m testbed.cli compare "${common[@]}" --link-mbps "$mbps" --workload allreduce --elements 1000000 \
      --out "$out/headline-allreduce-$workers"
    $py -m testbed.cli compare "${common[@]}" --link-mbps "${AGGNET_BENCH_TRAIN_MBPS:-10}" --steps 100 \
      --out "$out/headline-train-$workers"
  done
  $py scripts/bench_models.py --out "$out/models" --link-mbps "${AGGNET_BENCH_MODEL_MBPS:-50}" \
    --rates-gbps "${AGGNET_BENCH_MODEL_GBPS:-1,10}"
else
  echo "bench.sh: not root, skipping the Mininet benchmarks (switch process, all-reduce)" >&2
fi
echo "bench.sh: results in $out/"
