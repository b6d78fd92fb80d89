"""Link detection reads the kernel's port state: a real veth pair taken down is seen at once."""
import os
import subprocess
import uuid

import pytest

from controller.failover import interface_state

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a veth pair")


def test_interface_state_follows_the_link():
    a, b = f"fa{uuid.uuid4().hex[:8]}", f"fb{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        subprocess.run(["ip", "link", "set", a, "up"], check=True)
        subprocess.run(["ip", "link", "set", b, "up"], check=True)
        assert interface_state(a) == "up"
        subprocess.run(["ip", "link", "set", b, "down"], check=True)  # the far end goes down
        assert interface_state(a) == "down" and interface_state(b) == "down"
    finally:
        subprocess.run(["ip", "link", "del", a], check=False)
    assert interface_state(a) == "missing"
