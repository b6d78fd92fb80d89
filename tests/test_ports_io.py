"""AF_PACKET ports on real veth interfaces, and the pcap writer/reader."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import time

import pytest

from p4target.ports import PcapWriter, Port, PortError, parse_port_spec, read_pcap

ETHERTYPE = 0x88B5  # IEEE local experimental: nothing else on the link speaks it


def frame(n: int, size: int = 80) -> bytes:
    head = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + struct.pack("!HI", ETHERTYPE, n)
    return head + bytes(size - len(head))


def test_parse_port_spec():
    assert parse_port_spec("3@s1-eth3") == (3, "s1-eth3")
    for bad in ("s1-eth1", "x@s1-eth1", "1@", "511@s1-eth1"):
        with pytest.raises(PortError):
            parse_port_spec(bad)


def test_pcap_roundtrip(tmp_path):
    path = str(tmp_path / "p.pcap")
    w = PcapWriter(path)
    w.write(frame(1), 1000.25)
    w.write(frame(2, 1500), 1001.5)
    w.close()
    got = read_pcap(path)
    assert [(round(t, 3), d) for t, d in got] == [(1000.25, frame(1)), (1001.5, frame(2, 1500))]
    # scapy, an independent reader, agrees
    from scapy.utils import rdpcap
    pkts = rdpcap(path)
    assert [bytes(p) for p in pkts] == [frame(1), frame(2, 1500)]


def test_missing_interface_is_a_one_line_error():
    with pytest.raises(PortError, match="no such interface 'nope-eth9'"):
        Port(1, "nope-eth9")


@pytest.fixture
def veth():
    if os.geteuid() != 0:
        pytest.skip("needs root to create a veth pair")
    a, b = "h6pt-eth1", "h6pt-eth2"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    try:
        for ifname in (a, b):
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=True)
            subprocess.run(["ip", "link", "set", ifname, "up"], check=True)
        yield a, b
    finally:
        subprocess.run(["ip", "link", "del", a], check=False)


def raw_socket(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    s.bind((ifname, ETHERTYPE))
    s.settimeout(2)
    return s


def recv_port(port: Port, timeout: float = 2.0) -> bytes | None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        data = port.recv()
        if data is not None and data[12:14] == struct.pack("!H", ETHERTYPE):
            return data
        if data is None:
            time.sleep(0.001)
    return None


@pytest.mark.root
def test_port_receives_sends_and_captures(veth, tmp_path):
    a, b = veth
    port = Port(1, a, str(tmp_path))
    peer = raw_socket(b)
    try:
        peer.send(frame(1))
        assert recv_port(port) == frame(1)
        assert port.send(frame(2, 200))
        assert peer.recv(2048) == frame(2, 200)
        # our own transmission is not reported back as received
        assert recv_port(port, 0.2) is None
        assert port.stats()["rx_packets"] >= 1 and port.stats()["tx_packets"] == 1
    finally:
        port.close()
        peer.close()
    ins = [d for _, d in read_pcap(str(tmp_path / f"{a}_in.pcap")) if d[12:14] == b"\x88\xb5"]
    outs = [d for _, d in read_pcap(str(tmp_path / f"{a}_out.pcap"))]
    assert ins == [frame(1)] and outs == [frame(2, 200)]
