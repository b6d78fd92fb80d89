#!/usr/bin/env python3
"""Benchmark: SOAR (and min-congestion) on a seeded random tree of many switches.

The tree is a random recursive tree (switch i hangs off a uniformly chosen earlier switch);
every leaf switch gets 1..8 workers. Writes JSON to --out; scripts/bench.sh calls this.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time

from controller.placement import AggTree, evaluate, min_congestion, soar


def random_tree(switches: int, seed: int) -> AggTree:
    rng = random.Random(seed)
    names = [f"s{i}" for i in range(1, switches + 1)]
    parent = {names[0]: None}
    for i in range(1, switches):
        parent[names[i]] = names[rng.randrange(i)]
    inner = set(parent.values())
    workers, count = {}, 0
    for s in names:
        if s not in inner:
            n = rng.randint(1, 8)
            workers[s] = tuple(f"w{count + j}" for j in range(n))
            count += n
    return AggTree(root=names[0], parent=parent, workers=workers, sink="ps")


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--switches", type=int, default=1000)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    tree = random_tree(args.switches, args.seed)
    height = max(_depths(tree).values())
    placed, soar_s = timed(soar, tree, args.k)
    congested, congestion_s = timed(min_congestion, tree, args.k)
    result = {
        "benchmark": "placement",
        "switches": args.switches, "workers": sum(map(tree.load, tree.order)), "height": height,
        "k": args.k, "seed": args.seed,
        "soar_seconds": round(soar_s, 3), "soar_utilization": placed.utilization,
        "congestion_seconds": round(congestion_s, 3), "congestion_max_link_load": congested.max_link_load,
        "none_utilization": evaluate(tree, ()).utilization,
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    print(json.dumps(result))
    return 0


def _depths(tree: AggTree) -> dict[str, int]:
    depth = {tree.root: 0}
    for v in tree.order[1:]:
        depth[v] = depth[tree.parent[v]] + 1
    return depth


if __name__ == "__main__":
    sys.exit(main())
