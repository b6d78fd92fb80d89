"""`aggnet compare` on the all-reduce workload, as a user runs it (root, Mininet): every scheme runs
the same seeded all-reduce on the same shaped links, every sum is right, the ring's busiest link
carries more than in-network aggregation's (2(N-1)/N of the vector each way against once), and at
a link rate this machine keeps up with, the fidelity monitor names a link as what bound both."""
from __future__ import annotations

import json
import os

import pytest
from e2e import REPO, aggnet_cmd, run_command

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
ELEMENTS = 50_000


def test_compare_runs_the_all_reduce_with_every_scheme(tmp_path):
    done = run_command(aggnet_cmd("compare", "--schemes", "innet,ring,ps", "--workload", "allreduce", "--topo", "star8",
                                  "--workers", "4", "--elements", str(ELEMENTS), "--lanes", "256",
                                  "--link-mbps", "10", "--out", str(tmp_path)), 600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    folder, = tmp_path.glob("compare-*")
    summary = json.loads((folder / "comparison.json").read_text())["schemes"]
    assert list(summary) == ["innet", "ring", "ps"]
    assert all(s["correct"] is True and s["time_s"] > 0 for s in summary.values())
    innet, ring, ps = (summary[s]["link_bytes"] for s in ("innet", "ring", "ps"))
    # a worker's link in-network: the vector up and the sum down (headers on top); the ring sends
    # 2(N-1)/N = 1.5 vectors each way at 4 workers; the server's link carries 4 vectors each way
    assert 2 * 4 * ELEMENTS <= innet < ring and 2 * 1.5 * 4 * ELEMENTS <= ring < ps
    for scheme in ("innet", "ring"):
        results = json.loads(next((folder / scheme).glob("*/results.json")).read_text())
        fidelity = results["fidelity"]
        assert fidelity["measured_over"] == "workload" and fidelity["seconds"] >= results["seconds"] - 0.001  # rounded to ms
        assert fidelity["bottleneck"]["kind"] == "link" and fidelity["bottleneck"]["load"] >= 0.9, fidelity
        assert summary[scheme]["bottleneck"].startswith("link ")
    assert "schemes compared" in done.stdout and (folder / "comparison.png").is_file()  # the table was printed
