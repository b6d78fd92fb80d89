"""`aggnet compare --scale F` as a user runs it (root, Mininet): a cluster with 1 Gb/s links
emulated at 5 Mb/s (the ring at 10: `--scheme-scale`). Every sum is still exact, the times are reported in the cluster's time (each
worker's measured window divided by F, no faster than its links allow at the emulated rate), and
the fidelity monitor measures the links at the scaled rates (the emulated one would leave them a
two-hundredth as busy) and judges by its measurements (a link on an idle machine; on a busy one,
maybe the machine: e2e.judged_busiest); for a model workload, whose all-reduces overlap the backward
pass, it does so over the communication phases only."""
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
from testbed import autoscale
from testbed.fidelity import union
from testbed.timescale import step_up

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
                                  "--scheme-scale", f"ring={RING_SCALE}",
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
    e2e.judged_busiest(innet, 4 * ELEMENTS, EMULATED_MBPS / SCALE)  # the vector, one way, at the scaled rate
    assert "emulated cluster's" in done.stdout


def test_a_model_run_at_scale_is_judged_over_its_communication_phases(tmp_path):
    """ResNet-50's DDP iterations in-network, 50 Mb/s links run 8 times slower: the iteration is mostly
    compute, so the links are idle most of the window; the monitor measures over the phases in which an
    all-reduce was in flight only (where, on an idle machine, a link binds it)."""
    grad_scale, iterations, lanes = 0.02, 2, 364
    done, results = e2e.aggnet_run(tmp_path, "--workload", "model:resnet50", "--profile", "cpu", "--scheme", "innet",
                                   "--workers", "3", "--link-mbps", "50", "--grad-scale", str(grad_scale), "--scale", "8",
                                   "--lanes", str(lanes), "--iterations", str(iterations), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert results is not None and results["sums_correct"] is True
    fidelity = results["fidelity"]
    # the phases are the workers' all-reduces in flight (the warm-up pass's too), united: this machine's time,
    # with the compute between iterations left out however long either took
    phases = union(tuple(i) for w in results["per_worker"].values() for i in w["comm_intervals"])
    assert fidelity["measured_over"] == "communication" and fidelity["phases"] == len(phases) > 1  # warm-up, barrier, forward
    assert fidelity["seconds"] == pytest.approx(sum(end - start for start, end in phases), abs=0.001)
    # the counters are read after the run: what a worker's link carried is its all-reduces' packets, the
    # warm-up pass's and the iterations' (one exponent vote and the value chunks a bucket; the warm-up pass
    # votes first, apart), and beside them only the start's vote and chunk and the barrier's chunk and vote
    plan = ddp.plan("resnet50", build("resnet50"), profile.load("resnet50", "cpu"))
    packets = (iterations + 1) * sum(1 + math.ceil(round(b.elements * grad_scale) / lanes) for b in plan.buckets)
    frame = ETHERNET_BYTES + IP_UDP_BYTES + packet_bytes(lanes)
    carried = results["counters"]["s1"]["ports"]["1"]["rx_bytes"]  # h1 -> s1
    assert 4 * frame <= carried - packets * frame <= 4 * frame + 0.02 * carried  # (2 %: resends, in the phases too)
    e2e.judged_busiest(fidelity, packets * frame, 50 / 8)  # what h1's link carried in the phases, at the scaled rate
    assert e2e.leftovers(tmp_path) == []


@pytest.fixture
def no_probe():
    """This machine's cached probe set aside for the test and put back after it: the user's `--scale auto`
    keeps choosing from the probe it had."""
    path = autoscale.probe_path()
    kept = path.read_bytes() if path.exists() else None
    path.unlink(missing_ok=True)
    yield path
    if kept is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(kept)


def test_scale_auto_probes_the_machine_once_and_records_its_choice(tmp_path, no_probe):
    """`--scale auto` on a machine without a probe: it probes (a star4 all-reduce), caches the result beside the
    native builds, runs at the factor it chose (results in the cluster's time), and says why; the next choice
    reads the cache. Pinned to one core (taskset), the run has one core: F is chosen for it."""
    done = run_command(["taskset", "-c", "0", *aggnet_cmd("run", "--workload", "allreduce", "--topo", "star4",
                                                          "--elements", "20000", "--scale", "auto",
                                                          "--out", str(tmp_path / "runs"))], 600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    chosen = results["scale_auto"]
    assert results["allreduce_exact"] and results["time_scale"]["factor"] == chosen["factor"] >= 1
    assert chosen["factor"] == step_up(max(1.0, chosen["needed"])) and chosen["hops_per_chunk"] == 8
    assert chosen["cores"] == 1 and chosen["needed"] == pytest.approx(
        8 * chosen["hop_cpu_s"] / (chosen["link_s_per_chunk"] * autoscale.TARGET), abs=1e-3)
    assert "probing this machine once" in done.stdout and f"--scale auto: {chosen['factor']:g} (" in done.stdout
    probe = json.loads(autoscale.probe_path().read_text())
    assert probe["machine"] == autoscale.machine() and probe["hop_cpu_s"] == chosen["hop_cpu_s"] > 0
    assert autoscale.hop_cost(None, lambda cfg: pytest.fail("probed again")) == probe
