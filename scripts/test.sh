#!/usr/bin/env bash
# Runs the AggNet test suite: installs what is missing (scripts/setup.sh), then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k stf -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
