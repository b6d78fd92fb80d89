"""Aggregation trees: the input of every placement algorithm, and how a job's tree is cut
out of a topology that may have many equal-cost paths (leaf-spine, fat-tree).

Model (SOAR's): the tree's nodes are switches; worker hosts hang off switches and each sends
one message up its own link. A message crossing link e costs weight(e) (1 by default, so the
cost is a message count). Messages flow up to the *sink*:
- `sink` is a host (a parameter server), as in the SOAR paper's destination server: the root
  switch has an uplink to it and may aggregate like any other switch (using one unit of k);
- `sink` is None (AggNet's in-network all-reduce): the root switch itself is the sink. It
  always aggregates (it completes the sum and multicasts the result down), this is free
  (outside k), and it has no uplink. Equivalent to the paper's model with a zero-cost link
  from the root to the destination and the root's aggregation not counted.
Only the upward aggregation traffic is modelled; the multicast of the result is not.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import networkx as nx

from controller.topology import Topology

Edge = tuple[str, str]  # (child, parent): the direction messages travel
WEIGHT_MODES = ("unit", "capacity")


class PlacementError(ValueError):
    """Bad placement input (names, k, tree shape); one line, exit code 2."""

    exit_code = 2


@dataclass
class AggTree:
    root: str
    parent: Mapping[str, str | None]  # every switch of the tree -> its parent switch; root -> None
    workers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # switch -> attached workers
    sink: str | None = None
    weights: Mapping[Edge, float] = field(default_factory=dict)  # missing edges weigh 1
    children: dict[str, list[str]] = field(init=False, repr=False)
    order: list[str] = field(init=False, repr=False)  # top-down (root first); reversed = bottom-up

    def __post_init__(self) -> None:
        if self.parent.get(self.root, "missing") is not None:
            raise PlacementError(f"tree: root '{self.root}' must be in parent with parent None")
        self.children = {v: [] for v in self.parent}
        for v, p in self.parent.items():
            if v == self.root:
                continue
            if p not in self.children:
                raise PlacementError(f"tree: parent of '{v}' is '{p}', which is not a switch of the tree")
            self.children[p].append(v)
        self.order = [self.root]
        for v in self.order:  # breadth-first; grows while iterating
            self.order.extend(self.children[v])
        if len(self.order) != len(self.parent):
            stuck = sorted(set(self.parent) - set(self.order))
            raise PlacementError(f"tree: switches {', '.join(stuck)} form a loop, not reachable from root '{self.root}'")
        for v in self.workers:
            if v not in self.parent:
                raise PlacementError(f"tree: workers attached to '{v}', which is not a switch of the tree")
        for edge, w in self.weights.items():
            if not w >= 0:
                raise PlacementError(f"tree: weight of link {edge[0]}-{edge[1]} must be >= 0, got {w}")

    @property
    def switches(self) -> list[str]:
        return self.order

    def uplink(self, v: str) -> Edge | None:
        """The link v sends its messages on; None for a root switch that is the sink."""
        p = self.parent[v]
        if p is not None:
            return (v, p)
        return (v, self.sink) if self.sink is not None else None

    def worker_links(self, v: str) -> list[Edge]:
        return [(h, v) for h in self.workers.get(v, ())]

    def weight(self, edge: Edge) -> float:
        return float(self.weights.get(edge, 1.0))

    def load(self, v: str) -> int:
        """Workers attached directly to v."""
        return len(self.workers.get(v, ()))

    def subtree_loads(self) -> dict[str, int]:
        """Workers in each switch's subtree."""
        total = {v: self.load(v) for v in self.order}
        for v in reversed(self.order):
            p = self.parent[v]
            if p is not None:
                total[p] += total[v]
        return total


