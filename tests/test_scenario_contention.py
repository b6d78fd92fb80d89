"""Root end-to-end: a background flow congests the spine link a job's tree uses; the adaptation
loop notices (port counters + queue depth over the side channel), reinstalls the tree through
the other spine while the job runs, and the int32 all-reduce still comes out exact."""
import json
import os

import pytest

from testbed.scenario import load_scenario, run_scenario

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]


def test_tree_moves_off_the_congested_spine_and_sums_stay_exact(tmp_path):
    scn = load_scenario("tests/data/scenario/contention.yaml")
    summary = run_scenario(scn, str(tmp_path), say=lambda _: None)
    results = json.loads((tmp_path / os.path.basename(summary["run_dir"]) / "aware" / "results.json").read_text())
    job = results["jobs"]["a"]
    assert job["allreduce_exact"]
    first = results["moves"][0]
    assert first["job"] == "a" and "s4-s1" in first["avoided"] and first["tree"] == ["s2-s3", "s4-s2"]
    assert any(c["link"] == "s4-s1" for c in first["congested"])
    # both spines carried the job: s1 before the move, s2 after it
    assert job["counters"]["s1"]["received"] > 0 and job["counters"]["s2"]["received"] > 0
    assert results["flows"]["hot"]["send"]["packets"] > 0
