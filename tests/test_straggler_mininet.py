"""Stragglers and a lost aggregator on real Mininet: h2 computes 0.15 s longer every step; bounded
staleness 2 lets the on-time workers run ahead while h2 pulls the rounds it missed; the
aggregator's process is killed after step 5 and its replica finishes the job: no step lost, every
gradient h2 computed summed once.

- scheme hostagg (star4): the job is summed on the idle host h4, the fastest worker h1 replicates it;
- scheme split (star8): the switch sums h1 and h3 with h4 in h2's seat, and the replica h5, on the
  same switch, stands by in that seat: it takes over the seat in the tree as well."""
from __future__ import annotations

import os

import pytest

from config import load
from testbed.config import RunConfig
from testbed.faults import FaultRun

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
STEPS, BOUND, DELAY = 40, 2, 0.15  # the fault at step 5 leaves 35 steps, >= 1.7 s of h2's delays
WORKERS = ["h1", "h2", "h3"]


@pytest.mark.parametrize("scheme, topo, aggregators", [("hostagg", "star4", ["h4", "h1"]),
                                                       ("split", "star8", ["h4", "h5"])])
def test_straggler_bounded_staleness_and_replica_takeover(tmp_path, scheme, topo, aggregators):
    cfg = load(RunConfig, {"network": {"topo": topo},
                           "job": {"worker_hosts": WORKERS, "scheme": scheme, "staleness": BOUND,
                                   "stragglers": {"h2": DELAY}},
                           "faults": {"faults": ["kill_aggregator:h4@5"]}, "train": {"steps": STEPS, "eval_every": 0},
                           "timeout_s": 600, "out": str(tmp_path)}, "test")
    results = FaultRun(cfg).execute()
    assert results["aggregators"] == aggregators  # an idle host aggregates, the next one replicates
    assert results["staleness_bound"] == BOUND and results["lineage_ok"] is True
    assert [e["fault"] for e in results["events"]] == ["kill_aggregator:h4@5"]
    replica = results["aggregation"][f"{aggregators[1]}-replica"]
    per_worker = results["per_worker"]
    skipped = per_worker["h2"]["skipped_steps"]
    computed = {"hostagg": len(WORKERS) * STEPS - skipped, "split": STEPS - skipped}[scheme]  # what came to h4
    assert replica["took_over"] is True
    assert replica["rounds"] == STEPS and replica["contributions"] == computed
    assert 1 <= replica["max_staleness"] <= BOUND and replica["stale_contributions"] > 0
    assert "h4-agg" not in results["aggregation"]  # killed before it could write its summary
    assert per_worker["h2"]["straggler"] == {"delay_s": DELAY, "slowdown": 1.0}
    failed_over = WORKERS if scheme == "hostagg" else ["h2"]  # in split only h2 talks to h4
    assert all(per_worker[h]["failovers"] == 1 for h in failed_over)
    assert all(r["staleness_bound"] == BOUND for r in per_worker.values())
    assert max(r["max_staleness"] for r in per_worker.values()) <= BOUND
    assert len({r["final_accuracy"] for r in per_worker.values()}) == 1  # same rounds, same weights
