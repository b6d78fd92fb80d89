"""Issue 4's proof on real Mininet: `aggnet run --workload allreduce` sums random int32
elements per worker exactly (every worker checks against numpy), on star4 and on tree2 with
aggregation on every switch, also with 1% random loss at every switch port; float32 vectors
come back within the quantization bound of docs/protocol.md (at the default
lanes and pacing; results.json times each phase); the benchmark also runs with a
parameter server. Each run leaves no interfaces or processes behind."""
from __future__ import annotations

import os

import e2e
import pytest

from protocol import wire

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
ELEMENTS = 300_000  # 826 chunks a worker; scripts/bench.sh runs 1M


@pytest.mark.parametrize("topo, workers, k, loss", [
    ("star4", 4, 1, None),
    ("star4", 4, 1, 1),
    ("tree2", 8, 2, None),
    ("tree2", 8, 2, 1),
])
def test_int32_allreduce_is_exact(tmp_path, topo, workers, k, loss):
    extra = ["--loss", str(loss)] if loss else []
    done, results = e2e.aggnet_run(tmp_path, "--workload", "allreduce", "--topo", topo, "--k", str(k),
                                   "--elements", str(ELEMENTS), "--seed", "11", *extra)
    assert done.returncode == 0, done.stderr
    assert results["allreduce_exact"] is True
    assert results["elements"] == ELEMENTS and results["workers"] == workers
    assert len(results["per_worker"]) == workers and all(r["exact"] for r in results["per_worker"].values())
    assert results["seconds"] > 0 and results["goodput_elements_per_s"] == pytest.approx(ELEMENTS / results["seconds"])
    assert (results["config"]["lanes"], results["config"]["pacing"]) == (wire.MTU_LANES, "aimd")  # defaults
    assert set(results["phases_s"]) == {"start network", "load pipelines", "install", "run", "stop hosts", "collect",
                                        "teardown"}
    assert all(t >= 0 for t in results["phases_s"].values()) and "time: start network" in done.stdout
    chunks = -(-ELEMENTS // wire.MTU_LANES) + 1  # 825 full packets at the default lanes, + the warm-up chunk
    assert set(results["placement"]["aggregators"]) == set(results["counters"])  # every switch aggregates
    for switch, counters in results["counters"].items():
        job = counters["jobs"]["1"]
        assert job["completed"] == chunks, switch
        assert job["overflows"] == 0
    if loss:
        drops = sum(q["loss_drops"] for queues in results["queues"].values() for q in queues.values())
        assert drops > 0.005 * sum(q["dequeued"] + q["loss_drops"] for queues in results["queues"].values()
                                   for q in queues.values())
        assert sum(r["retransmissions"] for r in results["per_worker"].values()) > 0
    print(f"\n{topo} loss={loss}: {results['seconds']:.2f} s, {results['goodput_elements_per_s']:,.0f} elements/s")
    assert e2e.leftovers(tmp_path) == []


def test_float32_allreduce_within_quantization_bound(tmp_path):
    done, results = e2e.aggnet_run(tmp_path, "--workload", "allreduce", "--dtype", "float32",
                                   "--elements", str(ELEMENTS), "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert results["allreduce_correct"] is True and results["dtype"] == "float32"
    for r in results["per_worker"].values():
        assert 0 < r["max_abs_error"] <= r["bound"] < 1e-5
    assert e2e.leftovers(tmp_path) == []


def test_parameter_server_benchmark(tmp_path):
    done, results = e2e.aggnet_run(tmp_path, "--workload", "allreduce", "--scheme", "ps", "--workers", "3",
                                   "--elements", "200000")
    assert done.returncode == 0, done.stderr
    assert results["allreduce_exact"] is True and results["config"]["ps_host"] == "h4"
    assert results["counters"]["s1"]["jobs"] == {}
    # the server's link carries every worker's vector in and the sum out: 6 x 200000 x 4 bytes at least
    assert results["link_bytes"]["s1-h4"] >= 6 * 200_000 * 4
    assert e2e.leftovers(tmp_path) == []
