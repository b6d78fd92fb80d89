"""`aggnet compare --scale F` as a user runs it (root, Mininet): a cluster with 1 Gb/s links
emulated at 5 Mb/s (the ring at 10: `--scheme-scale`). Every sum is still exact, the times are reported in the cluster's time (each
worker's measured window divided by F, no faster than its links allow at the emulated rate), and
the fidelity monitor, on the scaled rates, names a link as what bound the in-network run; for a
model workload, whose all-reduces overlap the backward pass, it does so over the communication
phases only."""
from __future__ import annotations

import json
import math
import os

import e2e
import pytest
from e2e import REPO, aggnet_cmd, run_command

from hosts.models import ddp, profile
from hosts.models.analytic import ETHERNET_BYTES, IP_UDP_BYTES
from hosts.models.arch import build
from protocol.wire import packet_bytes

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
ELEMENTS = 50_000
EMULATED_MBPS = 1000
SCALE = 200  # 5 Mb/s in real time: links, not the shared cores, bind it
RING_SCALE = 100  # --scheme-scale: the ring's hosts need less slow motion


def test_compare_at_scale_reports_the_clusters_time_and_stays_link_bound(tmp_path):
    done = run_command(aggnet_cmd("compare", "--schemes", "innet,ring", "--workload", "allreduce", "--topo", "star8",
                                  "--workers", "4", "--elements", str(ELEMENTS), "--lanes", "256",
                                  "--link-mbps", str(EMULATED_MBPS), "--scale", str(SCALE),
                                  "--scheme-scale", f"ring={RING_SCALE}", "--min-rto", str(0.2 / SCALE), "--max-rto", str(1.0 / SCALE),
                                  "--out", str(tmp_path)), 600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    folder, = tmp_path.glob("compare-*")
    summary = json.loads((folder / "comparison.json").read_text())["schemes"]
    for scheme, scale in (("innet", SCALE), ("ring", RING_SCALE)):
        results = json.loads(next((folder / scheme).glob("*/results.json")).read_text())
        assert results["allreduce_exact"] is True and summary[scheme]["correct"] is True
        assert results["time_scale"]["factor"] == scale and results["config"]["link_mbps"] == EMULATED_MBPS
        for worker in results["per_worker"].values():
            start, end = worker["window"]  # this machine's clock
            assert worker["seconds"] == pytest.approx((end - start) / scale)
        assert summary[scheme]["time_s"] == results["seconds"] == max(w["seconds"] for w in results["per_worker"].values())
        # one direction of the busiest link carries at least the vector (4 bytes an element): no faster than
        # the emulated rate allows, and far slower than it would be reported without unscaling
        assert results["seconds"] >= 4 * ELEMENTS * 8 / (EMULATED_MBPS * 1e6)
        assert results["fidelity"]["seconds"] >= scale * results["seconds"] - 0.001  # real time, rounded to ms
    innet = json.loads(next((folder / "innet").glob("*/results.json")).read_text())["fidelity"]
    assert innet["bottleneck"]["kind"] == "link" and innet["bottleneck"]["load"] >= 0.9, innet
    assert "emulated cluster's" in done.stdout


def test_a_model_run_at_scale_is_judged_over_its_communication_phases(tmp_path):
    """ResNet-50's DDP iterations in-network, 50 Mb/s links run 8 times slower: the iteration is mostly
    compute, so the links are idle most of the window, but whenever an all-reduce is in flight they are
    what binds it, and the monitor, measuring over those phases only, names a link."""
    grad_scale, iterations, lanes = 0.02, 2, 364
    done, results = e2e.aggnet_run(tmp_path, "--workload", "model:resnet50", "--profile", "cpu", "--scheme", "innet",
                                   "--workers", "3", "--link-mbps", "50", "--grad-scale", str(grad_scale), "--scale", "8",
                                   "--lanes", str(lanes), "--iterations", str(iterations), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert results is not None and results["sums_correct"] is True
    fidelity = results["fidelity"]
    windows = [w["window"] for w in results["per_worker"].values()]
    workload_s = max(end for _, end in windows) - min(start for start, _ in windows)  # this machine's time
    assert fidelity["measured_over"] == "communication" and 0 < fidelity["seconds"] < workload_s
    assert fidelity["bottleneck"]["kind"] == "link" and fidelity["bottleneck"]["load"] >= 0.9, fidelity
    # the counters are read after the run: what a worker's link carried is its all-reduces' packets, the
    # warm-up pass's and the iterations' (one exponent vote and the value chunks a bucket; the warm-up pass
    # votes first, apart), and beside them only the start's vote and chunk and the barrier's chunk and vote
    plan = ddp.plan("resnet50", build("resnet50"), profile.load("resnet50", "cpu"))
    packets = (iterations + 1) * sum(1 + math.ceil(round(b.elements * grad_scale) / lanes) for b in plan.buckets)
    frame = ETHERNET_BYTES + IP_UDP_BYTES + packet_bytes(lanes)
    carried = results["counters"]["s1"]["ports"]["1"]["rx_bytes"]  # h1 -> s1
    assert 4 * frame <= carried - packets * frame <= 4 * frame + 0.02 * carried  # (2 %: resends, in the phases too)
    assert e2e.leftovers(tmp_path) == []
