"""Several jobs share switch slot budgets; a job without in-network capacity aggregates on a host."""
from __future__ import annotations

import os

import pytest

from controller.placement import Job, PlacementError, place_jobs
from controller.topology import load_topology, parse_topology

TOPO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "topologies")


def tree2_with_slots(root_slots: int, leaf_slots: int):
    return parse_topology({
        "hosts": [{"name": f"h{i}"} for i in range(1, 9)],
        "switches": [{"name": "s1", "slots": root_slots}, {"name": "s2", "slots": leaf_slots},
                     {"name": "s3", "slots": leaf_slots}],
        "links": [{"a": f"h{i}", "b": "s2"} for i in range(1, 5)] + [{"a": f"h{i}", "b": "s3"} for i in range(5, 9)]
        + [{"a": "s2", "b": "s1"}, {"a": "s3", "b": "s1"}],
    }, "slots.yaml")


def test_slot_budget_is_shared_and_exhausted_jobs_fall_back_to_a_host():
    topo = tree2_with_slots(root_slots=100, leaf_slots=100)
    jobs = [Job("a", ("h1", "h2", "h5", "h6"), root="s1", k=2, slots=60),
            Job("b", ("h3", "h4", "h7", "h8"), root="s1", k=2, slots=60)]
    first, second = place_jobs(topo, jobs)
    assert first.fallback is None and first.placement.aggregators == ("s1", "s2", "s3")
    assert second.fallback == "root switch 's1' has 40 free slots, the job needs 60"
    assert second.placement.aggregators == () and second.placement.algo == "host"
    assert second.tree.sink == "h3"  # its first worker aggregates; the others send to it
    assert second.tree.workers == {"s2": ("h4",), "s3": ("h7", "h8")}


def test_only_switches_with_free_slots_aggregate():
    topo = tree2_with_slots(root_slots=10, leaf_slots=1)
    jobs = [Job("a", ("h1", "h2", "h5", "h6"), root="s1", k=2), Job("b", ("h3", "h4", "h7", "h8"), root="s1", k=2)]
    first, second = place_jobs(topo, jobs)
    assert first.placement.blue == ("s2", "s3")
    assert second.fallback is None and second.placement.blue == ()  # leaves full, root still aggregates
    assert second.placement.aggregators == ("s1",)


def test_parameter_server_job_without_any_free_switch_reports_fallback():
    topo = tree2_with_slots(root_slots=0, leaf_slots=0)
    [only] = place_jobs(topo, [Job("a", ("h1", "h5"), root="h8", k=1)])
    assert only.fallback == "no switch on the job's tree has 1 free slots"
    assert only.tree.sink == "h8" and only.placement.aggregators == ()


def test_two_jobs_spread_over_the_spines():
    topo = load_topology(os.path.join(TOPO_DIR, "leafspine.yaml"))
    jobs = [Job("a", ("h1", "h3", "h5", "h7"), k=0), Job("b", ("h2", "h4", "h6", "h8"), k=0)]
    first, second = place_jobs(topo, jobs)
    assert {first.tree.root, second.tree.root} == {"s1", "s2"}
    for job in (first, second):
        assert job.placement.aggregators == (job.tree.root,)
        assert job.placement.utilization == 8  # 4 worker links + 4 leaf-spine links


def test_job_errors():
    topo = tree2_with_slots(1, 1)
    with pytest.raises(PlacementError, match="duplicate job name 'a'"):
        place_jobs(topo, [Job("a", ("h1",)), Job("a", ("h2",))])
    with pytest.raises(PlacementError, match="slots must be >= 1"):
        place_jobs(topo, [Job("a", ("h1",), slots=0)])
