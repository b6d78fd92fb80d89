"""Which switches of an aggregation tree aggregate ("blue") when at most k may.

Message model (SOAR): each worker sends one message up its link; a blue switch sends ONE
message up however many it receives (none if its subtree has no workers); a red switch
forwards everything it receives plus its own workers' messages. A link's load is its message
count times its weight; utilization is the sum of the loads of all tree links (worker links
included: they are constant, one message each). See tree.py for the sink/root convention.

Exact algorithms:
- `soar`: minimum utilization (Segal, Avin, Scalosub, CoNEXT 2021), a dynamic program over the tree.
- `min_congestion`: minimum maximum link load (same authors, INFOCOM 2022), by binary search
  over the finite set of possible loads with a feasibility dynamic program.
Baselines: `none`, `all`, `topk`, `random`.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from controller.placement.tree import AggTree, Edge, PlacementError

ALGORITHMS = ("soar", "congestion", "none", "all", "topk", "random")
_INF = math.inf


@dataclass(frozen=True)
class Placement:
    algo: str
    aggregators: tuple[str, ...]  # sorted; includes a root switch that is the sink
    blue: tuple[str, ...]  # the aggregators that count against k
    utilization: float
    max_link_load: float
    links: dict[str, float]  # "child-parent" -> load (messages x weight)
    messages: dict[str, int]  # "child-parent" -> messages

    def to_json(self) -> dict:
        return {
            "algo": self.algo,
            "aggregators": list(self.aggregators),
            "utilization": _num(self.utilization),
            "max_link_load": _num(self.max_link_load),
            "links": {name: _num(v) for name, v in self.links.items()},
        }


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 9)


def link_name(edge: Edge) -> str:
    return f"{edge[0]}-{edge[1]}"


def evaluate(tree: AggTree, blue: Iterable[str], algo: str = "given") -> Placement:
    """Loads and utilization of a given set of blue switches, by the message model."""
    blue = set(blue)
    unknown = sorted(blue - set(tree.parent))
    if unknown:
        raise PlacementError(f"placement: '{unknown[0]}' is not a switch of the tree")
    if tree.sink is None:
        blue.discard(tree.root)
    received = {v: tree.load(v) for v in tree.order}
    messages: dict[str, int] = {}
    loads: dict[str, float] = {}
    for v in reversed(tree.order):
        for edge in tree.worker_links(v):
            messages[link_name(edge)] = 1
            loads[link_name(edge)] = tree.weight(edge)
        sent = min(received[v], 1) if v in blue else received[v]
        up = tree.uplink(v)
        if up is not None:
            messages[link_name(up)] = sent
            loads[link_name(up)] = sent * tree.weight(up)
        parent = tree.parent[v]
        if parent is not None:
            received[parent] += sent
    aggregators = blue | ({tree.root} if tree.sink is None else set())
    return Placement(algo=algo, aggregators=tuple(sorted(aggregators)), blue=tuple(sorted(blue)),
                     utilization=float(sum(loads.values())), max_link_load=max(loads.values(), default=0.0),
                     links=dict(sorted(loads.items())), messages=dict(sorted(messages.items())))


def place(tree: AggTree, k: int, algo: str = "soar", eligible: Iterable[str] | None = None,
          seed: int = 0) -> Placement:
    """Run one of ALGORITHMS; `eligible` limits which switches may aggregate (default: all)."""
    if algo not in ALGORITHMS:
        raise PlacementError(f"--algo: unknown algorithm '{algo}' (choose from {', '.join(ALGORITHMS)})")
    if algo == "soar":
        return soar(tree, k, eligible)
    if algo == "congestion":
        return min_congestion(tree, k, eligible)
    _check_k(k)
    candidates = _candidates(tree, eligible)
    if algo == "none":
        return evaluate(tree, (), algo)
    if algo == "all":
        return evaluate(tree, candidates, algo)
    if algo == "topk":
        sub = tree.subtree_loads()
        depth = {v: i for i, v in enumerate(tree.order)}  # breadth-first index: shallower first
        ranked = sorted(candidates, key=lambda v: (-sub[v], depth[v]))
        return evaluate(tree, ranked[:k], algo)
    rng = random.Random(seed)
    return evaluate(tree, rng.sample(candidates, min(k, len(candidates))), algo)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise PlacementError(f"k: must be an integer >= 0, got {k!r}")


def _candidates(tree: AggTree, eligible: Iterable[str] | None) -> list[str]:
    """Switches that may be made blue, in tree order: eligible ones, minus a root that is the sink."""
    allowed = set(tree.order) if eligible is None else set(eligible)
    return [v for v in tree.order if v in allowed and not (v == tree.root and tree.sink is None)]


# --- min-plus knapsack over children, shared by both dynamic programs -------------------------

def _combine(arrays: list[np.ndarray], rows: int, kmax: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Min-plus convolution of per-child tables along the budget axis.

    Each array has shape (rows, K_c): cost of a child's subtree when it gets exactly j blue
    switches. Returns the combined table (rows, <= kmax+1) and, per child, the budget it gets
    for each total, so the choice can be unwound top-down.
    """
    acc = np.zeros((rows, 1))
    splits = []
    for x in arrays:
        size = min(acc.shape[1] + x.shape[1] - 1, kmax + 1)
        out = np.full((rows, size), _INF)
        arg = np.zeros((rows, size), dtype=np.int32)
        for j in range(min(x.shape[1], size)):
            width = min(acc.shape[1], size - j)
            cand = acc[:, :width] + x[:, j:j + 1]
            seg, seg_arg = out[:, j:j + width], arg[:, j:j + width]
            better = cand < seg
            seg[better] = cand[better]
            seg_arg[better] = j
        acc = out
        splits.append(arg)
    return acc, splits


