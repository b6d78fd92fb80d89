"""Issue 7's pacing on real Mininet: behind 2 Mb/s uplinks with 8-packet queues, workers that keep
their whole 32-chunk slot window in flight lose most of every burst at the leaves' egress and wait
out retransmission timeouts; `aggnet run --pacing aimd` backs off to what the queues hold.
Both sums are exact; AIMD needs far fewer resends and the queues drop far fewer packets."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
REPO = Path(__file__).resolve().parent.parent
TOPO = REPO / "tests" / "data" / "pacing" / "tree_thin.yaml"


def run(pacing: str, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "run", "--topo", str(TOPO), "--workload", "allreduce",
                           "--elements", "12000", "--slots", "32", "--pacing", pacing, "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (run_dir,) = out.iterdir()
    return json.loads((run_dir / "results.json").read_text())


def test_aimd_pacing_avoids_the_losses_of_a_full_window(tmp_path):
    fixed, aimd = run("fixed", tmp_path / "fixed"), run("aimd", tmp_path / "aimd")
    assert fixed["allreduce_exact"] and aimd["allreduce_exact"]
    assert (fixed["config"]["pacing"], aimd["config"]["pacing"]) == ("fixed", "aimd")

    def resends(r):
        return sum(w["retransmissions"] for w in r["per_worker"].values())

    def drops(r):
        return sum(q["tail_drops"] for switch in r["queues"].values() for q in switch.values())

    assert resends(fixed) > 0 and drops(fixed) > 0  # the window really overflows the queues
    assert resends(aimd) * 3 < resends(fixed) and drops(aimd) * 3 < drops(fixed)
    print(f"\nresends fixed {resends(fixed)} vs aimd {resends(aimd)}; tail drops {drops(fixed)} vs {drops(aimd)}; "
          f"seconds {fixed['seconds']:.2f} vs {aimd['seconds']:.2f}")
