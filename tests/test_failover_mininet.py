"""Issue 7's failure proof on real Mininet (leaf-spine, workers on four leaves, in-network
training): the spine at the root of the job's tree is killed mid-run; the controller notices
within the stated second, moves the tree to the other spine, the workers resume from the last
step they all completed, and the run ends with the step count and the very weights of an
uninterrupted run (in-network sums are exact integers, so the bound is met with equality)."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch

from protocol.wire import BASE_LANES
from testbed.config import FaultConfig, parse_fault
from testbed.faults import DEFAULTS, FaultRun

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
STEPS = 30


def run_with_faults(out, *faults: str) -> dict:
    """`aggnet faults` with its defaults (leaf-spine, four workers, in-network), STEPS steps of 32-lane
    packets: slow enough that a fault at step 10 lands while training runs (at 364 lanes the
    workers were at step 29 by the time it was detected)."""
    cfg = dataclasses.replace(DEFAULTS, train=dataclasses.replace(DEFAULTS.train, steps=STEPS),
                              network=dataclasses.replace(DEFAULTS.network, lanes=BASE_LANES),
                              faults=FaultConfig(faults=tuple(parse_fault(f) for f in faults)), out=str(out))
    return FaultRun(cfg).execute()


def final_weights(results: dict, worker: str) -> dict:
    path = Path(results["checkpoints"]) / f"{worker}.step-{STEPS - 1}.pt"
    return torch.load(path, weights_only=True)["model"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return run_with_faults(tmp_path_factory.mktemp("clean"))


def test_killed_spine_run_matches_uninterrupted_run(tmp_path, uninterrupted):
    assert uninterrupted["lineage_ok"] and uninterrupted["events"] == []
    results = run_with_faults(tmp_path, "kill_switch:s1@10")
    [event] = results["events"]
    assert event["detected"] == "switch s1" and event["detected_after_s"] > 0  # how soon: results.json, not a test
    assert event["root"] == "s2" and "s1" not in event["aggregators"]
    # the fault hits once rank 0 has reported step 10; the workers may be a few steps on by then
    assert 9 <= event["resume_after_step"] < STEPS - 1
    assert [s["resume_after_step"] for s in results["segments"]] == [-1, event["resume_after_step"]]
    assert results["lineage_ok"] is True  # every worker's weights went through steps 0..29 once each
    assert results["steps_applied"] == uninterrupted["steps_applied"] == {h: STEPS for h in ("h1", "h3", "h5", "h7")}
    for worker in ("h1", "h3", "h5", "h7"):
        a, b = final_weights(uninterrupted, worker), final_weights(results, worker)
        for name in a:
            assert torch.equal(a[name], b[name]), (worker, name)
    accuracy = {r["final_accuracy"] for r in results["per_worker"].values()}
    assert len(accuracy) == 1 and accuracy == {r["final_accuracy"] for r in uninterrupted["per_worker"].values()}


def test_link_down_is_routed_around(tmp_path, uninterrupted):
    results = run_with_faults(tmp_path, "link_down:s3-s1@10")
    [event] = results["events"]
    assert event["detected"] == "link s3-s1" and event["detected_after_s"] > 0
    assert results["lineage_ok"] is True
    for worker in ("h1", "h3", "h5", "h7"):
        a, b = final_weights(uninterrupted, worker), final_weights(results, worker)
        assert all(torch.equal(a[n], b[n]) for n in a)
