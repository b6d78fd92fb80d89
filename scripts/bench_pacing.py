#!/usr/bin/env python3
"""Fixed window vs AIMD pacing, on losses alone and with ECN marks, behind shallow queues (root, Mininet).

tests/data/pacing/tree_thin.yaml has 2 Mb/s uplinks with 8-packet queues: workers that keep
their whole 32-chunk slot window of 32-lane packets (issue 7's size) in flight lose most of every
burst at the leaves' egress and wait out retransmission timeouts; `--pacing aimd` backs off to
what the queues hold, from losses (`--ecn-fraction 0`) or, by default, from the switches' marks
once a quarter of a queue is full (before it drops). All runs are `aggnet run --workload
allreduce` (exact sums checked on every worker). Reported per mode: exactness, resends, tail
drops, marked results, seconds and the smallest window any worker went down to, and how many
times fewer resends and drops AIMD had than the fixed window (the figure: 3 or more on an idle
machine; timing-dependent, so a benchmark's and not a test's).

    .venv/bin/python scripts/bench_pacing.py --out bench/pacing.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOPO = REPO / "tests" / "data" / "pacing" / "tree_thin.yaml"
MODES = {"fixed": ["--pacing", "fixed", "--ecn-fraction", "0"], "aimd": ["--pacing", "aimd", "--ecn-fraction", "0"],
         "aimd_ecn": ["--pacing", "aimd"]}


def run(mode: str, out: Path, elements: int) -> dict:
    """One `aggnet run` and its results.json; exits with its error if the run fails."""
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "run", "--topo", str(TOPO), "--workload", "allreduce",
                           "--elements", str(elements), "--slots", "32", "--lanes", "32", *MODES[mode],
                           "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"error: aggnet run {' '.join(MODES[mode])} failed: {done.stderr.strip().splitlines()[-1:]}")
    (run_dir,) = out.iterdir()
    return json.loads((run_dir / "results.json").read_text())


def summary(results: dict) -> dict:
    workers = results["per_worker"].values()
    return {"allreduce_exact": results["allreduce_exact"], "seconds": results["seconds"],
            "resends": sum(w["retransmissions"] for w in workers),
            "marked_results": sum(w["marked_results"] for w in workers),
            "tail_drops": sum(q["tail_drops"] for switch in results["queues"].values() for q in switch.values()),
            "smallest_window": min(w["smallest_window"] for w in workers)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=12000)
    parser.add_argument("--out", help="write the JSON report here too")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("error: needs root (Mininet)")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {mode: summary(run(mode, Path(tmp) / mode, args.elements)) for mode in MODES}
    fixed = runs["fixed"]
    report = {"elements": args.elements, "pacing": runs,
              **{f"fewer_resends_{mode}": fixed["resends"] / max(runs[mode]["resends"], 1) for mode in ("aimd", "aimd_ecn")},
              **{f"fewer_drops_{mode}": fixed["tail_drops"] / max(runs[mode]["tail_drops"], 1)
                 for mode in ("aimd", "aimd_ecn")}}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
