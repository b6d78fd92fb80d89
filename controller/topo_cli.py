"""`aggnet topo fat-tree K`: write a k-ary fat-tree topology file, so fabrics too big to write by
hand (k=8: 80 switches, 128 hosts) are one command away and the same every time.

Numbering (Al-Fares et al.'s fat-tree), with h = k/2: core switches s1..s(h*h); pod p (0..k-1) has
aggregation switches s(h*h + 1 + h*p)..s(h*h + h + h*p) and edge switches after all aggregation
switches, in the same pod order; edge switch e of pod p holds hosts h(1 + h*(h*p + e))... (h hosts
each). Aggregation switch j of every pod links to core switches s(1 + h*j)..s(h + h*j). Links are
listed pod by pod (each edge switch's hosts, then its uplinks), then aggregation to core, so an edge
switch's ports 1..h face its hosts and h+1..k its aggregation switches. `topologies/fattree4.yaml`
and `fattree8.yaml` are this command's output.
"""
from __future__ import annotations

import argparse


class TopoArgError(ValueError):
    """A bad `aggnet topo` argument; the message is one line."""

    exit_code = 2


def fat_tree_yaml(k: int, bw_mbps: float = 100) -> str:
    """The k-ary fat-tree as topology YAML (k even, >= 2): k^3/4 hosts, 5k^2/4 switches."""
    if k < 2 or k % 2:
        raise TopoArgError(f"aggnet topo fat-tree: K must be an even number >= 2, got {k}")
    half = k // 2
    cores = half * half
    agg = [[cores + 1 + half * p + j for j in range(half)] for p in range(k)]
    edge = [[cores + k * half + 1 + half * p + e for e in range(half)] for p in range(k)]
    rate = f", bw_mbps: {bw_mbps:g}"
    n_hosts = k * half * half
    lines = [f"# Fat-tree k={k}: core s1..s{cores}; pod p (0..{k - 1}) has aggregation "
             f"s{agg[0][0]}..s{agg[0][-1]} + {half}p and edge",
             f"# s{edge[0][0]}..s{edge[0][-1]} + {half}p; {half} hosts per edge switch ({n_hosts} hosts). "
             "Written by `aggnet topo fat-tree " + f"{k}`.",
             f"name: fattree{k}", "hosts:"]
    lines += [f"  - {{name: h{i}}}" for i in range(1, n_hosts + 1)]
    lines.append("switches:")
    lines += [f"  - {{name: s{i}}}" for i in range(1, cores + 2 * k * half + 1)]
    lines.append("links:")
    host = 1
    for p in range(k):
        lines.append(f"  # pod {p}: edge {', '.join(f's{s}' for s in edge[p])}; "
                     f"aggregation {', '.join(f's{s}' for s in agg[p])}")
        for e in edge[p]:
            for _ in range(half):
                lines.append(f"  - {{a: h{host}, b: s{e}{rate}}}")
                host += 1
            lines += [f"  - {{a: s{e}, b: s{a}{rate}}}" for a in agg[p]]
    for p in range(k):
        lines.append(f"  # pod {p} aggregation to core: "
                     + "; ".join(f"s{a} -> {', '.join(f's{1 + half * j + c}' for c in range(half))}"
                                 for j, a in enumerate(agg[p])))
        for j, a in enumerate(agg[p]):
            lines += [f"  - {{a: s{a}, b: s{1 + half * j + c}{rate}}}" for c in range(half)]
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shape", choices=["fat-tree"], help="the topology family (fat-tree)")
    parser.add_argument("k", type=int, help="fat-tree arity: an even number; k^3/4 hosts, 5k^2/4 switches")
    parser.add_argument("--bw-mbps", type=float, default=100, help="every link's rate in Mb/s (default 100)")
    parser.add_argument("-o", "--out", help="write the topology file here (default: standard output)")


def run(args: argparse.Namespace) -> int:
    if args.bw_mbps <= 0:
        raise TopoArgError(f"aggnet topo: --bw-mbps must be positive, got {args.bw_mbps:g}")
    text = fat_tree_yaml(args.k, args.bw_mbps)
    if args.out is None:
        print(text, end="")
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise TopoArgError(f"aggnet topo: --out {args.out}: {exc.strerror}") from None
    return 0
