"""Admission: several jobs share per-switch slot budgets; a job that does not fit is downgraded to
host aggregation (or rejected) with a one-line reason."""
import pytest

from controller.placement import Job, PlacementError
from controller.tenants import HOST, IN_NETWORK, REJECTED, admit, with_slot_budgets
from controller.topology import load_topology


@pytest.fixture
def leafspine():
    return load_topology("topologies/leafspine.yaml")


def jobs(slots=8):
    return [Job("a", ("h1", "h3", "h5", "h7"), k=1, slots=slots), Job("b", ("h2", "h4", "h6", "h8"), k=1, slots=slots),
            Job("c", ("h1", "h2"), k=0, slots=slots)]


def test_everyone_fits_with_default_budgets(leafspine):
    tenancy = admit(leafspine, jobs())
    assert [a.status for a in tenancy.admissions] == [IN_NETWORK] * 3
    roots = [jp.tree.root for jp in tenancy.in_network()]
    assert roots[:2] == ["s1", "s2"]  # the second job avoids the first one's spine
    assert tenancy.admission("a").message == "job a: in-network aggregation on s1 (8 slots each)"


def test_job_that_does_not_fit_is_downgraded_with_one_line(leafspine):
    topo = with_slot_budgets(leafspine, {"s1": 8, "s2": 4, "s3": 8})
    tenancy = admit(topo, jobs())
    status = {a.job: a.status for a in tenancy.admissions}
    assert status == {"a": IN_NETWORK, "b": HOST, "c": IN_NETWORK}
    b = tenancy.admission("b")
    assert b.message == ("job b: downgraded to host aggregation: no in-network capacity "
                         "(root switch 's2' has 4 free slots, the job needs 8)")
    assert "\n" not in b.message and b.aggregators == ()
    assert [jp.job.name for jp in tenancy.in_network()] == ["a", "c"]
    assert len(tenancy.placements) == 3  # b still runs, on a host
    assert tenancy.admission("a").aggregators == ("s1",) and tenancy.admission("c").aggregators == ("s3",)


def test_reject_policy_turns_the_job_away(leafspine):
    topo = with_slot_budgets(leafspine, {"s2": 0})
    tenancy = admit(topo, jobs()[:2], policy="reject")
    assert [a.status for a in tenancy.admissions] == [IN_NETWORK, REJECTED]
    assert tenancy.admission("b").message.startswith("job b: rejected: no in-network capacity (root switch 's2'")
    assert [jp.job.name for jp in tenancy.placements] == ["a"]


def test_budgets_are_shared_in_order(leafspine):
    # one spine with room for exactly two 4-slot jobs rooted there
    topo = with_slot_budgets(leafspine, {"s1": 8, "s2": 0})
    spine_jobs = [Job(name, workers, root="s1", k=0, slots=4)
                  for name, workers in (("x", ("h1", "h3")), ("y", ("h2", "h4")), ("z", ("h5", "h7")))]
    tenancy = admit(topo, spine_jobs)
    assert [a.status for a in tenancy.admissions] == [IN_NETWORK, IN_NETWORK, HOST]
    assert "root switch 's1' has 0 free slots, the job needs 4" in tenancy.admission("z").message


def test_bad_budgets_and_policy_are_one_line_errors(leafspine):
    with pytest.raises(PlacementError, match=r"slots: 's9' is not a switch of topologies/leafspine.yaml"):
        with_slot_budgets(leafspine, {"s9": 4})
    with pytest.raises(PlacementError, match=r"slots.s1: must be an integer >= 0, got -1"):
        with_slot_budgets(leafspine, {"s1": -1})
    with pytest.raises(PlacementError, match=r"policy: unknown admission policy 'maybe'"):
        admit(leafspine, jobs(), policy="maybe")
