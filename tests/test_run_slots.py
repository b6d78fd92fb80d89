"""Run slots (testbed/slots.py): a second network on the machine takes the next slot at once, with its
own interface prefix and ports, instead of waiting for the first; a slot whose ports are taken is
skipped; when none can be had the error is one line; a network in another namespace has slots of its own."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from testbed import slots

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (/run/aggnet)")

HOLDER = """
import sys
from testbed.slots import acquire_slot, lock_file
slot = acquire_slot([int(sys.argv[1])], ["s1-eth1"])
print(slot.index, slot.kernel_name("s1-eth1"), slot.port_offset, lock_file(slot.index), flush=True)
sys.stdin.readline()  # holds the slot until the test says so
"""


def holder(port: int, *prefix: str) -> subprocess.Popen:
    return subprocess.Popen([*prefix, sys.executable, "-c", HOLDER, str(port)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1] % 20_000 + 10_000  # below 32768 with room for a few slots' offsets


def test_a_second_network_takes_the_next_slot_without_waiting():
    port = free_port()
    first, second = holder(port), None
    try:
        index, name, offset, _ = first.stdout.readline().split()
        assert (index, name, offset) == ("0", "s1-eth1", "0"), first.stderr.read()
        second = holder(port)  # while the first still holds slot 0
        index, name, offset, _ = second.stdout.readline().split()
        assert (index, name, offset) == ("1", "a1-s1-eth1", str(slots.PORT_STRIDE)), second.stderr.read()
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.communicate("\n", timeout=60)


def test_a_slot_whose_port_is_taken_is_skipped_and_no_slot_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        if port + slots.PORT_STRIDE > 65535:
            pytest.skip("the kernel gave a port too high to shift")
        slot = slots.acquire_slot([port], [])
        try:
            assert slot.index >= 1 and slots.port_free(port + slot.port_offset)
        finally:
            slot.release()
    with pytest.raises(slots.NoSlot) as error:
        slots.acquire_slot([], ["s1-eth1-way-too-long"])
    assert "\n" not in str(error.value) and "longer than Linux's 15 characters" in str(error.value)


def test_networks_in_two_namespaces_each_have_slot_zero():
    """Names and ports collide only within a namespace: each fresh one has its own slot 0 (its own lock
    file, not the root namespace's)."""
    port = free_port()
    holders = [holder(port, "unshare", "--net", "--") for _ in range(2)]
    lines = []
    try:
        lines = [h.stdout.readline().split() for h in holders]  # the first still holds its slot
        assert [line[:3] for line in lines] == [["0", "s1-eth1", "0"]] * 2, [h.stderr.read() for h in holders]
        assert len({line[3] for line in lines}) == 2 and slots.LOCK_FILE not in {line[3] for line in lines}
    finally:
        for h in holders:
            h.communicate("\n", timeout=60)
        for line in lines:
            if line and line[3] != slots.LOCK_FILE and os.path.exists(line[3]):
                os.remove(line[3])
