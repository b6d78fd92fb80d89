"""testbed.clean's testbed records and /proc readers, on a private state folder (no Mininet,
nothing is cleaned: clean() itself is exercised by tests/test_testbed_lifecycle.py)."""
from __future__ import annotations

import os
import subprocess
import sys

from testbed import clean

DEAD_PID = 2 ** 22 + 7  # above the largest pid_max Linux allows


def test_live_records_keeps_live_owners_and_removes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(clean, "STATE_DIR", str(tmp_path / "state"))
    assert clean.live_records() == []  # no state folder yet
    me = os.getpid()
    live = {"owner": me, "owner_start": clean.process_start_time(me), "run_dir": "/runs/a", "processes": []}
    clean.write_record(live)
    clean.write_record({"owner": DEAD_PID, "owner_start": 1})
    with subprocess.Popen(["sleep", "60"]) as other:
        clean.write_record({"owner": other.pid, "owner_start": -1})  # it runs, but it is not the process that wrote this
        state = tmp_path / "state"
        (state / "testbed-5.json").write_text("{half written")
        (state / "testbed-6.json").write_text("[1, 2]")
        (state / "notes.json").write_text(f'{{"owner": {me}}}')  # not a testbed record
        before = sorted(os.listdir(state))
        assert clean.live_records() == [live]
        assert sorted(os.listdir(state)) == before
        other.kill()


def test_process_argv_and_start_time_follow_the_process():
    argv = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout.readline() == "up\n"
            assert clean.process_argv(proc.pid) == argv
            assert isinstance(clean.process_start_time(proc.pid), int)
        finally:
            proc.kill()
    assert clean.process_argv(proc.pid) == []
    assert clean.process_start_time(proc.pid) is None
