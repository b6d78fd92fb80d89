"""P4Runtime writes fuzzed into a running `aggnet switch` over real gRPC (how: tests/p4runtime_fuzz.py, the harness
tests/test_p4runtime_fuzz.py runs bounded). A finding prints the seed, the batch number and the offending answer;
the script then exits 1.

    python scripts/fuzz_p4runtime.py                          # the default programs, 20,000 updates
    python scripts/fuzz_p4runtime.py --updates 2000 --seed 7 --programs p4src/aggnet.p4
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the harness; procs (a switch process) and p4rt_raw (the raw client)

from p4runtime_fuzz import PROGRAMS, fuzz_program  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=20_000, help="updates per program")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated P4 programs (repo paths)")
    args = parser.parse_args(argv)
    failed = False
    for program in args.programs.split(","):
        failed |= reported(fuzz_program(program, args.updates, args.seed))
    return 1 if failed else 0


def reported(result) -> bool:
    """Print a fuzz result's line and its first 20 findings; whether it has any."""
    print(result.line, flush=True)
    for finding in result.findings[:20]:
        print("  " + finding)
    return bool(result.findings)


if __name__ == "__main__":
    sys.exit(main())
