"""Issue 4's bench on real Mininet: scripts/bench_allreduce.py runs the all-reduce in-network
and through a parameter server on its own host (star8: workers h1..h4, server h5; 64 lanes), and the
in-network run's busiest link carries at most 1/3 of the bytes on the server's link."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet"),
              pytest.mark.timeout(600 + 120)]  # the script's own limit, and its teardown (pyproject's cap: 420 s)
REPO = Path(__file__).resolve().parent.parent
ELEMENTS = 100_000


def test_innet_busiest_link_carries_at_most_a_third_of_the_servers(tmp_path):
    out = tmp_path / "allreduce.json"
    done = subprocess.run([sys.executable, "scripts/bench_allreduce.py", "--elements", str(ELEMENTS), "--runs",
                           str(tmp_path / "runs"), "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    bench = json.loads(out.read_text())
    innet, ps = bench["schemes"]["innet"], bench["schemes"]["ps"]
    assert (bench["ps_host"], bench["server_link"], bench["workers"]) == ("h5", "s1-h5", 4)
    assert innet["allreduce_exact"] and ps["allreduce_exact"]
    # the server's link carries every worker's vector in and the sum out to each: 8 x 4 bytes per element
    assert ps["busiest_link"] == "s1-h5" and ps["server_link_bytes"] >= 8 * 4 * ELEMENTS
    # in-network, a worker's link carries its vector up and the sum down, headers included
    assert innet["server_link_bytes"] == 0 and 2 * 4 * ELEMENTS <= innet["busiest_link_bytes"] <= 4 * 4 * ELEMENTS
    assert bench["innet_busiest_vs_ps_server"] == innet["busiest_link_bytes"] / ps["server_link_bytes"] <= 1 / 3
    print(f"\nbusiest link in-network / server link ps: {bench['innet_busiest_vs_ps_server']:.3f}; "
          f"goodput {innet['goodput_elements_per_s']:,.0f} vs {ps['goodput_elements_per_s']:,.0f} elements/s")
