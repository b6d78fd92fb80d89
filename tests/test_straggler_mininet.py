"""Stragglers and a lost aggregator on real Mininet (star4, scheme hostagg): h2 computes
0.15 s longer every step; the job is summed on the idle host h4 with the fastest worker h1
as its replica; bounded staleness 2 lets h1 and h3 run ahead; the aggregator's process is
killed after step 8 and the replica finishes the job: no step lost, none summed twice."""
from __future__ import annotations

import os

import pytest

from config import load
from testbed.config import RunConfig
from testbed.faults import FaultRun

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
STEPS, BOUND, DELAY = 20, 2, 0.15
WORKERS = ["h1", "h2", "h3"]


def test_straggler_bounded_staleness_and_replica_takeover(tmp_path):
    cfg = load(RunConfig, {"network": {"topo": "star4"},
                           "job": {"worker_hosts": WORKERS, "scheme": "hostagg", "staleness": BOUND,
                                   "stragglers": {"h2": DELAY}},
                           "faults": {"faults": ["kill_aggregator:h4@8"]}, "train": {"steps": STEPS, "eval_every": 0},
                           "timeout_s": 600, "out": str(tmp_path)}, "test")
    results = FaultRun(cfg).execute()
    assert results["aggregators"] == ["h4", "h1"]  # the idle host aggregates, the fastest worker replicates
    assert results["staleness_bound"] == BOUND and results["lineage_ok"] is True
    assert [e["fault"] for e in results["events"]] == ["kill_aggregator:h4@8"]
    replica = results["aggregation"]["h1-replica"]
    assert replica["took_over"] is True
    assert replica["rounds"] == STEPS and replica["contributions"] == len(WORKERS) * STEPS
    assert 1 <= replica["max_staleness"] <= BOUND and replica["stale_contributions"] > 0
    assert "h4-agg" not in results["aggregation"]  # killed before it could write its summary
    per_worker = results["per_worker"]
    assert all(r["failovers"] == 1 and r["staleness_bound"] == BOUND for r in per_worker.values())
    assert per_worker["h2"]["straggler"] == {"delay_s": DELAY, "slowdown": 1.0}
    assert max(r["max_staleness"] for r in per_worker.values()) <= BOUND
    assert per_worker["h2"]["step_time_s"] >= DELAY
    assert len({r["final_accuracy"] for r in per_worker.values()}) == 1  # same rounds, same weights
