"""`aggnet compare` on the all-reduce workload, as a user runs it (root, Mininet): every scheme runs
the same seeded all-reduce on the same shaped links, every sum is right, the ring's busiest link
carries more than in-network aggregation's (2(N-1)/N of the vector each way against once), and the
fidelity monitor measures the links at their rate and judges by its measurements (a link, at a rate
an idle machine keeps up with; on a busy one, maybe the machine: e2e.judged_busiest)."""
from __future__ import annotations

import json
import os

import e2e
import pytest
from e2e import REPO, aggnet_cmd, run_command

from testbed.report import bottleneck_text

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
        e2e.judged_busiest(fidelity, 4 * ELEMENTS, 10)  # the vector, one way at least, at 10 Mb/s
        assert summary[scheme]["bottleneck"] == bottleneck_text(fidelity)
    assert "schemes compared" in done.stdout and (folder / "comparison.png").is_file()  # the table was printed
