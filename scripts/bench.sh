#!/usr/bin/env bash
# Benchmarks, each writing JSON under bench/ (or $1): the embedded target in-process,
# placement at scale, P4Runtime write/read rates against a real switch process, one worker's
# all-reduce packets/s against a loopback peer (old client vs new), and
# forwarding through a switch process between two namespaces, all-reduce goodput,
# in-network vs parameter server, and training step time, in-network vs parameter server vs
# ring at 20 Mb/s (compare/compare-*/comparison.json), on Mininet (root only).
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
  $py -m testbed.cli compare --schemes innet,ps,ring --topo star8 --workers 4 --link-mbps 20 --steps 60 \
    --lanes 128 --out "$out/compare"
else
  echo "bench.sh: not root, skipping the Mininet benchmarks (switch process, all-reduce)" >&2
fi
echo "bench.sh: results in $out/"
