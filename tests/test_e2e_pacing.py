"""Pacing on real Mininet, through scripts/bench_pacing.py: behind 2 Mb/s uplinks with 8-packet
queues, workers that keep their whole 32-chunk slot window in flight overflow the leaves' queues;
`aggnet run --pacing aimd` backs off, on losses alone or on the switches' ECN marks too. Checked by
counts that hold on a busy machine: every sum exact, the fixed window overflowed and never shrank,
AIMD's window did shrink, and with ECN the workers got marked results (none without). How many
fewer resends and drops AIMD has is the benchmark's figure (printed here, asserted nowhere)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet"),
              pytest.mark.timeout(900 + 120)]  # the script's own limit, and its teardown (pyproject's cap: 420 s)
REPO = Path(__file__).resolve().parent.parent


def test_aimd_pacing_backs_off_where_a_full_window_overflows(tmp_path):
    out = tmp_path / "pacing.json"
    # 4 windows of 32 chunks of 32 lanes a worker: the first full window overflows the queues all the same
    done = subprocess.run([sys.executable, "scripts/bench_pacing.py", "--elements", "4096", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    bench = json.loads(out.read_text())
    fixed, aimd, ecn = bench["pacing"]["fixed"], bench["pacing"]["aimd"], bench["pacing"]["aimd_ecn"]
    assert fixed["allreduce_exact"] and aimd["allreduce_exact"] and ecn["allreduce_exact"]
    assert fixed["resends"] > 0 and fixed["tail_drops"] > 0  # the window really overflows the queues
    assert fixed["smallest_window"] == 32  # a fixed window never shrinks
    assert aimd["smallest_window"] < 32  # AIMD halved on the losses of its first full window
    assert fixed["marked_results"] == aimd["marked_results"] == 0  # --ecn-fraction 0: no port marks
    assert ecn["marked_results"] > 0 and ecn["smallest_window"] < 32  # the 8-packet queues marked from 2
    print("\n" + "; ".join(f"{mode}: {r['resends']} resends, {r['tail_drops']} tail drops, {r['seconds']:.2f} s"
                           for mode, r in bench["pacing"].items()))
