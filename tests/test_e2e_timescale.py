"""`aggnet compare --scale F` as a user runs it (root, Mininet): a cluster with 1 Gb/s links
emulated at 5 Mb/s. Every sum is still exact, the times are reported in the cluster's time (each
worker's measured window divided by F, no faster than its links allow at the emulated rate), and
the fidelity monitor, on the scaled rates, names a link as what bound the in-network run."""
from __future__ import annotations

import json
import os

import pytest
from e2e import REPO, aggnet_cmd, run_command

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
ELEMENTS = 50_000
EMULATED_MBPS = 1000
SCALE = 200  # 5 Mb/s in real time: links, not the shared cores, bind it


def test_compare_at_scale_reports_the_clusters_time_and_stays_link_bound(tmp_path):
    done = run_command(aggnet_cmd("compare", "--schemes", "innet,ring", "--workload", "allreduce", "--topo", "star8",
                                  "--workers", "4", "--elements", str(ELEMENTS), "--lanes", "256",
                                  "--link-mbps", str(EMULATED_MBPS), "--scale", str(SCALE),
                                  "--min-rto", str(0.2 / SCALE), "--max-rto", str(1.0 / SCALE),
                                  "--out", str(tmp_path)), 600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    folder, = tmp_path.glob("compare-*")
    summary = json.loads((folder / "comparison.json").read_text())["schemes"]
    for scheme in ("innet", "ring"):
        results = json.loads(next((folder / scheme).glob("*/results.json")).read_text())
        assert results["allreduce_exact"] is True and summary[scheme]["correct"] is True
        assert results["time_scale"]["factor"] == SCALE and results["config"]["link_mbps"] == EMULATED_MBPS
        for worker in results["per_worker"].values():
            start, end = worker["window"]  # this machine's clock
            assert worker["seconds"] == pytest.approx((end - start) / SCALE)
        assert summary[scheme]["time_s"] == results["seconds"] == max(w["seconds"] for w in results["per_worker"].values())
        # one direction of the busiest link carries at least the vector (4 bytes an element): no faster than
        # the emulated rate allows, and far slower than it would be reported without unscaling
        assert results["seconds"] >= 4 * ELEMENTS * 8 / (EMULATED_MBPS * 1e6)
        assert results["fidelity"]["seconds"] >= SCALE * results["seconds"] - 0.001  # real time, rounded to ms
    innet = json.loads(next((folder / "innet").glob("*/results.json")).read_text())["fidelity"]
    assert innet["bottleneck"]["kind"] == "link" and innet["bottleneck"]["load"] >= 0.9, innet
    assert "emulated cluster's" in done.stdout