def job_tree(topo: Topology, workers: list[str], root: str | None = None,
             link_load: Mapping[frozenset[str], float] | None = None,
             weight_mode: str = "unit", require_tree: bool = False) -> AggTree:
    """Cut a job's aggregation tree out of the topology.

    Rule, deterministic: every worker reaches the root switch on a shortest path (hop count).
    Walking from the worker's switch toward the root, among the next hops one hop closer we
    prefer (1) a switch already in this job's tree, so branches merge and can aggregate early,
    then (2) the least predicted load on the link (`link_load`, messages already placed by other
    jobs), so two jobs do not pile onto one spine, then (3) topology order. Workers are taken in
    topology order. `root`: a host (parameter server; its switch is the root switch), a switch
    (aggregates, and is the sink), or None (the switch with the least total hop distance to the
    workers; ties: smallest maximum distance, least predicted load on its links, topology order).
    """
    if weight_mode not in WEIGHT_MODES:
        raise PlacementError(f"weight: unknown mode '{weight_mode}' (choose from {', '.join(WEIGHT_MODES)})")
    load = link_load or {}
    g = topo.graph()
    if require_tree and not nx.is_forest(g):
        cycle = " - ".join(a for a, _ in nx.find_cycle(g))
        raise PlacementError(f"{topo.source}: topology has a loop ({cycle}) but a tree is required")
    _check_workers(topo, workers, root)
    switch_index = {s: i for i, s in enumerate(topo.switches)}
    if root is None:
        root_switch, sink = _closest_switch(topo, g, workers, load, switch_index), None
    elif topo.is_host(root):
        root_switch, sink = topo.switch_of(root), root
    elif topo.is_switch(root):
        root_switch, sink = root, None
    else:
        raise PlacementError(f"{topo.source}: --root: unknown node '{root}'")

    dist = _switch_distances(topo, g, root_switch)
    parent: dict[str, str | None] = {root_switch: None}
    attached: dict[str, list[str]] = {}
    for host in sorted(workers, key=list(topo.hosts).index):
        u = topo.switch_of(host)
        if u not in dist:
            raise PlacementError(f"{topo.source}: worker '{host}' is not reachable from root '{root_switch}'")
        attached.setdefault(u, []).append(host)
        while u not in parent:
            nexts = [n for n in g.neighbors(u) if dist.get(n) == dist[u] - 1]
            best = min(nexts, key=lambda n: (n not in parent, load.get(frozenset((u, n)), 0.0), switch_index[n]))
            parent[u] = best
            u = best
    tree = AggTree(root=root_switch, parent=parent, workers={s: tuple(h) for s, h in attached.items()}, sink=sink)
    if weight_mode == "capacity":
        tree.weights = _capacity_weights(topo, tree)
    return tree


def _check_workers(topo: Topology, workers: list[str], root: str | None) -> None:
    if not workers:
        raise PlacementError(f"{topo.source}: --workers: a job needs at least one worker")
    seen = set()
    for h in workers:
        if not topo.is_host(h):
            kind = "a switch, not a host" if topo.is_switch(h) else "unknown host"
            raise PlacementError(f"{topo.source}: --workers: '{h}' is {kind}")
        if h in seen:
            raise PlacementError(f"{topo.source}: --workers: '{h}' listed twice")
        seen.add(h)
    if root in seen:
        raise PlacementError(f"{topo.source}: --root: '{root}' is also a worker; the parameter server is not")


def _switch_distances(topo: Topology, g: nx.Graph, root_switch: str) -> dict[str, int]:
    """Hop distances from the root switch over switches only (hosts never forward)."""
    return nx.single_source_shortest_path_length(g.subgraph(topo.switches), root_switch)


def _closest_switch(topo: Topology, g: nx.Graph, workers: list[str],
                    load: Mapping[frozenset[str], float], switch_index: dict[str, int]) -> str:
    def score(s: str) -> tuple:
        dist = _switch_distances(topo, g, s)
        hops = [dist.get(topo.switch_of(h), float("inf")) for h in workers]
        through = sum(load.get(frozenset((s, n)), 0.0) for n in g.neighbors(s))
        return (sum(hops), max(hops), through, switch_index[s])
    return min(topo.switches, key=score)


def _capacity_weights(topo: Topology, tree: AggTree) -> dict[Edge, float]:
    """Cost per message = fastest link rate / this link's rate: slow links cost more; unrated links weigh 1."""
    rates = [link.bw_mbps for link in topo.links if link.bw_mbps]
    fastest = max(rates, default=1.0)
    edges = [e for v in tree.order for e in tree.worker_links(v) + [tree.uplink(v)] if e is not None]
    weights = {}
    for a, b in edges:
        bw = topo.link_between(a, b).bw_mbps
        weights[(a, b)] = fastest / bw if bw else 1.0
    return weights
