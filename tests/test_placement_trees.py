"""Cutting a job's aggregation tree out of a topology, and the baseline placements on it."""
from __future__ import annotations

import os

import pytest

from controller.placement import PlacementError, evaluate, job_tree, place
from controller.topology import load_topology, parse_topology

TOPO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "topologies")


def topo(name: str):
    return load_topology(os.path.join(TOPO_DIR, name))


def test_tree2_with_switch_root_is_the_physical_tree():
    t = job_tree(topo("tree2.yaml"), [f"h{i}" for i in range(1, 9)])
    assert t.root == "s1" and t.sink is None
    assert dict(t.parent) == {"s1": None, "s2": "s1", "s3": "s1"}
    assert t.workers == {"s2": ("h1", "h2", "h3", "h4"), "s3": ("h5", "h6", "h7", "h8")}


def test_parameter_server_host_becomes_the_sink():
    t = job_tree(topo("tree2.yaml"), ["h1", "h2", "h5"], root="h8")
    assert t.root == "s3" and t.sink == "h8"
    assert dict(t.parent) == {"s3": None, "s1": "s3", "s2": "s1"}
    assert t.uplink("s3") == ("s3", "h8")


def test_branches_merge_inside_a_pod_of_the_fat_tree():
    # h1 (edge s13) and h3 (edge s14) can both reach core s1 via s5 or s6: they must share one.
    t = job_tree(topo("fattree4.yaml"), ["h1", "h3"], root="s1")
    assert t.parent["s13"] == t.parent["s14"] == "s5"
    assert sorted(t.order) == ["s1", "s13", "s14", "s5"]


def test_equal_cost_choice_avoids_links_loaded_by_other_jobs():
    ls = topo("leafspine.yaml")
    workers = ["h1", "h3", "h5", "h7"]
    first = job_tree(ls, workers)
    assert first.root == "s1"  # spines tie on distance; topology order decides
    load = {frozenset((leaf, "s1")): 1.0 for leaf in ("s3", "s4", "s5", "s6")}
    assert job_tree(ls, workers, link_load=load).root == "s2"
    # With a parameter server, the paths between leaves go over the less loaded spine.
    via = job_tree(ls, ["h1", "h3"], root="h8", link_load=load)
    assert via.parent["s3"] == via.parent["s4"] == "s2"


def test_require_tree_rejects_a_loop():
    with pytest.raises(PlacementError) as info:
        job_tree(topo("leafspine.yaml"), ["h1", "h2"], require_tree=True)
    assert "topology has a loop (" in str(info.value) and "but a tree is required" in str(info.value)
    assert job_tree(topo("tree2.yaml"), ["h1", "h5"], require_tree=True).root == "s1"


@pytest.mark.parametrize("workers,root,message", [
    (["h1", "h9"], None, "--workers: 'h9' is unknown host"),
    (["h1", "s2"], None, "--workers: 's2' is a switch, not a host"),
    (["h1", "h1"], None, "--workers: 'h1' listed twice"),
    ([], None, "--workers: a job needs at least one worker"),
    (["h1"], "s9", "--root: unknown node 's9'"),
    (["h1", "h2"], "h2", "--root: 'h2' is also a worker"),
])
def test_bad_job_input(workers, root, message):
    with pytest.raises(PlacementError) as info:
        job_tree(topo("tree2.yaml"), workers, root)
    assert message in str(info.value) and info.value.exit_code == 2


def test_capacity_weights_make_slow_links_expensive():
    t = parse_topology({
        "hosts": [{"name": "h1"}, {"name": "h2"}, {"name": "h3"}],
        "switches": [{"name": "s1"}, {"name": "s2"}],
        "links": [{"a": "h1", "b": "s2", "bw_mbps": 100}, {"a": "h2", "b": "s2", "bw_mbps": 100},
                  {"a": "s2", "b": "s1", "bw_mbps": 25}, {"a": "h3", "b": "s1"}],
    }, "w.yaml")
    tree = job_tree(t, ["h1", "h2"], root="h3", weight_mode="capacity")
    assert tree.weight(("s2", "s1")) == 4.0 and tree.weight(("h1", "s2")) == 1.0
    assert tree.weight(("s1", "h3")) == 1.0  # no rate given: weight 1
    red = evaluate(tree, ())
    assert red.links["s2-s1"] == 8.0 and red.messages["s2-s1"] == 2
    assert place(tree, 1, "soar").blue == ("s2",)
    with pytest.raises(PlacementError, match="weight: unknown mode 'fast'"):
        job_tree(t, ["h1"], weight_mode="fast")


def test_baselines():
    tree = job_tree(topo("fattree4.yaml"), ["h1", "h2", "h3", "h5", "h9"], root="h16")
    sub = tree.subtree_loads()
    assert place(tree, 3, "none").aggregators == ()
    assert place(tree, 3, "none").utilization == evaluate(tree, ()).utilization
    assert set(place(tree, 0, "all").aggregators) == set(tree.order)  # `all` ignores k
    topk = place(tree, 2, "topk")
    assert sorted(sub[v] for v in topk.blue) == sorted(sorted(sub.values())[-2:])
    r1, r2 = place(tree, 3, "random", seed=7), place(tree, 3, "random", seed=7)
    assert r1 == r2 and len(r1.blue) == 3
    assert len({place(tree, 3, "random", seed=s).blue for s in range(10)}) > 1
    limited = place(tree, 3, "random", eligible=["s13", "s14"])
    assert set(limited.blue) <= {"s13", "s14"}
    soar = place(tree, 2, "soar")
    for algo in ("none", "topk", "random"):  # SOAR is optimal, so never worse than a baseline
        assert soar.utilization <= place(tree, 2, algo, seed=3).utilization
    with pytest.raises(PlacementError, match="--algo: unknown algorithm 'best'"):
        place(tree, 2, "best")
    with pytest.raises(PlacementError, match="k: must be an integer >= 0"):
        place(tree, -1, "topk")


def test_evaluate_counts_messages_per_link():
    tree = job_tree(topo("tree2.yaml"), [f"h{i}" for i in range(1, 9)])
    red = evaluate(tree, ())
    assert red.messages == {**{f"h{i}-s2": 1 for i in range(1, 5)}, **{f"h{i}-s3": 1 for i in range(5, 9)},
                            "s2-s1": 4, "s3-s1": 4}
    assert red.utilization == 16 and red.max_link_load == 4 and red.aggregators == ("s1",)
    blue = evaluate(tree, ["s2"])
    assert blue.messages["s2-s1"] == 1 and blue.utilization == 13
    with pytest.raises(PlacementError, match="'s9' is not a switch of the tree"):
        evaluate(tree, ["s9"])
