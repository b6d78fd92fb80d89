"""Two `aggnet run`s started at once on one machine both finish exact (issue 31): the second takes run slot
1 (testbed/slots.py: its switch interfaces a1-s1-eth1..., its ports shifted) instead of waiting for the
first or colliding with it, and neither leaves anything behind."""
from __future__ import annotations

import json
import os

import e2e
import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]


def test_two_runs_started_at_once_both_finish_exact(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    procs = [e2e.start_command(e2e.aggnet_cmd("run", "--workload", "allreduce", "--topo", "star4", "--elements",
                                              "100000", "--seed", str(i), "--out", str(out)))
             for i, out in enumerate(outs)]
    done = [e2e.finish_command(proc, timeout=400) for proc in procs]
    for d in done:
        assert d.returncode == 0, d.stderr
    results = [json.loads((e2e.run_dir(out) / "results.json").read_text()) for out in outs]
    assert all(r["allreduce_exact"] for r in results)
    assert sorted(r["run_slot"]["index"] for r in results) == [0, 1]  # side by side, not one after the other
    beside = next(r for r in results if r["run_slot"]["index"] == 1)
    assert beside["run_slot"]["interface_prefix"] == "a1-"
    log = (e2e.run_dir(outs[results.index(beside)]) / "logs" / "s1.log").read_text()
    assert "1@a1-s1-eth1" in log and "grpc 127.0.0.1:10560" in log  # its own names and ports
    for out in outs:
        assert e2e.leftovers(e2e.run_dir(out)) == []
