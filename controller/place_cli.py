"""`aggnet place`: placement only. Which switches aggregate for one job, the link loads, the utilization, as JSON."""
from __future__ import annotations

import argparse

ALGO_CHOICES = "soar|congestion|none|all|topk|random"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topo", required=True, help="topology YAML file")
    parser.add_argument("--k", type=int, required=True, help="at most K aggregating switches (a sink root switch is free)")
    parser.add_argument("--algo", default="soar", help=f"{ALGO_CHOICES} (default soar)")
    parser.add_argument("--root", help="parameter-server host, or root switch (default: the switch closest to the workers)")
    parser.add_argument("--workers", help="comma-separated worker hosts (default: every host but the root)")
    parser.add_argument("--seed", type=int, default=0, help="seed for --algo random (default 0)")
    parser.add_argument("--weight", default="unit", help="link cost per message: unit (message count) or capacity "
                                                        "(fastest rate / link rate)")
    parser.add_argument("--require-tree", action="store_true", help="fail if the topology has a loop instead of "
                                                                    "cutting a shortest-path tree")


def run(args: argparse.Namespace) -> int:
    import json

    from controller.placement import job_tree, place
    from controller.topology import load_topology

    topo = load_topology(args.topo)
    if args.workers:
        workers = [h.strip() for h in args.workers.split(",") if h.strip()]
    else:
        workers = [h for h in topo.hosts if h != args.root]
    tree = job_tree(topo, workers, args.root, weight_mode=args.weight, require_tree=args.require_tree)
    result = place(tree, args.k, args.algo, seed=args.seed)
    out = {"topology": topo.name, "k": args.k, "root": tree.root, "sink": tree.sink, "workers": workers}
    out.update(result.to_json())
    print(json.dumps(out, indent=2))
    return 0
