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
runs at 4 (its hosts quantize in Python: 8 of them used 1.6 of the 2 cores at F = 4) and the
others at --scale (their hosts barely use the cores; the parameter server at F = 4 ran 1.21-1.23
times its model with its link 83% busy, 1.06-1.08 and 94-95% at F = 1: docs/models.md). A case
whose comparison.json exists is kept, so an interrupted run resumes.

Writes DIR/models.json (per model and case: each scheme's measured and analytic iteration,
exposed communication, what bound it, and the speedups) and DIR/models.png. What bound a run is the
fidelity monitor's verdict over its communication phases (`bound_over`: the times any all-reduce
was in flight; testbed.fidelity): DDP hides communication behind the backward pass, so over whole
iterations no link looks busy.

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

SCHEMES = ("innet", "ring", "ps")
TOPOLOGY = {4: "star8", 8: "star9"}
# The parameter server takes VGG-16's 400 MB bucket (its first fully connected layer) from 8 workers
# one after the other: at 1 Gb/s emulated a worker waits longer than the default 30 s to be heard.
COMM_TIMEOUT_S = 600  # one host more than workers: the parameter server's


def run_case(out: Path, model: str, workers: int, gbps: float, args: argparse.Namespace) -> Path:
    """The case's comparison.json, running `aggnet compare` unless it is there already."""
    folder = out / f"{model}-{workers}w-{gbps:g}gbps"
    done = sorted(folder.glob("compare-*/comparison.json"))
    if done:
        return done[-1]
    grad_scale = args.link_mbps * 1e6 / (gbps * 1e9)
    cmd = [sys.executable, "-m", "testbed.cli", "compare", "--schemes", ",".join(SCHEMES),
           "--workload", f"model:{model}", "--profile", args.profile, "--topo", TOPOLOGY[workers],
           "--workers", str(workers), "--link-mbps", repr(args.link_mbps), "--grad-scale", repr(grad_scale),
           "--iterations", str(args.iterations), "--lanes", str(args.lanes), "--out", str(folder),
           "--comm-timeout", str(COMM_TIMEOUT_S), "--scale", repr(args.scale), "--scheme-scale", args.scheme_scale]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)
    return sorted(folder.glob("compare-*/comparison.json"))[-1]


def case_entry(comparison: Path, workers: int, gbps: float) -> dict:
    """Per scheme the run's figures, and in-network's speedups."""
    from testbed.report import bottleneck_text

    runs = json.loads(comparison.read_text())["runs"]
    schemes = {}
    for scheme, run_dir in runs.items():
        r = json.loads((Path(run_dir) / "results.json").read_text())
        schemes[scheme] = {k: r.get(k) for k in ("iteration_s", "compute_s", "exposed_comm_s", "analytic_iteration_s",
                                                 "measured_vs_analytic", "sums_correct", "run_dir")}
        fidelity = r.get("fidelity") or {}
        schemes[scheme].update(bound_by=bottleneck_text(fidelity), bound_over=fidelity.get("measured_over"),
                               time_scale=r.get("time_scale", {}).get("factor", 1))
    innet = schemes["innet"]["iteration_s"]
    return {"workers": workers, "emulated_gbps": gbps, "schemes": schemes,
            "speedup_vs_ring": schemes["ring"]["iteration_s"] / innet,
            "speedup_vs_ps": schemes["ps"]["iteration_s"] / innet}


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
    print(f"bench_models.py: {out}/models.json and models.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