def _unsplit(children: list[str], splits: list[np.ndarray], row: int, total: int) -> list[tuple[str, int]]:
    """Budgets each child got when the combined table was read at (row, total)."""
    shares = []
    for child, arg in zip(reversed(children), reversed(splits)):
        j = int(arg[row, total])
        shares.append((child, j))
        total -= j
    return shares


# --- SOAR --------------------------------------------------------------------------------------

def soar(tree: AggTree, k: int, eligible: Iterable[str] | None = None) -> Placement:
    """Minimum-utilization placement of at most k blue switches; exact.

    Dynamic program (SOAR's): a red switch's messages travel up to its nearest blue ancestor
    (or the sink), so a subtree's cost depends only on which ancestor that is. For switch v,
    ancestor index i and budget j, F[v][i][j] is the least cost of v's subtree plus the cost of
    carrying its messages up to ancestor i, with exactly j blue switches inside:
      red:  workers(v) * dist(v, i) + best split of j over the children, for whom that same
            ancestor has index i+1
      blue: [subtree has workers] * dist(v, i) + best split of j-1 over the children, for whom v
            is ancestor 0
    Children are merged with a min-plus knapsack. Time O(n * h * k^2), memory O(n * h * k), for n
    switches of height h. Ties go to fewer blue switches.
    """
    _check_k(k)
    allowed = set(_candidates(tree, eligible))
    free_root = tree.sink is None
    sub = tree.subtree_loads()
    dist = _ancestor_distances(tree)
    table: dict[str, np.ndarray] = {}
    choice: dict[str, np.ndarray] = {}
    split_red: dict[str, list[np.ndarray]] = {}
    split_blue: dict[str, list[np.ndarray]] = {}
    sink_root = None
    for v in reversed(tree.order):
        kids = tree.children[v]
        blue, split_blue[v] = _combine([table[c][:1] for c in kids], 1, k)
        if v == tree.root and free_root:  # the sink: aggregates for free, sends nothing up
            sink_root = blue
            break
        red, split_red[v] = _combine([table[c][1:] for c in kids], len(dist[v]), k)
        for c in kids:
            del table[c]
        red = red + tree.load(v) * dist[v][:, None]
        if v in allowed and k > 0:
            blue = np.hstack([np.full((1, 1), _INF), blue[:, :k]]) + (sub[v] > 0) * dist[v][:, None]
        else:
            blue = np.full((len(dist[v]), 1), _INF)
        size = max(red.shape[1], blue.shape[1])
        red, blue = _pad(red, size), _pad(blue, size)
        choice[v] = blue < red
        table[v] = np.minimum(red, blue)

    best = (table[tree.root] if sink_root is None else sink_root)[0]  # sink_root: set when free_root
    stack = [(tree.root, 0, int(np.argmin(best)))]
    chosen = []
    while stack:
        v, i, j = stack.pop()
        kids = tree.children[v]
        if v == tree.root and free_root:
            stack.extend((c, 0, b) for c, b in _unsplit(kids, split_blue[v], 0, j))
        elif choice[v][i, j]:
            chosen.append(v)
            stack.extend((c, 0, b) for c, b in _unsplit(kids, split_blue[v], 0, j - 1))
        else:
            stack.extend((c, i + 1, b) for c, b in _unsplit(kids, split_red[v], i, j))
    return evaluate(tree, chosen, "soar")


