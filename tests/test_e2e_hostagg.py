"""Issue 7 on real Mininet: a job that the switch has no slots for is downgraded to host
aggregation with a one-line message, and still trains to its accuracy through `aggnet run`."""
from __future__ import annotations

import os

import e2e
import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]

SMALL = str(e2e.REPO / "tests" / "data" / "run" / "star4_slots8.yaml")


def test_job_without_switch_slots_is_downgraded_and_trains_via_hostagg(tmp_path):
    done, results = e2e.aggnet_run(tmp_path, "--topo", SMALL, "--workers", "3", "--slots", "64", "--staleness", "1")
    assert done.returncode == 0, done.stderr
    message = ("job job1: downgraded to host aggregation: no in-network capacity "
               "(root switch 's1' has 8 free slots, the job needs 64)")
    notice = [line for line in done.stdout.splitlines() if message in line]
    assert notice == [f"aggnet {message}; aggregator on h4, replica on h1"]
    assert results["scheme"] == "hostagg" and results["config"]["scheme"] == "innet"
    assert results["admission"]["status"] == "host" and results["admission"]["message"] == message
    assert results["aggregators"] == ["h4", "h1"] and results["staleness_bound"] == 1
    assert results["final_accuracy"] >= 0.90 and results["steps"] == 200
    assert all(w["scheme"] == "hostagg" and w["staleness_bound"] == 1 for w in results["per_worker"].values())
    agg = results["aggregation"]
    assert agg["h4-agg"]["rounds"] == 200 and agg["h4-agg"]["staleness_bound"] == 1
    assert agg["h1-replica"]["took_over"] is False
    # the switch only forwarded: no job is known to it
    assert results["placement"] is None and results["counters"]["s1"]["jobs"] == {}
    assert e2e.leftovers(tmp_path) == []
