#!/usr/bin/env bash
# Benchmarks, each writing JSON under bench/ (or $1): the embedded target in-process,
# placement at scale, P4Runtime write/read rates against a real switch process, one worker's
# all-reduce packets/s against a loopback peer (old client vs new), and
# forwarding through a switch process between two namespaces, all-reduce goodput,
# in-network vs parameter server, the 1M-element all-reduce on star4 (allreduce-1m/*/results.json),
# and the headline on Mininet (root only): the 1M-element
# all-reduce and training, in-network vs ring vs parameter server, at 4 workers (star8) and 8
# (star9), links at $AGGNET_BENCH_MBPS (default 50: the highest rate at which in-network
# aggregation at 8 workers stays within 1.1x of its link-bound time on a 2-core machine), each in
# headline-{allreduce,train}-{4,8}/compare-*/comparison.json.
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
  mbps=${AGGNET_BENCH_MBPS:-50}
  for workers in 4 8; do
    topo=$([ "$workers" -eq 4 ] && echo star8 || echo star9)  # the server gets a host of its own
    common=(--schemes innet,ring,ps --topo "$topo" --workers "$workers" --lanes 364 --link-mbps "$mbps")
    $py -m testbed.cli compare "${common[@]}" --workload allreduce --elements 1000000 \
      --out "$out/headline-allreduce-$workers"
    $py -m testbed.cli compare "${common[@]}" --steps 100 --out "$out/headline-train-$workers"
  done
else
  echo "bench.sh: not root, skipping the Mininet benchmarks (switch process, all-reduce)" >&2
fi
echo "bench.sh: results in $out/"
