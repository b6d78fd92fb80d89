"""Only one AggNet network runs at a time: a second one waits for the first to stop."""
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
