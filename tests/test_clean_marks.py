"""`aggnet clean` stops only the switch processes an AggNet testbed started (issue 12 item 9).

Three real `aggnet switch` processes, no Mininet, no ports, each left running in the
background by a shell that exits (as `nohup ... &` does): one with the mark of a testbed that
is gone, one with the mark of a live testbed (this test), one started by hand without any
mark. Only the first is a leftover.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from procs import free_port

from testbed import clean

ROOT = Path(__file__).resolve().parent.parent
DEAD_PID = 2 ** 22 + 7  # above the largest pid_max Linux allows: no testbed runs as it


def start_in_background(env: dict[str, str], log: Path) -> tuple[int, int]:
    """(pid, start time) of an `aggnet switch` a shell starts in the background and leaves."""
    argv = [str(ROOT / ".venv" / "bin" / "aggnet"), "switch", "--device-id", "1", "--grpc-server-addr",
            f"127.0.0.1:{free_port()}", "--thrift-port", str(free_port()), "--log", str(log)]
    shell = subprocess.run(["sh", "-c", '"$@" </dev/null >/dev/null 2>&1 & echo $!', "sh", *argv],
                           env=env, capture_output=True, text=True, check=True)
    pid = int(shell.stdout)
    return pid, clean.process_start_time(pid)


def running(pid: int, start: int) -> bool:
    return clean.process_start_time(pid) == start


@pytest.fixture
def switches(tmp_path, monkeypatch):
    monkeypatch.delenv(clean.PRIVATE_STATE_ENV, raising=False)  # marked as a testbed whose state is not private
    unmarked_env = {k: v for k, v in os.environ.items() if k != clean.TESTBED_ENV}
    started = {}
    try:
        started["orphan"] = start_in_background({**unmarked_env, clean.TESTBED_ENV: f"{DEAD_PID}:1"},
                                                tmp_path / "orphan.log")
        started["live"] = start_in_background(clean.testbed_environment(), tmp_path / "live.log")
        started["by_hand"] = start_in_background(unmarked_env, tmp_path / "by_hand.log")
        while not all((tmp_path / f"{name}.log").exists() for name in started):  # each has started up
            assert all(running(*p) for p in started.values())
            time.sleep(0.1)
        yield started
    finally:
        for pid, start in started.values():
            clean.kill_process(pid, start)


def test_a_switch_started_by_hand_is_never_a_leftover(switches):
    pids = {name: pid for name, (pid, _) in switches.items()}
    assert clean.testbed_of(pids["orphan"]) == (DEAD_PID, 1)
    assert clean.testbed_of(pids["live"]) == (os.getpid(), clean.process_start_time(os.getpid()))
    assert clean.testbed_of(pids["by_hand"]) is None

    leftovers = {pid for pid, _ in clean.orphan_processes(set())}
    assert pids["orphan"] in leftovers
    assert pids["live"] not in leftovers and pids["by_hand"] not in leftovers
    assert pids["orphan"] not in {pid for pid, _ in clean.orphan_processes({pids["orphan"]})}  # claimed
    everything = {pid for pid, _ in clean.orphan_processes(set(), all_records=True)}  # `aggnet clean --all`
    assert pids["live"] in everything and pids["by_hand"] not in everything

    assert clean.kill_process(*switches["orphan"])
    assert running(*switches["live"]) and running(*switches["by_hand"])
