"""`aggnet clean --all` tears down the live networks of its own network namespace only: an
isolated soak's network (its own namespace, `aggnet soak --isolate`) is not its to stop.

Two marked stand-ins for switch processes (`sleep` named `aggnet switch`, marked as started by
this live test process), one in our namespace and one in a fresh one; only listing, never
killing, so no other session's network is touched."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from testbed import clean

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (unshare)")
STAND_IN = 'exec -a "aggnet switch --device-id 1" sleep 600'


@pytest.fixture
def stand_ins(monkeypatch):
    monkeypatch.delenv(clean.PRIVATE_STATE_ENV, raising=False)  # marked as a testbed whose state is not private
    env = clean.testbed_environment()
    procs = {"here": subprocess.Popen(["bash", "-c", STAND_IN], env=env),
             "elsewhere": subprocess.Popen(["unshare", "--net", "--", "bash", "-c", STAND_IN], env=env)}
    try:
        yield procs
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def marked_pid(proc: subprocess.Popen) -> int:
    """The stand-in's pid once it runs as `aggnet switch` (unshare execs it in place)."""
    while not (clean.process_argv(proc.pid) or [""])[0].startswith("aggnet switch"):  # not unshare's argv,
        # which holds the same words inside its bash -c argument before it has made the namespace
        assert proc.poll() is None
        time.sleep(0.01)
    return proc.pid


def test_clean_all_lists_live_switches_of_its_own_namespace_only(stand_ins):
    here, elsewhere = marked_pid(stand_ins["here"]), marked_pid(stand_ins["elsewhere"])
    assert clean.netns_inode(str(elsewhere)) != clean.netns_inode()
    everything = {pid for pid, _ in clean.orphan_processes(set(), all_records=True)}
    assert here in everything and elsewhere not in everything
    dead_only = {pid for pid, _ in clean.orphan_processes(set())}  # their owner (this test) is alive
    assert here not in dead_only and elsewhere not in dead_only


def test_records_name_their_namespace(monkeypatch, tmp_path):
    monkeypatch.setattr(clean, "STATE_DIR", str(tmp_path))
    record = {"owner": os.getpid(), "owner_start": clean.process_start_time(os.getpid()), "processes": []}
    clean.write_record(record)
    assert record["netns"] == clean.netns_inode()
    assert clean._same_namespace(record) and not clean._same_namespace({**record, "netns": 1})
    assert clean._same_namespace({"owner": 1})  # a record from before namespaces were recorded


def test_a_private_state_dir_leaves_switches_unmarked(monkeypatch):
    monkeypatch.delenv(clean.PRIVATE_STATE_ENV, raising=False)
    monkeypatch.setenv(clean.TESTBED_ENV, "1:1")
    assert clean.testbed_environment()[clean.TESTBED_ENV] == f"{os.getpid()}:{clean.process_start_time(os.getpid())}"
    monkeypatch.setenv(clean.PRIVATE_STATE_ENV, "1")
    assert clean.TESTBED_ENV not in clean.testbed_environment()
