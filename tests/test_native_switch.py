"""`aggnet switch --engine native` as a real process on veth pairs: the engine's own packet loop
forwards, captures pcaps, counts, obeys the side channel's queue settings and stops cleanly.
Needs root (veth pairs named h3n*, created and deleted here)."""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from procs import free_port, wait_until

from p4target.ports import read_pcap
from p4target.sidechannel import SideChannelError, send_command

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "data" / "testbed" / "ipv4_counters.p4"
SW = ["h3ns1", "h3ns2"]  # no "-ethN": Mininet's cleanup deletes such links
PEER = ["h3np1", "h3np2"]

pytestmark = pytest.mark.root


def ipv4_frame(dst_ip: str, n: int = 0) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:09") /
                 IP(src="10.0.0.9", dst=dst_ip, ttl=64, id=n) / UDP(sport=1, dport=2) / b"hello-native")


def peer_sockets(ethertype: int) -> tuple[socket.socket, socket.socket]:
    """A socket receiving `ethertype` frames on the far end of port 2 (blocking: a frame that never comes
    is the per-test timeout's), one sending on the far end of port 1."""
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    rx.bind((PEER[1], ethertype))
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tx.bind((PEER[0], 0))
    return rx, tx


@pytest.fixture
def veths():
    if os.geteuid() != 0:
        pytest.skip("needs root to create veth pairs")
    try:
        for sw, peer in zip(SW, PEER):
            subprocess.run(["ip", "link", "add", sw, "type", "veth", "peer", "name", peer], check=True)
        for ifname in SW + PEER:
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=True)
            subprocess.run(["ip", "link", "set", ifname, "up"], check=True)
        yield
    finally:
        for sw in SW:
            subprocess.run(["ip", "link", "del", sw], check=False, capture_output=True)


def test_native_switch_forwards_counts_captures_and_stops(veths, tmp_path):
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    thrift, grpc_port = free_port(), free_port()
    log = tmp_path / "s3.log"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--engine", "native", "--device-id", "3",
                             "-i", f"1@{SW[0]}", "-i", f"2@{SW[1]}", "--grpc-server-addr", f"127.0.0.1:{grpc_port}",
                             "--thrift-port", str(thrift), "--log", str(log), "--pcap", str(tmp_path), str(PROGRAM)],
                            cwd=REPO)
    rx, tx = peer_sockets(0x0800)
    try:
        wait_until(lambda: answers(thrift), proc, log.read_text)
        assert "native engine" in log.read_text()
        send_command(thrift, "table_add ipv4_lpm ipv4_forward 10.0.0.2/32 => 00:00:00:00:00:02 2")
        for n in range(20):
            tx.send(ipv4_frame("10.0.0.2", n))
        tx.send(ipv4_frame("10.9.9.9"))  # no route: dropped by default_action drop()
        got = [Ether(rx.recv(2048)) for _ in range(20)]
        assert [g[IP].id for g in got] == list(range(20))  # in order
        assert all(g.dst == "00:00:00:00:00:02" and g[IP].ttl == 63 and g.load == b"hello-native" for g in got)
        fixed = got[0][IP].copy()
        del fixed.chksum
        assert IP(bytes(fixed)).chksum == got[0][IP].chksum
        wait_until(lambda: send_command(thrift, "counter_read port_in 1").startswith("packets=21 "))  # the dropped one
        assert send_command(thrift, "counter_read port_out 2").startswith("packets=20 ")
        stats = json.loads(send_command(thrift, "port_stats"))
        assert stats["1"]["rx_packets"] >= 21 and stats["2"]["tx_packets"] == 20
        # a queue of 1 packet drained at 5 packets/s: a burst of 10 loses most. Counted, not timed: once
        # all 10 are in, each was dropped, sent or is queued, and no more left than the rate allows
        # (one token in the bucket plus 5 a second since the burst began).
        send_command(thrift, "set_queue_depth 1 2")
        send_command(thrift, "set_queue_rate 5 2")
        base = json.loads(send_command(thrift, "queue_stats 2"))["2"]
        began = time.monotonic()
        for n in range(10):
            tx.send(ipv4_frame("10.0.0.2", 100 + n))
        while True:
            q = json.loads(send_command(thrift, "queue_stats 2"))["2"]
            ended = time.monotonic()
            took = {k: q[k] - base[k] for k in ("enqueued", "dequeued", "tail_drops")}
            if took["enqueued"] + took["tail_drops"] == 10:
                break
            time.sleep(0.05)
        assert q["depth"] == 1 and q["rate_pps"] == 5.0
        assert took["enqueued"] == took["dequeued"] + q["qdepth"] - base["qdepth"] and q["qdepth"] <= 1
        assert took["dequeued"] <= 1 + 5 * (ended - began) and took["tail_drops"] >= 1
        # seeded loss: the engine draws Python's random.Random(seed) sequence, one draw per packet
        send_command(thrift, "set_queue_rate 0 2")
        send_command(thrift, "set_queue_depth 64 2")
        send_command(thrift, "set_queue_loss 0.5 7 2")
        for _ in range(took["enqueued"]):  # what the shaper let through, and what it still held
            rx.recv(2048)
        draws = random.Random(7)
        kept = [n for n in range(40) if draws.random() >= 0.5]
        for n in range(40):
            tx.send(ipv4_frame("10.0.0.2", 200 + n))
        got = []
        for _ in kept:
            got.append(Ether(rx.recv(2048))[IP].id - 200)
        assert got == kept
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        rx.close()
        tx.close()
    ins = [f for _, f in read_pcap(str(tmp_path / f"{SW[0]}_in.pcap")) if f.endswith(b"hello-native")]
    outs = [f for _, f in read_pcap(str(tmp_path / f"{SW[1]}_out.pcap"))]
    assert len(ins) == 71 and len(outs) >= 21 + len(kept) and Ether(outs[0])[IP].ttl == 63
    assert "stopping" in log.read_text()


