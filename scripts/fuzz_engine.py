"""The native engine under AddressSanitizer and UndefinedBehaviorSanitizer: p4c's corpus and aggnet.p4, fuzzed
(how: tests/engine_fuzz.py, the harness the native tests run bounded).

    python scripts/fuzz_engine.py                     # every corpus program and aggnet.p4, 1,000,000 frames
    python scripts/fuzz_engine.py --frames 20000 --programs arith-bmv2,aggnet [--json]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the harness, and fabric: how the controller installs a job on aggnet.p4

from engine_fuzz import AGGNET, corpus_names, fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from p4target import externs

    externs.load()  # this script is a composition root of the target
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000, help="fuzzed frames in all (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=1, help="the fuzzer's seed (default 1)")
    parser.add_argument("--programs", help="comma-separated corpus names and/or 'aggnet' (default: all)")
    parser.add_argument("--json", action="store_true", help="run p4c's BMv2 JSON of the programs (p4c on PATH)")
    args = parser.parse_args(argv)
    names = args.programs.split(",") if args.programs else [*corpus_names(), AGGNET]
    with tempfile.TemporaryDirectory(prefix="fuzz-json-") as json_dir:
        results = fuzz(names, args.frames, args.seed, json_dir=json_dir if args.json else None)
    failed = [r.name for r in results if not r.ok]
    print(f"{len(results)} programs, {sum(r.frames for r in results)} fuzzed frames, seed {args.seed}: "
          + (f"{len(failed)} failed: {', '.join(failed)}" if failed else "no finding"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
