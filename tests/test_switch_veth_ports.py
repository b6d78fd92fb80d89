"""A switch's ports on real veth pairs, in-process, on both engines: a port's ingress delay
(`set_ingress_delay`) holds frames arriving on it at least the delay and in order, not frames
arriving on other ports nor PacketOuts, and not once set back to zero; the native engine's receive
rings take over the ports without losing a frame that waited for the loop, and give them back when
the pipeline changes engine. Needs root for the veth pairs (h7a*/h7b*, per process, made and deleted here); no Mininet."""
from __future__ import annotations

import json
import os
import select
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from procs import free_port, wait_until

from p4target.frontend import load_source
from p4target.native.pipeline import NativePipeline, make_pipeline
from p4target.pipeline import Pipeline
from p4target.sidechannel import SideChannelServer, send_command
from p4target.switch import Switch

ETHERTYPE = 0x88B5  # IEEE local experimental: nothing else on the link speaks it
PACKET_OUTGOING = 4
TAG = os.getpid() % 10000  # two checkouts testing at once do not share veths
SW = {1: f"h7a{TAG}x1", 2: f"h7a{TAG}x2"}  # the switch's ends; never "-ethN" (Mininet's cleanup deletes those)
PEER = {1: f"h7b{TAG}x1", 2: f"h7b{TAG}x2"}
DELAY_S = 1.0  # long enough that undelayed frames, sent after the delayed ones, leave first

CROSS = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct m_t { }
struct hs_t { eth_t eth; }
parser P(packet_in p, out hs_t hs, inout m_t m, inout standard_metadata_t s) {
    state start { p.extract(hs.eth); transition accept; } }
control V(inout hs_t hs, inout m_t m) { apply { } }
control I(inout hs_t hs, inout m_t m, inout standard_metadata_t s) {
    apply { if (s.ingress_port == 1) { s.egress_spec = 2; } else { s.egress_spec = 1; } } }