MARKER = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct m_t { }
struct hs_t { eth_t eth; }
parser P(packet_in p, out hs_t hs, inout m_t m, inout standard_metadata_t s) {
    state start { p.extract(hs.eth); transition accept; } }
control V(inout hs_t hs, inout m_t m) { apply { } }
control I(inout hs_t hs, inout m_t m, inout standard_metadata_t s) {
    apply { hs.eth.src = MARK; s.egress_spec = 2; } }
control E(inout hs_t hs, inout m_t m, inout standard_metadata_t s) { apply { } }
control C(inout hs_t hs, inout m_t m) { apply { } }
control D(packet_out p, in hs_t hs) { apply { p.emit(hs.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_a_frame_right_after_set_pipeline_runs_on_the_new_pipeline(veths):
    """What a PTF test does in every setUp: push a pipeline, then send at once. The old engine must not
    take (or drop) that frame: set_pipeline returns once the packet path has let go of the old one."""
    from p4target.frontend import load_source
    from p4target.native.pipeline import NativePipeline
    from p4target.switch import Switch

    programs = [load_source(MARKER.replace("MARK", str(mark)), f"mark{mark}.p4") for mark in (0xA, 0xB)]
    switch = Switch({1: SW[0], 2: SW[1]})
    loop = threading.Thread(target=switch.run, daemon=True)
    rx, tx = peer_sockets(0x88B5)
    try:
        switch.set_pipeline(NativePipeline(programs[0]))
        loop.start()
        for n in range(8):
            mark = 0xA if n % 2 else 0xB
            switch.set_pipeline(NativePipeline(programs[n % 2 == 0]))
            tx.send(bytes(6) + bytes(5) + b"\x09" + b"\x88\xb5" + bytes([n]) * 46)
            got = rx.recv(2048)
            assert (got[14], got[6:12]) == (n, mark.to_bytes(6, "big")), f"round {n}: {got[:15].hex()}"
    finally:
        switch.stop()
        loop.join(10)
        switch.close()
        rx.close()
        tx.close()
    assert not loop.is_alive()


def answers(side_port: int) -> bool:
    """The switch's side channel answers (it listens once the program is loaded)."""
    try:
        send_command(side_port, "port_stats", timeout=1)
    except SideChannelError:
        return False
    return True
