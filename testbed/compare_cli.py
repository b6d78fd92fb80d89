"""`aggnet compare --schemes innet,ps,ring [run options]`: the same experiment once per scheme.

Every scheme runs with the same options and seeds, one after the other, each in its own
run folder under DIR/compare-<ts>/<scheme>/. The compare folder then gets comparison.json
(per scheme: step time, accuracy, bytes on the compared link), comparison.png, and the
table is printed. The compared link is each run's busiest: for ps the server's link (where
it concentrates its traffic), for innet a worker's link (the server's link carries nothing
there when the server has a host of its own), for ring a worker's link.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from testbed import run_cli

    parser.add_argument("--schemes", default="innet,ps,ring", help="comma-separated schemes, first is the baseline "
                                                                  "the others are compared to (default innet,ps,ring)")
    run_cli.add_run_options(parser)


def compare_dir(root: str) -> Path:
    """DIR/compare-<timestamp>, unique."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = Path(root) / f"compare-{stamp}", 1
    while path.exists():
        n += 1
        path = Path(root) / f"compare-{stamp}-{n}"
    return path


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from rich.console import Console

    from hosts.agent_config import SCHEMES
    from testbed import plots, report, run_cli
    from testbed.run import RunError

    schemes = [s.strip() for s in args.schemes.split(",") if s.strip()]
    bad = [s for s in schemes if s not in SCHEMES]
    if bad or not schemes or len(set(schemes)) != len(schemes):
        raise RunError(f"--schemes: {args.schemes!r}: give distinct schemes from {', '.join(SCHEMES)}")
    console = Console()
    folder = compare_dir(run_cli.config_from_args(args).out)
    by_scheme = {}
    for scheme in schemes:
        console.rule(f"scheme {scheme}")
        cfg = run_cli.config_from_args(args)
        cfg = dataclasses.replace(cfg, job=dataclasses.replace(cfg.job, scheme=scheme), out=str(folder / scheme))
        by_scheme[scheme] = run_cli.execute(cfg, console)
    summary = report.compare_summary(by_scheme)
    (folder / "comparison.json").write_text(json.dumps(
        {"schemes": summary, "runs": {s: r["run_dir"] for s, r in by_scheme.items()}}, indent=2) + "\n")
    plots.plot_comparison(summary, folder / "comparison.png")
    console.print(report.comparison_table(summary))
    for results in by_scheme.values():
        if "iteration_s" in results:  # a model workload: each scheme's iteration beside the analytic model
            console.print(run_cli.model_line(results))
    console.print(f"comparison in {folder}/comparison.json and comparison.png")
    return 0