control E(inout hs_t hs, inout m_t m, inout standard_metadata_t s) { apply { } }
control C(inout hs_t hs, inout m_t m) { apply { } }
control D(packet_out p, in hs_t hs) { apply { p.emit(hs.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def frame(n: int) -> bytes:
    head = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + struct.pack("!HI", ETHERTYPE, n)
    return head + bytes(60 - len(head))


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=False, capture_output=True)


@pytest.fixture
def peers():
    """{port: raw socket on the far end of the veth whose near end is that switch port}."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create veth pairs")
    socks: dict[int, socket.socket] = {}
    try:
        for port, sw in SW.items():
            ip("link", "del", sw)  # left over from an interrupted run
            subprocess.run(["ip", "link", "add", sw, "type", "veth", "peer", "name", PEER[port]], check=True)
            for ifname in (sw, PEER[port]):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=True)
                subprocess.run(["ip", "link", "set", ifname, "up"], check=True)
            socks[port] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
            socks[port].bind((PEER[port], ETHERTYPE))
        yield socks
    finally:
        for s in socks.values():
            s.close()
        for sw in SW.values():
            ip("link", "del", sw)


def receive(socks: dict[int, socket.socket], count: int, timeout_s: float | None = None) -> list[tuple[int, int, float]]:
    """(switch port it left by, frame number, time.monotonic() it arrived) for `count` frames, in arrival order:
    however long they take (the per-test timeout ends a wait for frames that never come), or what came
    within `timeout_s` (to show that nothing does)."""
    by_fd = {s.fileno(): (port, s) for port, s in socks.items()}
    poller = select.poll()
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    got: list[tuple[int, int, float]] = []
    deadline = time.monotonic() + (timeout_s if timeout_s is not None else float("inf"))
    while len(got) < count and time.monotonic() < deadline:
        for fd, _ in poller.poll(100):
            port, s = by_fd[fd]
            data, addr = s.recvfrom(2048)
            if addr[2] != PACKET_OUTGOING:
                got.append((port, struct.unpack("!I", data[14:18])[0], time.monotonic()))
    return got


@pytest.mark.parametrize("engine", ["native", "python"])
def test_ingress_delay_holds_a_port_in_order_and_no_other(peers, engine):
    switch = Switch(SW)
    switch.set_pipeline(make_pipeline(load_source(CROSS, "cross.p4"), engine))
    assert isinstance(switch.pipeline, NativePipeline if engine == "native" else Pipeline)
    thrift = free_port()
    server = SideChannelServer(switch, thrift).start()
    loop = threading.Thread(target=switch.run, daemon=True)
    loop.start()
    try:
        send_command(thrift, f"set_ingress_delay {DELAY_S * 1000} 1")
        sent = {}
        for n in range(5):
            sent[n] = time.monotonic()
            peers[1].send(frame(n))
        switch.inject(1, frame(100))  # a PacketOut entering as if on port 1: not delayed
        peers[2].send(frame(200))  # arrives on port 2: not delayed
        got = receive(peers, 7)
        assert [n for port, n, _ in got if port == 2] == [100, 0, 1, 2, 3, 4]
        first_delayed = [n for _, n, _ in got].index(0)
        assert {n for _, n, _ in got[:first_delayed]} == {100, 200}
        for _, n, t in got[first_delayed:]:
            assert t - sent[n] >= DELAY_S

        # every port delayed, then port 1 back to zero: now port 2's frames wait and port 1's do not
        send_command(thrift, f"set_ingress_delay {DELAY_S * 1000}")
        send_command(thrift, "set_ingress_delay 0 1")
        stats = json.loads(send_command(thrift, "queue_stats"))
        assert [stats[p]["ingress_delay_ms"] for p in ("1", "2")] == [0, DELAY_S * 1000]
        sent_at = time.monotonic()
        peers[2].send(frame(300))
        peers[1].send(frame(301))
        got = receive(peers, 2)
        assert [(port, n) for port, n, _ in got] == [(2, 301), (1, 300)]
        assert got[1][2] - sent_at >= DELAY_S
    finally:
        switch.stop()
        loop.join(10)
        server.stop()
        switch.close()
    assert not loop.is_alive()


def test_the_native_engine_takes_waiting_frames_and_gives_its_ports_back_at_every_swap(peers):
    program = load_source(CROSS, "cross.p4")
    switch = Switch(SW)
    switch.set_pipeline(make_pipeline(program, "native"))
    peers[1].send(frame(1))  # waits on the port's socket: the loop (and its rings) are not there yet
    loop = threading.Thread(target=switch.run, daemon=True)
    loop.start()
    try:
        assert [(port, n) for port, n, _ in receive(peers, 1)] == [(2, 1)]
        for engine, n in (("python", 10), ("native", 20), ("native", 30), ("python", 40)):
            switch.set_pipeline(make_pipeline(program, engine))  # returns once the old loop let go of the ports
            for k in range(3):
                peers[1].send(frame(n + k))
            peers[2].send(frame(n + 5))
            got = receive(peers, 4)
            assert sorted((port, m) for port, m, _ in got) == [(1, n + 5), (2, n), (2, n + 1), (2, n + 2)], engine
            assert [m for port, m, _ in got if port == 2] == [n, n + 1, n + 2]  # in order
        stats = switch.port_stats()
        assert (stats[1]["rx_packets"], stats[2]["rx_packets"]) == (13, 4)  # every engine's counts kept
    finally:
        switch.stop()
        loop.join(10)
        switch.close()
    assert not loop.is_alive()


def test_a_frame_bigger_than_a_ring_slot_arrives_whole(peers):
    switch = Switch(SW)
    switch.set_pipeline(make_pipeline(load_source(CROSS, "cross.p4"), "native"))
    loop = threading.Thread(target=switch.run, daemon=True)
    loop.start()
    try:
        peers[1].send(frame(1))
        assert [n for _, n, _ in receive(peers, 1)] == [1]  # the rings are up, slots for 1500 bytes
        for ifname in (*SW.values(), *PEER.values()):
            ip("link", "set", ifname, "mtu", "4000")
        big = frame(2) + bytes(range(256)) * 12  # 3,132 bytes: more than a 2,048-byte slot holds
        peers[1].send(big)
        by_fd = {s.fileno(): s for s in peers.values()}
        ready = select.select(list(by_fd), [], [])[0]
        data = by_fd[ready[0]].recv(8192)
        assert data == big and ready[0] == peers[2].fileno()
        assert switch.port_stats()[1]["rx_errors"] == 0
    finally:
        switch.stop()
        loop.join(10)
        switch.close()


def xdp_sockets() -> int:
    """AF_XDP sockets open in this network namespace."""
    with open("/proc/net/protocols") as f:
        return next(int(line.split()[2]) for line in f if line.split()[0] == "XDP")


@pytest.mark.parametrize("send", ["af_xdp", "sendmmsg"])
def test_native_sends_in_order_around_big_frames_and_drops_what_a_downed_port_held(peers, send, monkeypatch):
    """The native engine sends through an AF_XDP ring per port (sendmmsg where there is none): a frame too big
    for it leaves by the port's socket after the frames before it; a port taken down drops what it was sending,
    and once up again sends on, with nothing stale arriving late."""
    if send == "sendmmsg":
        monkeypatch.setenv("AGGNET_NATIVE_SENDMMSG", "1")
    for ifname in (*SW.values(), *PEER.values()):
        ip("link", "set", ifname, "mtu", "4000")
    big = frame(2) + bytes(range(256)) * 12  # 3,132 bytes: more than a 2,048-byte send ring frame
    switch = Switch(SW)
    switch.set_pipeline(make_pipeline(load_source(CROSS, "cross.p4"), "native"))
    for data in (frame(1), big, frame(3), frame(4)):
        peers[1].send(data)  # waiting on the port's socket: the loop takes them in one batch
    before = xdp_sockets()
    loop = threading.Thread(target=switch.run, daemon=True)
    loop.start()
    try:
        got = []
        while len(got) < 4 and select.select([peers[2]], [], [])[0]:
            data, addr = peers[2].recvfrom(8192)
            if addr[2] != PACKET_OUTGOING:
                got.append(data)
        assert [struct.unpack("!I", d[14:18])[0] for d in got] == [1, 2, 3, 4] and got[1] == big
        assert xdp_sockets() - before == (2 if send == "af_xdp" else 0)

        ip("link", "set", SW[2], "down")
        for n in range(10, 15):
            peers[1].send(frame(n))
        wait_until(lambda: switch.port_stats()[2]["tx_errors"] >= 5)
        assert switch.port_stats()[2]["tx_errors"] == 5
        ip("link", "set", SW[2], "up")
        wait_until(lambda: all(Path(f"/sys/class/net/{i}/operstate").read_text().strip() == "up" for i in (SW[2], PEER[2])))
        for n in range(20, 23):
            peers[1].send(frame(n))
        assert [n for _, n, _ in receive(peers, 3)] == [20, 21, 22]  # by the port's socket until a new ring is open
        assert receive(peers, 1, timeout_s=0.5) == []  # none of 10..14 after all
        wait_until(lambda: xdp_sockets() - before == (2 if send == "af_xdp" else 0))  # at the loop's idle wake
    finally:
        switch.stop()
        loop.join(10)
        switch.close()
