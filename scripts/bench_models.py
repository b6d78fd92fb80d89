#!/usr/bin/env python3
"""The evaluation figure: per model, in-network aggregation's speedup over the ring and over the
parameter server, at emulated 10, 25 and 100 Gb/s, with 4, 8 and 16 workers (root: Mininet).

Every case is one `aggnet compare --schemes innet,ring,ps --workload model:NAME`: 4 workers on
star8, 8 on star9, 16 on star17 (the parameter server on a host of its own), each model's GPU
profile (--profile: another one). A case at emulated E Gb/s runs F = max(--min-scale, --scale-per-gbps
x E) times slower (testbed.timescale), its worker links at --real-mbps / workers (so that the machine
moves the same bytes a second whatever the workers), sending grad scale G = link rate x F / E of
every bucket (hosts.models.analytic: a link of R emulates R F / G). F grows with E because what a
bucket costs besides its bytes (a round trip, the exponent vote, waking processes) is this
machine's time: in the cluster's time it is 1/F of it, against a bucket whose transfer is 1/E
(at 100 Gb/s a 25 MB bucket takes 2 ms; with F = 40, 3 ms of this machine's time is 0.075 ms), and
on a machine other work keeps busy it is tens of ms (ResNet-50 at 10 Gb/s, 4 workers, load average
15-25: in-network 1.38 of its model at F = 4, 1.09 at F = 16).
An in-network or ring run that the fidelity monitor found not bound by a link runs again ESCALATE
times slower, up to --max-scale (by default once for every case of the figure): the figure says
links bound them. A case that ran already is kept, so an interrupted run resumes.

Writes DIR/models.json (per model and case: each scheme's measured and analytic iteration,
exposed communication, what bound it, its time scale, the speedups measured and predicted by the
analytic model), DIR/models.png and DIR/models.md (the table). What bound a run is the fidelity
monitor's verdict over its communication phases (`bound_over`: the times any all-reduce was in
flight; testbed.fidelity): DDP hides communication behind the backward pass, so over whole
iterations no link looks busy.

    .venv/bin/python scripts/bench_models.py --out bench/models [--models resnet50,gpt2] [--rates-gbps 10,100]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from hosts.models import MODEL_NAMES  # noqa: E402
from testbed.timescale import time_scale_of  # noqa: E402

SCHEMES = ("innet", "ring", "ps")
TOPOLOGY = {4: "star8", 8: "star9", 16: "star17"}
FIGURE_MODELS = ("resnet50", "vgg16", "bert-base", "gpt2", "ncf")  # the LSTM's 7 GB a step: --models lstm
# The parameter server takes VGG-16's 400 MB bucket (its first fully connected layer) from 16 workers
# one after the other: a worker waits longer than the default 30 s (the cluster's) to be heard.
COMM_TIMEOUT_S = 600
# The runs the figure says links bound: one the monitor found bound by anything else (its links short
# of testbed.fidelity.BUSY, or a process) runs again ESCALATE times slower, up to --max-scale.
LINK_BOUND = ("innet", "ring")
ESCALATE = 4
MAX_SCALE = 160  # ESCALATE x the figure's largest case scale (100 Gb/s: 40): one repeat of each case


def case_scale(gbps: float, args: argparse.Namespace) -> float:
    """F for a case at `gbps` emulated (module docstring)."""
    return max(args.min_scale, round(args.scale_per_gbps * gbps, 6))


def compare(folder: Path, model: str, workers: int, gbps: float, schemes: list[str], scale: float,
            args: argparse.Namespace) -> None:
    """`aggnet compare` of `schemes` for one case at time scale `scale`, into a new compare-* folder."""
    link_mbps = args.real_mbps / workers * scale  # before the time scale divides it
    grad_scale = link_mbps * 1e6 / (gbps * 1e9)
    cmd = [sys.executable, "-m", "testbed.cli", "compare", "--schemes", ",".join(schemes),
           "--workload", f"model:{model}", *(["--profile", args.profile] if args.profile else []),
           "--topo", TOPOLOGY[workers], "--workers", str(workers), "--link-mbps", repr(link_mbps),
           "--grad-scale", repr(grad_scale), "--iterations", str(args.iterations), "--lanes", str(args.lanes),
           "--out", str(folder), "--comm-timeout", str(COMM_TIMEOUT_S), "--scale", repr(scale)]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)


def latest_runs(folder: Path) -> dict[str, dict]:
    """Per scheme, its results.json (with run_dir) from the latest compare-* folder that ran it."""
    runs: dict[str, dict] = {}
    for comparison in sorted(folder.glob("compare-*/comparison.json"), key=lambda p: p.stat().st_mtime):
        for scheme, run_dir in json.loads(comparison.read_text())["runs"].items():
            runs[scheme] = json.loads((Path(run_dir) / "results.json").read_text()) | {"run_dir": run_dir}
    return runs


def link_bound(run: dict) -> bool:
    """Whether the fidelity monitor named a link as what bound the run."""
    return ((run.get("fidelity") or {}).get("bottleneck") or {}).get("kind") == "link"


def run_case(out: Path, model: str, workers: int, gbps: float, args: argparse.Namespace) -> dict[str, dict]:
    """The case's runs per scheme: `aggnet compare` of all schemes unless it ran already, then a link-bound
    scheme whose run was not bound by a link again, slower (ESCALATE), until it is or --max-scale."""
    folder = out / f"{model}-{workers}w-{gbps:g}gbps"
    if not list(folder.glob("compare-*/comparison.json")):
        compare(folder, model, workers, gbps, args.schemes.split(","), case_scale(gbps, args), args)
    runs = latest_runs(folder)
    for scheme in (s for s in LINK_BOUND if s in runs):
        scale = time_scale_of(runs[scheme])
        while not link_bound(runs[scheme]) and scale * ESCALATE <= args.max_scale:
            scale *= ESCALATE
            compare(folder, model, workers, gbps, [scheme], scale, args)
            runs = latest_runs(folder)
    return runs


def case_entry(runs: dict[str, dict], workers: int, gbps: float) -> dict:
    """Per scheme the run's figures, and in-network's speedups."""
    from testbed.report import bottleneck_text

    schemes = {}
    for scheme, r in runs.items():
        schemes[scheme] = {k: r.get(k) for k in ("iteration_s", "compute_s", "exposed_comm_s", "analytic_iteration_s",
                                                 "measured_vs_analytic", "sums_correct", "run_dir")}
        fidelity = r.get("fidelity") or {}
        schemes[scheme].update(bound_by=bottleneck_text(fidelity), bound_over=fidelity.get("measured_over"),
                               busiest_link=max((fidelity.get("link_utilization") or {}).values(), default=None),
                               time_scale=time_scale_of(r))
    entry: dict = {"workers": workers, "emulated_gbps": gbps, "schemes": schemes}
    innet = schemes["innet"]
    for other in ("ring", "ps"):  # None where the scheme did not run (--schemes)
        run = schemes.get(other)
        entry[f"speedup_vs_{other}"] = run["iteration_s"] / innet["iteration_s"] if run else None
        entry[f"analytic_speedup_vs_{other}"] = run["analytic_iteration_s"] / innet["analytic_iteration_s"] if run else None
    return entry


def markdown_table(figure: dict) -> str:
    """The figure as a table: per case each scheme's iteration (ms), in-network's speedups, each
    measured / analytic ratio and what bound each run (the busiest link's load when nothing did)."""
    lines = ["| model, workers, emulated rate | in-network (ms) | ring (ms, speedup; analytic) | PS (ms, speedup; "
             "analytic) | measured / analytic: innet, ring, PS | bound: innet / ring / PS |", "|---|---|---|---|---|---|"]
    for model, cases in figure["models"].items():
        for case in cases:
            runs = [case["schemes"].get(s) for s in SCHEMES]
            ms = [f"{r['iteration_s'] * 1e3:,.0f}" if r else "-" for r in runs]
            ratios = ", ".join(f"{r['measured_vs_analytic']:.2f}" if r else "-" for r in runs)
            bound = ["-" if not r else r["bound_by"] if r["bound_by"] != "none" else f"none ({r['busiest_link']:.0%})"
                     for r in runs]
            speedups = [f" ({case[f'speedup_vs_{s}']:.2f}x; {case[f'analytic_speedup_vs_{s}']:.2f}x)"
                        if case[f"speedup_vs_{s}"] else "" for s in ("ring", "ps")]
            lines.append(f"| {model}, {case['workers']}, {case['emulated_gbps']:g} Gb/s | {ms[0]} "
                         f"| {ms[1]}{speedups[0]} | {ms[2]}{speedups[1]} | {ratios} | {' / '.join(bound)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/models")
    parser.add_argument("--models", default=",".join(FIGURE_MODELS))
    parser.add_argument("--workers", default="4,8,16")
    parser.add_argument("--rates-gbps", default="10,25,100", help="the emulated link rates (Gb/s)")
    parser.add_argument("--real-mbps", type=float, default=100.0,
                        help="what the worker links carry together on this machine (Mb/s), each its share")
    parser.add_argument("--scale-per-gbps", type=float, default=0.4, help="time scale F per emulated Gb/s")
    parser.add_argument("--min-scale", type=float, default=16.0, help="the smallest time scale F")
    parser.add_argument("--profile", default=None, help="compute profiles (shipped name; default: each model's GPU one)")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--schemes", default=",".join(SCHEMES), help="innet and the baselines to run (innet first)")
    parser.add_argument("--lanes", type=int, default=364)
    parser.add_argument("--max-scale", type=float, default=MAX_SCALE,
                        help="the slowest time scale a run not bound by a link is repeated at")
    args = parser.parse_args()
    from testbed.plots import plot_model_speedups

    out = Path(args.out)
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in MODEL_NAMES]
    if bad:
        print(f"bench_models.py: --models: {', '.join(bad)} not among {', '.join(MODEL_NAMES)}", file=sys.stderr)
        return 2
    figure: dict = {"profile": args.profile or "GPU (each model's)", "real_mbps": args.real_mbps,
                    "scale_per_gbps": args.scale_per_gbps, "models": {}}
    for model in models:
        figure["models"][model] = [
            case_entry(run_case(out, model, int(w), float(g), args), int(w), float(g))
            for w in args.workers.split(",") for g in args.rates_gbps.split(",")]
        (out / "models.json").write_text(json.dumps(figure, indent=2) + "\n")
    plot_model_speedups(figure, out / "models.png")
    (out / "models.md").write_text(markdown_table(figure))
    print(f"bench_models.py: {out}/models.json, models.png and models.md (the table)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
