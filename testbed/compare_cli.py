"""`aggnet compare --schemes innet,ps,ring [run options]`: the same experiment once per scheme.

Every scheme runs with the same options and seeds, one after the other, each in its own
run folder under DIR/compare-<ts>/<scheme>/. The compare folder then gets comparison.json
(per scheme: step time, accuracy, bytes on the compared link), comparison.png, and the
table is printed. The compared link is each run's busiest: for ps the server's link (where
it concentrates its traffic), for innet a worker's link (the server's link carries nothing
there when the server has a host of its own), for ring a worker's link.

`--scheme-scale innet=4` runs one scheme at a time scale of its own (testbed.timescale): the
smallest F at which a scheme's runs are link-bound differs by scheme (in-network's hosts quantize
in Python; the ring's and parameter server's hosts barely use the cores), and results are in the
emulated cluster's time whatever F was.
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
    parser.add_argument("--scheme-scale", default="", metavar="SCHEME=F[,...]",
                        help="a scheme's own time scale, instead of --scale (e.g. innet=4)")
    run_cli.add_run_options(parser)


def scheme_scales(text: str, schemes: list[str]) -> dict[str, float]:
    """--scheme-scale's {scheme: F}; a bad entry is a RunError naming the option and the entry."""
    from testbed.run import RunError

    scales = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        scheme, _, value = entry.partition("=")
        try:
            factor = float(value)
        except ValueError:
            factor = 0.0
        if scheme not in schemes or not 1 <= factor < float("inf"):
            raise RunError(f"--scheme-scale: {entry!r}: give SCHEME=F with a compared scheme "
                           f"({', '.join(schemes)}) and F >= 1")
        scales[scheme] = factor
    return scales


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
    scales = scheme_scales(args.scheme_scale, schemes)
    console = Console()
    folder = compare_dir(run_cli.config_from_args(args).out)
    by_scheme = {}
    for scheme in schemes:
        console.rule(f"scheme {scheme}")
        cfg = run_cli.config_from_args(args)
        cfg = dataclasses.replace(cfg, job=dataclasses.replace(cfg.job, scheme=scheme), out=str(folder / scheme),
                                  scale=scales.get(scheme, cfg.scale))
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
