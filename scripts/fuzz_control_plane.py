"""Control-plane write sequences fuzzed on the native engine against the Python engine, then under the sanitizers
(how: tests/control_plane_fuzz.py, the harness tests/test_native_cp_fuzz.py runs bounded). One line per program;
a finding names its seed; exit 1 on one.

    python scripts/fuzz_control_plane.py                                 # every program, 2,000 ops each
    python scripts/fuzz_control_plane.py --ops 20000 --seed 7 --programs basic,profiles
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the harness, the engine fuzzer's and fabric

from control_plane_fuzz import FRAMES_AFTER, PROGRAMS, fuzz_program, isolated  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from p4target import externs

    externs.load()  # this script is a composition root of the target
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=2_000, help="writes and packets per program (default 2,000)")
    parser.add_argument("--seed", type=int, default=1, help="the sequences' seed (default 1)")
    parser.add_argument("--programs", help=f"comma-separated, of: {', '.join(PROGRAMS)} (default: all)")
    parser.add_argument("--frames", type=int, default=FRAMES_AFTER, help="fuzzed frames after each sanitized replay")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child of isolated(): this program, in this process
    args = parser.parse_args(argv)
    if args.one:
        outcome = fuzz_program(args.one, PROGRAMS[args.one], args.ops, args.seed, args.frames)
        print(json.dumps({"ok": outcome.ok, "line": outcome.line, "counts": outcome.counts}))
        return 0
    names = args.programs.split(",") if args.programs else list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        parser.error(f"unknown program {unknown[0]!r} (known: {', '.join(PROGRAMS)})")
    failed = []
    for name in names:
        outcome = isolated(name, args.ops, args.seed, args.frames)
        print(f"{name}: {outcome.line}", flush=True)
        if not outcome.ok:
            failed.append(name)
    print(f"{len(names)} programs, {args.ops} steps each, seed {args.seed}: "
          + (f"{len(failed)} with findings: {', '.join(failed)}" if failed else "no finding"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
