#!/usr/bin/env python3
"""The all-reduce alone at datacenter speed: goodput (elements a second of each worker's vector)
against workers at emulated 100 Gb/s, beside the link bounds and SwitchML's published
microbenchmark (root: Mininet).

Per worker count (4 on star8, 8 on star9, 16 on star17): `aggnet compare --schemes innet,ring
--workload allreduce --elements N --link-mbps E --scale F`, F = E / (--real-mbps / workers), so the
worker links carry --real-mbps together on this machine whatever the workers (testbed.timescale:
goodput is reported in the cluster's time). The bounds are the bytes each scheme puts on its
busiest link (hosts.models.analytic.link_bytes) at the link rate: in-network one 1514-byte frame
every 364 values each way; the ring 2 (W-1)/W of the vector in TCP frames, with the ACKs of the
flow coming the other way. SwitchML (Sapio et al., NSDI 2021) measured about 2.8 billion elements a
second at 100 Gb/s for 4 to 16 workers, flat as workers grow (SWITCHML_GELEMENTS).

Writes DIR/goodput.json (per worker count and scheme: goodput, bound, their ratio, what bound the
run), DIR/goodput.png and DIR/goodput.md.

    .venv/bin/python scripts/bench_goodput.py --out bench/goodput [--workers 4,8,16] [--gbps 100]
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

from hosts.models.analytic import link_bytes  # noqa: E402
from testbed.timescale import time_scale_of  # noqa: E402

SCHEMES = ("innet", "ring")
TOPOLOGY = {4: "star8", 8: "star9", 16: "star17"}
SWITCHML_GELEMENTS = 2.8
GRAD_BYTES = 4  # int32 elements


def bound(scheme: str, elements: int, workers: int, lanes: int, gbps: float) -> float:
    """Elements a second when the scheme's busiest link is the only limit."""
    return elements / (link_bytes(scheme, elements * GRAD_BYTES, workers, lanes) * 8 / (gbps * 1e9))


def run_case(out: Path, workers: int, args: argparse.Namespace) -> dict[str, dict]:
    """Both schemes' results.json for one worker count (run unless a run is there already)."""
    folder = out / f"allreduce-{workers}w-{args.gbps:g}gbps"
    if not list(folder.glob("compare-*/comparison.json")):
        scale = args.gbps * 1000 / (args.real_mbps / workers)
        cmd = [sys.executable, "-m", "testbed.cli", "compare", "--schemes", ",".join(SCHEMES), "--workload",
               "allreduce", "--elements", str(args.elements), "--topo", TOPOLOGY[workers], "--workers", str(workers),
               "--lanes", str(args.lanes), "--link-mbps", repr(args.gbps * 1000), "--scale", repr(scale),
               "--out", str(folder)]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=REPO)
    comparison = max(folder.glob("compare-*/comparison.json"), key=lambda p: p.stat().st_mtime)
    return {s: json.loads((Path(d) / "results.json").read_text())
            for s, d in json.loads(comparison.read_text())["runs"].items()}


def case_entry(runs: dict[str, dict], workers: int, args: argparse.Namespace) -> dict:
    from testbed.report import bottleneck_text

    entry: dict = {"workers": workers}
    for scheme, r in runs.items():
        limit = bound(scheme, args.elements, workers, args.lanes, args.gbps)
        entry[scheme] = {"goodput": r["goodput_elements_per_s"], "bound": limit,
                         "of_bound": r["goodput_elements_per_s"] / limit, "exact": r["allreduce_exact"],
                         "bound_by": bottleneck_text(r.get("fidelity") or {}), "time_scale": time_scale_of(r),
                         "run_dir": r["run_dir"]}
    return entry


def markdown_table(goodput: dict) -> str:
    lines = ["| workers | in-network (G elements/s, of its bound) | ring (G elements/s, of its bound) "
             "| in-network / ring | bound: innet / ring |", "|---|---|---|---|---|"]
    for c in goodput["cases"]:
        i, r = c["innet"], c["ring"]
        lines.append(f"| {c['workers']} | {i['goodput'] / 1e9:.2f} of {i['bound'] / 1e9:.2f} ({i['of_bound']:.0%}) "
                     f"| {r['goodput'] / 1e9:.2f} of {r['bound'] / 1e9:.2f} ({r['of_bound']:.0%}) "
                     f"| {i['goodput'] / r['goodput']:.2f}x | {i['bound_by']} / {r['bound_by']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/goodput")
    parser.add_argument("--workers", default="4,8,16")
    parser.add_argument("--gbps", type=float, default=100.0, help="the emulated link rate")
    parser.add_argument("--real-mbps", type=float, default=100.0, help="what the worker links carry together here")
    parser.add_argument("--elements", type=int, default=2_000_000)
    parser.add_argument("--lanes", type=int, default=364)
    args = parser.parse_args()
    from testbed.plots import plot_goodput

    out = Path(args.out)
    counts = [int(w) for w in args.workers.split(",")]
    bad = [w for w in counts if w not in TOPOLOGY]
    if bad:
        print(f"bench_goodput.py: --workers: {bad[0]} is not one of {', '.join(map(str, TOPOLOGY))}", file=sys.stderr)
        return 2
    goodput = {"gbps": args.gbps, "elements": args.elements, "lanes": args.lanes, "real_mbps": args.real_mbps,
               "switchml_gelements": SWITCHML_GELEMENTS,
               "cases": [case_entry(run_case(out, w, args), w, args) for w in counts]}
    (out / "goodput.json").write_text(json.dumps(goodput, indent=2) + "\n")
    plot_goodput(goodput, out / "goodput.png")
    (out / "goodput.md").write_text(markdown_table(goodput))
    print(f"bench_goodput.py: {out}/goodput.json, goodput.png and goodput.md (the table)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
