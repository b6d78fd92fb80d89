#!/usr/bin/env bash
# One AggNet experiment with good defaults: star4 (its 4 hosts are the workers), embedded target, in-network
# aggregation, the digits MLP (200 steps, >= 90% test accuracy in well under 2 minutes).
# Runs scripts/setup.sh first (fast when nothing is missing). Needs root (Mininet).
# Extra arguments go to `aggnet run` and override the defaults, e.g.
#   scripts/run.sh --scheme ps --link-mbps 20
#   scripts/run.sh --workload allreduce --elements 1000000 --loss 1
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "run.sh: needs root (Mininet creates network namespaces and veth links); try: sudo $0 $*" >&2
  exit 2
fi
bash scripts/setup.sh
exec .venv/bin/aggnet run --topo star4 --target embedded --scheme innet \
  --model mlp --dataset digits --steps 200 "$@"
