"""Link detection reads the kernel's port state: a real veth pair taken down is seen down (once the kernel says so)."""
import os
import subprocess
import uuid

import pytest
from procs import wait_until

from controller.failover import interface_state

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a veth pair")


def test_interface_state_follows_the_link():
    a, b = f"fa{uuid.uuid4().hex[:8]}", f"fb{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        subprocess.run(["ip", "link", "set", a, "up"], check=True)
        subprocess.run(["ip", "link", "set", b, "up"], check=True)
        # the kernel tells the carrier's changes a moment later (its link watch, slower on a busy machine)
        wait_until(lambda: interface_state(a) == "up")
        subprocess.run(["ip", "link", "set", b, "down"], check=True)  # the far end goes down
        wait_until(lambda: interface_state(a) == interface_state(b) == "down")
    finally:
        subprocess.run(["ip", "link", "del", a], check=False)
    assert interface_state(a) == "missing"
