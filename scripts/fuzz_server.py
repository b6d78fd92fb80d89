"""The switch's servers fuzzed over their wires, grammar-aware: P4Runtime (gRPC) and the side channel
(BMv2's Thrift API and the line protocol), with the native engine's calls replayed under the sanitizers
(how: tests/server_fuzz.py, the harness tests/test_server_fuzz.py runs bounded). A finding names the fuzzer,
seed and step; the script then exits 1.

    python scripts/fuzz_server.py                        # both fuzzers, 5,000 steps each
    python scripts/fuzz_server.py --fuzzers thrift --steps 500 --seed 3
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the harness, and the clients it drives (p4rt_raw, bm_thrift)

from fuzz_p4runtime import reported  # noqa: E402
from server_fuzz import fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from p4target import externs

    externs.load()  # this script is a composition root of the target
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzzers", default="p4runtime,thrift", help="p4runtime, thrift or both")
    parser.add_argument("--steps", type=int, default=5000, help="steps per fuzzer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check", type=int, default=100, help="steps between checks that a good client is served")
    parser.add_argument("--frames", type=int, default=20_000, help="fuzzed frames after the sanitized replay")
    args = parser.parse_args(argv)
    logging.getLogger("aggnet").setLevel(logging.ERROR)  # a fuzzed client's expected warnings are no news
    failed = False
    for kind in args.fuzzers.split(","):
        failed |= reported(fuzz(kind, args.steps, args.seed, args.check, args.frames))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
