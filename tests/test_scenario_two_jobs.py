"""Root end-to-end: two jobs at once on one Mininet leaf-spine network (embedded switches), each
with exact int32 all-reduce sums, per-job counters on their own aggregating switches, and a
background flow alongside."""
import json
import os

import pytest

from testbed.scenario import load_scenario, run_scenario

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]


def test_two_concurrent_jobs_sum_exactly_with_per_job_counters(tmp_path):
    scn = load_scenario("tests/data/scenario/two_jobs.yaml")
    summary = run_scenario(scn, str(tmp_path), say=lambda _: None)
    results = json.loads((tmp_path / os.path.basename(summary["run_dir"]) / "unaware" / "results.json").read_text())
    a, b = results["jobs"]["a"], results["jobs"]["b"]
    assert a["allreduce_exact"] and b["allreduce_exact"]
    assert a["job_id"] != b["job_id"]
    chunks = 1 + -(-scn.workload.elements // scn.network.lanes)  # a one-chunk warm-up, then one a packet
    assert a["counters"]["s3"]["completed"] == chunks and b["counters"]["s5"]["completed"] == chunks
    assert a["counters"]["s3"]["aggregated"] == 2 * chunks and "s5" not in a["counters"]
    assert "s3" not in b["counters"]
    assert [adm["status"] for adm in results["admissions"]] == ["in-network", "in-network"]
    assert results["flows"]["bg"]["send"]["packets"] > 0
