"""`aggnet sweep` as a user runs it (root, Mininet): interrupted after its first point, it leaves the rest
pending; `--resume` runs only those, and the sweep ends with its table and figure."""
from __future__ import annotations

import json
import os
import signal
import time

import e2e
import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]


def test_an_interrupted_sweep_resumes_where_it_stopped(tmp_path):
    proc = e2e.start_command(e2e.aggnet_cmd("sweep", "--workload", "allreduce", "--elements", "20000",
                                            "--grid", "workers=2,3", "--out", str(tmp_path)))
    state_file = None
    while proc.poll() is None:  # until the first point is done (the suite's timeout bounds the wait)
        state_file = next(tmp_path.glob("sweep-*/sweep.json"), None)
        if state_file and json.loads(state_file.read_text())["points"][0]["status"] == "done":
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    stopped = e2e.finish_command(proc, timeout=300)
    assert state_file is not None, stopped.stderr
    first = json.loads(state_file.read_text())["points"]
    assert [p["status"] for p in first] == ["done", "pending"], stopped.stdout
    kept = first[0]["summary"]["run_dir"]
    done = e2e.run_command(e2e.aggnet_cmd("sweep", "--resume", str(state_file.parent)), 400)
    assert done.returncode == 0, done.stdout + done.stderr
    points = json.loads(state_file.read_text())["points"]
    assert [p["status"] for p in points] == ["done", "done"]
    assert points[0]["summary"]["run_dir"] == kept  # not run again
    assert all(p["summary"]["exact"] for p in points) and "sweep: p1 " not in done.stdout  # only p2 ran
    assert (state_file.parent / "sweep.png").stat().st_size > 0
    assert (state_file.parent / "sweep.md").read_text().count("| done |") == 2
    assert e2e.leftovers(tmp_path) == []
