"""SOAR and min-congestion are exact: on random trees they match a brute force over all subsets.

The reference cost below is written independently of controller.placement (plain recursion over
the message model), so a shared bug in the library's evaluator cannot hide a wrong optimum.
"""
from __future__ import annotations

import itertools
import math
import random

import pytest

from controller.placement import AggTree, PlacementError, min_congestion, soar

CASES = 160


def random_tree(rng: random.Random) -> tuple[AggTree, list[str] | None]:
    n = rng.randint(1, 14)
    names = [f"s{i}" for i in range(1, n + 1)]
    parent = {names[0]: None}
    for i in range(1, n):
        parent[names[i]] = names[rng.randrange(i)]
    has_child = {p for p in parent.values() if p}
    workers, h = {}, 0
    for s in names:
        count = rng.randint(0, 4) if s not in has_child else rng.choice([0, 0, 0, 1, 2])
        workers[s] = tuple(f"h{h + j}" for j in range(count))
        h += count
    sink = rng.choice([None, "ps"])
    weights = {}
    if rng.random() < 0.5:  # weighted links: integer weights keep the comparison exact
        for s in names:
            up = (s, parent[s]) if parent[s] else ((s, sink) if sink else None)
            if up:
                weights[up] = rng.randint(1, 4)
            for w in workers[s]:
                weights[(w, s)] = rng.randint(1, 4)
    eligible = None if rng.random() < 0.6 else [s for s in names if rng.random() < 0.6]
    tree = AggTree(root=names[0], parent=parent, workers=workers, sink=sink, weights=weights)
    return tree, eligible


def reference_loads(tree: AggTree, blue: set[str]) -> list[float]:
    """Load of every link for a set of blue switches, by direct recursion on the model."""
    kids: dict[str, list[str]] = {v: [] for v in tree.parent}
    for v, p in tree.parent.items():
        if p:
            kids[p].append(v)
    loads: list[float] = []

    def sent(v: str) -> int:  # messages v sends up, recording every link below it
        for w in tree.workers.get(v, ()):
            loads.append(tree.weights.get((w, v), 1))
        total = len(tree.workers.get(v, ())) + sum(sent(c) for c in kids[v])
        out = min(total, 1) if v in blue else total
        up = (v, tree.parent[v]) if tree.parent[v] else ((v, tree.sink) if tree.sink else None)
        if up:
            loads.append(out * tree.weights.get(up, 1))
        return out

    sent(tree.root)
    return loads


def subsets(tree: AggTree, k: int, eligible: list[str] | None):
    pool = [v for v in tree.parent if (eligible is None or v in eligible)
            and not (v == tree.root and tree.sink is None)]
    for size in range(min(k, len(pool)) + 1):
        yield from itertools.combinations(pool, size)


def cases():
    rng = random.Random(20240611)
    for case in range(CASES):
        tree, eligible = random_tree(rng)
        yield case, tree, eligible, rng.randint(0, 5)


def check_blue_is_allowed(tree, eligible, k, blue):
    assert len(blue) <= k
    if eligible is not None:
        assert set(blue) <= set(eligible)
    assert tree.sink is not None or tree.root not in blue


def test_soar_equals_brute_force_minimum_utilization():
    for case, tree, eligible, k in cases():
        best = min(sum(reference_loads(tree, set(s))) for s in subsets(tree, k, eligible))
        got = soar(tree, k, eligible)
        check_blue_is_allowed(tree, eligible, k, got.blue)
        assert math.isclose(got.utilization, best), (case, tree, k, got, best)
        assert math.isclose(sum(reference_loads(tree, set(got.blue))), got.utilization), case


def test_congestion_equals_brute_force_minimum_max_load():
    for case, tree, eligible, k in cases():
        best = min(max(reference_loads(tree, set(s)), default=0) for s in subsets(tree, k, eligible))
        got = min_congestion(tree, k, eligible)
        check_blue_is_allowed(tree, eligible, k, got.blue)
        assert math.isclose(got.max_link_load, best), (case, tree, k, got, best)
        assert math.isclose(max(reference_loads(tree, set(got.blue)), default=0), got.max_link_load), case


def test_soar_spends_budget_where_it_saves_most():
    # s1 (root, sink) <- s2 <- s3 with 5 workers on s3 and 1 on s2: with k=1, aggregating at s3
    # turns 5+1 messages on s2-s1 into 2 and 5 on s3-s2 into 1.
    tree = AggTree(root="s1", parent={"s1": None, "s2": "s1", "s3": "s2"},
                   workers={"s2": ("a",), "s3": tuple("bcdef")})
    assert soar(tree, 0).utilization == 6 + 5 + 6
    one = soar(tree, 1)
    assert one.blue == ("s3",) and one.utilization == 6 + 1 + 2
    assert one.aggregators == ("s1", "s3")  # the sink root always aggregates, outside k


def test_congestion_differs_from_soar_when_sum_and_max_disagree():
    # Root sink s1; s2 has 5 workers; a chain s3 <- s4 <- s5 <- s6 carries s6's 3 workers over
    # four links. With k=1 SOAR aggregates at s6 (saves 2 on each of 4 links), leaving 5 on
    # s2-s1; min-congestion aggregates at s2 so no link carries more than 3.
    tree = AggTree(root="s1", parent={"s1": None, "s2": "s1", "s3": "s1", "s4": "s3", "s5": "s4", "s6": "s5"},
                   workers={"s2": tuple("abcde"), "s6": tuple("fgh")})
    utilization = soar(tree, 1)
    congestion = min_congestion(tree, 1)
    assert utilization.blue == ("s6",) and utilization.max_link_load == 5
    assert utilization.utilization == 8 + 5 + 1 * 4
    assert congestion.blue == ("s2",) and congestion.max_link_load == 3
    assert congestion.utilization == 8 + 1 + 3 * 4


def test_bad_k_and_bad_trees_are_rejected():
    tree = AggTree(root="s1", parent={"s1": None}, workers={"s1": ("a",)})
    for bad in (-1, 1.5, True):
        with pytest.raises(PlacementError, match="k: must be an integer >= 0"):
            soar(tree, bad)
        with pytest.raises(PlacementError, match="k: must be an integer >= 0"):
            min_congestion(tree, bad)
    with pytest.raises(PlacementError, match="form a loop"):
        AggTree(root="s1", parent={"s1": None, "s2": "s3", "s3": "s2"})
    with pytest.raises(PlacementError, match="not a switch of the tree"):
        AggTree(root="s1", parent={"s1": None, "s2": "s9"})
    with pytest.raises(PlacementError, match="must be >= 0"):
        AggTree(root="s1", parent={"s1": None}, sink="ps", weights={("s1", "ps"): -1})
