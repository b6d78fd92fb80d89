"""Only one AggNet network runs at a time in a network namespace: a second one there waits for the
first to stop; one in another namespace does not."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from testbed import network

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (/run/aggnet)")

HOLDER = """
import sys, time
from testbed.network import acquire_network_lock
lock = acquire_network_lock()
print("held", flush=True)
time.sleep(float(sys.argv[1]))
"""


def test_second_network_waits_for_the_first(capfd):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        lock = network.acquire_network_lock()
        assert holder.wait(10) == 0  # the lock came free only as the holder finished
        lock.close()
    finally:
        holder.kill()
        holder.wait()
    assert f"waiting for another AggNet network (pid {holder.pid})" in capfd.readouterr().err


IN_NAMESPACE = """
import sys
from testbed.network import acquire_network_lock, network_lock_file
print(network_lock_file(), flush=True)
lock = acquire_network_lock()
print("held", flush=True)
sys.stdin.readline()  # holds the lock until the test says so
"""


def test_networks_in_two_namespaces_do_not_wait_for_each_other():
    """Each fresh network namespace has a lock of its own: the second holder gets its lock while the
    first still holds its own, without waiting; the root namespace keeps network.lock."""
    holders = [subprocess.Popen(["unshare", "--net", "--", sys.executable, "-c", IN_NAMESPACE], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    paths = []
    try:
        paths += [holder.stdout.readline().strip() for holder in holders]
        assert len(set(paths)) == 2 and network.LOCK_FILE not in paths  # (one shared file would make one wait)
        for holder in holders:  # the first still holds its lock when the second reports "held"
            assert holder.stdout.readline().strip() == "held", holder.stderr.read()
        for holder in holders:
            _, err = holder.communicate("\n", timeout=60)
            assert holder.returncode == 0 and "waiting" not in err, err
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
        for path in paths:
            if path != network.LOCK_FILE:
                os.remove(path)
    assert all(os.path.basename(p).startswith("network-") for p in paths)
    assert network.network_lock_file() == network.LOCK_FILE  # this test runs in the root namespace