def _ancestor_distances(tree: AggTree) -> dict[str, np.ndarray]:
    """dist[v][i]: cost of one message from v to its i-th aggregation point above (parent first,
    the sink last); a root switch that is the sink is the last point for its descendants."""
    dist: dict[str, np.ndarray] = {}
    for v in tree.order:
        up = tree.uplink(v)
        if up is None:
            dist[v] = np.zeros(0)
            continue
        w = tree.weight(up)
        parent = tree.parent[v]
        above = dist[parent] if parent is not None else np.zeros(0)
        dist[v] = np.concatenate(([w], w + above))
    return dist


def _pad(a: np.ndarray, size: int) -> np.ndarray:
    if a.shape[1] >= size:
        return a
    return np.hstack([a, np.full((a.shape[0], size - a.shape[1]), _INF)])


# --- minimum congestion ------------------------------------------------------------------------

def min_congestion(tree: AggTree, k: int, eligible: Iterable[str] | None = None) -> Placement:
    """Placement of at most k blue switches minimizing the maximum link load; exact.

    The optimum is one of the finitely many loads a link can carry (m messages x its weight,
    m <= workers below it), so binary search that sorted set for the least L that is feasible.
    Feasibility of L: bottom-up, g[v][b] = fewest messages v can send up with exactly b blue
    switches in its subtree and every link there loaded <= L (fewer messages are always better
    for the links above, so this is all a parent needs); children merge with a min-plus
    knapsack. Time O(n * k^2 * log(n * W)) for n switches and W workers. Among placements that
    reach the least L, the one with fewest blue switches is returned.
    """
    _check_k(k)
    allowed = set(_candidates(tree, eligible))
    sub = tree.subtree_loads()
    fixed = [tree.weight(e) for v in tree.order for e in tree.worker_links(v)]
    floor = max(fixed, default=0.0)
    values = {floor}
    for v in tree.order:
        up = tree.uplink(v)
        if up is not None:
            values.update(m * tree.weight(up) for m in range(1, sub[v] + 1))
    candidates = sorted(x for x in values if x >= floor)
    lo, hi = 0, len(candidates) - 1  # the largest candidate is the all-red maximum: always feasible
    while lo < hi:
        mid = (lo + hi) // 2
        if _congestion_feasible(tree, k, allowed, sub, candidates[mid]) is None:
            lo = mid + 1
        else:
            hi = mid
    best = _congestion_feasible(tree, k, allowed, sub, candidates[lo])
    assert best is not None, "the largest candidate is always feasible"
    return evaluate(tree, best, "congestion")


def _congestion_feasible(tree: AggTree, k: int, allowed: set[str], sub: dict[str, int],
                         limit: float) -> list[str] | None:
    """Blue switches (fewest) keeping every link load <= limit, or None if k is not enough."""
    table: dict[str, np.ndarray] = {}
    choice: dict[str, np.ndarray] = {}
    splits: dict[str, list[np.ndarray]] = {}
    root_table = None
    for v in reversed(tree.order):
        kids = tree.children[v]
        merged, splits[v] = _combine([table.pop(c) for c in kids], 1, k)
        up = tree.uplink(v)
        if up is None:  # root switch that is the sink
            root_table = merged
            break
        w = tree.weight(up)
        cap = math.floor(limit / w * (1 + 1e-12)) if w > 0 else _INF
        red = merged + tree.load(v)
        red[red > cap] = _INF
        blue = np.full((1, 1), _INF)
        sent = min(sub[v], 1)
        if v in allowed and k > 0 and sent <= cap:
            blue = np.hstack([blue, np.where(np.isfinite(merged[:, :k]), float(sent), _INF)])
        size = max(red.shape[1], blue.shape[1])
        red, blue = _pad(red, size), _pad(blue, size)
        choice[v] = blue < red
        table[v] = np.minimum(red, blue)
    final = root_table if root_table is not None else table[tree.root]
    feasible = np.flatnonzero(np.isfinite(final[0]))
    if feasible.size == 0:
        return None
    stack = [(tree.root, int(feasible[0]))]
    chosen = []
    while stack:
        v, b = stack.pop()
        is_blue = v in choice and bool(choice[v][0, b])
        if is_blue:
            chosen.append(v)
            b -= 1
        stack.extend(_unsplit(tree.children[v], splits[v], 0, b))
    return chosen
