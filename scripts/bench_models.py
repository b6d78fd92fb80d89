#!/usr/bin/env python3
"""The evaluation figure: per model, in-network aggregation's speedup over the ring and over the
parameter server, at two emulated link rates, with 4 and 8 workers (root: Mininet).

Every case is one `aggnet compare --schemes innet,ring,ps --workload model:NAME`: 4 workers on
star8 and 8 on star9 (the parameter server on a host of its own), links shaped to --link-mbps.
An emulated rate of E Gb/s is reached by sending --grad-scale = link rate / E of every bucket
(hosts.models.analytic: a link of R emulates R / grad scale), compute times from the models'
--profile. With --scale F the links run F times slower and everything else F times longer
(testbed.timescale), so that links, not this machine's shared cores, bound the runs; the times are
reported in the emulated cluster's. --scheme-scale gives a scheme its own F: by default in-network
runs at 4 (its hosts quantize in Python: 8 of them used 1.6 of the 2 cores at F = 4) and the others
at --scale (their hosts barely use the cores; the parameter server at F = 4 ran 1.21-1.23 times its
model with its link 83% busy, 1.06-1.08 and 94-95% at F = 1: docs/models.md). An in-network or ring
run that the fidelity monitor found not bound by a link runs again 4 times slower, up to F = 16
(--max-scale): the figure says links bound them. A case that ran already is kept, so an interrupted run resumes.

Writes DIR/models.json (per model and case: each scheme's measured and analytic iteration,
exposed communication, what bound it, its time scale, and the speedups), DIR/models.png and
DIR/models.md (the table). What bound a run is the fidelity monitor's verdict over its
communication phases (`bound_over`: the times any all-reduce was in flight; testbed.fidelity): DDP
hides communication behind the backward pass, so over whole iterations no link looks busy.

    .venv/bin/python scripts/bench_models.py --out bench/models [--models resnet50,gpt2] [--rates-gbps 1,10]
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
TOPOLOGY = {4: "star8", 8: "star9"}
# The parameter server takes VGG-16's 400 MB bucket (its first fully connected layer) from 8 workers
# one after the other: at 1 Gb/s emulated a worker waits longer than the default 30 s to be heard.
COMM_TIMEOUT_S = 600  # one host more than workers: the parameter server's


# The runs the figure says links bound: one the monitor found bound by anything else (its links short
# of testbed.fidelity.BUSY, or a process) runs again ESCALATE times slower, up to --max-scale.
LINK_BOUND = ("innet", "ring")
ESCALATE = 4
MAX_SCALE = 16


def compare(folder: Path, model: str, workers: int, gbps: float, schemes: list[str], scale_args: list[str],
            args: argparse.Namespace) -> None:
    """`aggnet compare` of `schemes` for one case, into a new compare-* folder under `folder`."""
    grad_scale = args.link_mbps * 1e6 / (gbps * 1e9)
    cmd = [sys.executable, "-m", "testbed.cli", "compare", "--schemes", ",".join(schemes),
           "--workload", f"model:{model}", "--profile", args.profile, "--topo", TOPOLOGY[workers],
           "--workers", str(workers), "--link-mbps", repr(args.link_mbps), "--grad-scale", repr(grad_scale),
           "--iterations", str(args.iterations), "--lanes", str(args.lanes), "--out", str(folder),
           "--comm-timeout", str(COMM_TIMEOUT_S), *scale_args]
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
        compare(folder, model, workers, gbps, list(SCHEMES), ["--scale", repr(args.scale), "--scheme-scale",
                                                              args.scheme_scale], args)
    runs = latest_runs(folder)
    for scheme in LINK_BOUND:
        scale = time_scale_of(runs[scheme])
        while not link_bound(runs[scheme]) and scale * ESCALATE <= args.max_scale:
            scale *= ESCALATE
            compare(folder, model, workers, gbps, [scheme], ["--scale", repr(scale)], args)
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
    innet = schemes["innet"]["iteration_s"]
    return {"workers": workers, "emulated_gbps": gbps, "schemes": schemes,
            "speedup_vs_ring": schemes["ring"]["iteration_s"] / innet,
            "speedup_vs_ps": schemes["ps"]["iteration_s"] / innet}


def markdown_table(figure: dict) -> str:
    """The figure as a table: per case each scheme's iteration (ms), in-network's speedups, each
    measured / analytic ratio and what bound each run (the busiest link's load when nothing did)."""
    lines = ["| model, workers, emulated rate | in-network (ms) | ring (ms, speedup) | PS (ms, speedup) "
             "| measured / analytic: innet, ring, PS | bound: innet / ring / PS |", "|---|---|---|---|---|---|"]
    for model, cases in figure["models"].items():
        for case in cases:
            runs = [case["schemes"][s] for s in SCHEMES]
            ms = [f"{r['iteration_s'] * 1e3:,.0f}" for r in runs]
            ratios = ", ".join(f"{r['measured_vs_analytic']:.2f}" for r in runs)
            bound = [r["bound_by"] if r["bound_by"] != "none" else f"none ({r['busiest_link']:.0%})" for r in runs]
            lines.append(f"| {model}, {case['workers']}, {case['emulated_gbps']:g} Gb/s | {ms[0]} "
                         f"| {ms[1]} ({case['speedup_vs_ring']:.2f}x) | {ms[2]} ({case['speedup_vs_ps']:.2f}x) "
                         f"| {ratios} | {' / '.join(bound)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/models")
    parser.add_argument("--models", default=",".join(MODEL_NAMES))
    parser.add_argument("--workers", default="4,8")
    parser.add_argument("--rates-gbps", default="1,10", help="the two emulated link rates (Gb/s)")
    parser.add_argument("--link-mbps", type=float, default=100.0, help="the real link rate (Mb/s)")
    parser.add_argument("--profile", default="cpu", help="compute profiles (shipped name)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--lanes", type=int, default=364)
    parser.add_argument("--scale", type=float, default=1.0, help="time scale F: links / F, compute x F")
    parser.add_argument("--scheme-scale", default="innet=4", help="a scheme's own time scale (SCHEME=F,...)")
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
    figure: dict = {"profile": args.profile, "link_mbps": args.link_mbps, "scale": args.scale,
                    "scheme_scale": args.scheme_scale, "models": {}}
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
