"""`aggnet run --workload model:resnet50` on real Mininet: DDP iterations of ResNet-50's buckets
through each scheme, every sum exact, the report's fields present (iteration, compute, exposed
communication, the analytic model beside them), and for in-network every bucket's packets counted
by the switch."""
from __future__ import annotations

import math
import os

import e2e
import pytest

from hosts.models import ddp, profile
from hosts.models.arch import build

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
GRAD_SCALE = 0.002  # 1/500 of ResNet-50's 102 MB a step: a real 50 Mb/s link emulates 25 Gb/s
ITERATIONS = 2
LANES = 364


@pytest.mark.parametrize("scheme", ["innet", "ring", "ps"])
def test_resnet50_ddp_iterations(tmp_path, scheme):
    done, results = e2e.aggnet_run(tmp_path, "--workload", "model:resnet50", "--scheme", scheme, "--workers", "3",
                                   "--link-mbps", "50", "--grad-scale", str(GRAD_SCALE), "--lanes", str(LANES),
                                   "--iterations", str(ITERATIONS))
    assert done.returncode == 0, done.stderr
    plan = ddp.plan("resnet50", build("resnet50"), profile.load("resnet50", "a100"))  # no --profile: the GPU one
    assert results["model"] == "resnet50" and results["workers"] == 3 and results["scheme"] == scheme
    assert results["profile"]["name"] == "a100" and "profile a100: NVIDIA A100" in done.stdout
    assert results["sums_correct"] is True
    assert results["buckets"] == [b.nbytes for b in plan.buckets]
    assert results["compute_s"] == pytest.approx(plan.compute_s)
    assert results["iteration_s"] >= results["compute_s"]
    assert results["exposed_comm_s"] == pytest.approx(results["iteration_s"] - results["compute_s"])
    assert results["emulated_link_gbps"] == pytest.approx(25.0)
    assert results["analytic_iteration_s"] >= plan.compute_s
    assert results["measured_vs_analytic"] == pytest.approx(results["iteration_s"] / results["analytic_iteration_s"])
    assert set(results["per_worker"]) == {"h1", "h2", "h3"}
    assert all(len(r["iterations"]) == ITERATIONS for r in results["per_worker"].values())
    assert "iteration" in done.stdout and "measured/analytic" in done.stdout
    if scheme == "innet":  # a float all-reduce is one exponent-vote packet plus the value chunks
        chunks = sum(1 + math.ceil(round(b.elements * GRAD_SCALE) / LANES) for b in plan.buckets)
        job = results["counters"]["s1"]["jobs"]["1"]
        # + the warm-up pass, the start's vote and chunk, and the barrier after the warm-up pass (the same
        # size again: its chunk and, in the same stream, its vote)
        assert job["completed"] == (ITERATIONS + 1) * chunks + 4
        assert job["overflows"] == 0
    assert e2e.leftovers(tmp_path) == []
