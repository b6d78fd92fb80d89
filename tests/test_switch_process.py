"""`aggnet switch` as a real process on veth pairs: forwarding, pcap, SIGTERM, bad input."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r
from p4rt_raw import RawClient
from procs import free_port, wait_for, wait_until

from p4target.ports import read_pcap
from p4target.sidechannel import send_command

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "data" / "testbed" / "ipv4_counters.p4"
SW = ["h6s-eth1", "h6s-eth2"]

PEER = ["h6p-eth1", "h6p-eth2"]


def aggnet(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60, **kw)


def ipv4_frame(dst_ip: str, ttl: int = 64) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:09") /
                 IP(src="10.0.0.9", dst=dst_ip, ttl=ttl) / UDP(sport=1, dport=2) / b"hello-switch")


def test_bad_program_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <v1model.p4>\ncontrol C() { apply { x = ; } }\n")
    out = aggnet("switch", "--thrift-port", str(free_port()), "--grpc-server-addr", f"127.0.0.1:{free_port()}",
                 str(bad))
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.p4:2:" in lines[0] and "error" in lines[0], out.stderr


@pytest.fixture
def veths():
    if os.geteuid() != 0:
        pytest.skip("needs root to create veth pairs")
    for sw, peer in zip(SW, PEER):
        subprocess.run(["ip", "link", "add", sw, "type", "veth", "peer", "name", peer], check=True)
    try:
        for ifname in SW + PEER:
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=True)
            subprocess.run(["ip", "link", "set", ifname, "up"], check=True)
        yield
    finally:
        for sw in SW:
            subprocess.run(["ip", "link", "del", sw], check=False)


@pytest.mark.root
def test_forwarding_pcap_and_clean_sigterm(veths, tmp_path):
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    side_port, grpc_port = free_port(), free_port()
    log = tmp_path / "s9.log"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", "9",
                             "-i", f"1@{SW[0]}", "-i", f"2@{SW[1]}", "--grpc-server-addr", f"127.0.0.1:{grpc_port}",
                             "--thrift-port", str(side_port), "--log", str(log), "--pcap", str(tmp_path), str(PROGRAM)],
                            cwd=REPO)
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    rx.bind((PEER[1], 0x0800))  # blocking: a frame that never comes is the per-test timeout's
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tx.bind((PEER[0], 0))
    try:
        wait_for(side_port, proc, log)  # listening once PROG is loaded
        send_command(side_port, "table_add ipv4_lpm ipv4_forward 10.0.0.2/32 => 00:00:00:00:00:02 2")
        tx.send(ipv4_frame("10.0.0.2"))
        tx.send(ipv4_frame("10.9.9.9"))  # no route: dropped by default_action drop()
        got = Ether(rx.recv(2048))
        assert got.dst == "00:00:00:00:00:02" and got[IP].ttl == 63 and got.load == b"hello-switch"
        fixed = got[IP].copy()
        del fixed.chksum
        assert IP(bytes(fixed)).chksum == got[IP].chksum  # the switch recomputed the checksum
        wait_until(lambda: send_command(side_port, "counter_read port_in 1").startswith("packets=2 "))  # the dropped one
        assert send_command(side_port, "counter_read port_out 2").startswith("packets=1 ")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        rx.close()
        tx.close()
    ins = [f for _, f in read_pcap(str(tmp_path / f"{SW[0]}_in.pcap")) if f.endswith(b"hello-switch")]
    outs = [f for _, f in read_pcap(str(tmp_path / f"{SW[1]}_out.pcap"))]
    assert len(ins) == 2 and len(outs) == 1 and Ether(outs[0])[IP].ttl == 63
    assert "stopping" in log.read_text()


@contextlib.contextmanager
def switch_process(*args: str) -> Iterator[subprocess.Popen]:
    """`aggnet switch ARGS` running; killed on the way out unless the test stopped it."""
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", *args], cwd=REPO)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.root
@pytest.mark.parametrize("engine", ["native", "python"])
def test_pcap_stops_at_its_cap_and_the_log_rotates(veths, tmp_path, engine):
    """--pcap-max-mb 1: a port's capture keeps the frames that fit in 1 MiB and no more, on either
    engine. --log-max-mb 1: the P4Runtime request log, written to by every Write, is renamed FILE.1 at 1 MiB
    and begun anew."""
    side_port, grpc_port = free_port(), free_port()
    log, rotated = tmp_path / "s9.log", tmp_path / "s9-p4runtime-requests.txt.1"
    frame = ipv4_frame("10.9.9.9") + bytes(1000)
    fit = ((1 << 20) - 24) // (16 + len(frame))  # frames of this size a 1 MiB capture holds
    with switch_process("--device-id", "9", "--engine", engine, "-i", f"1@{SW[0]}", "-i", f"2@{SW[1]}",
                        "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--thrift-port", str(side_port),
                        "--log", str(log), "--log-max-mb", "1", "--pcap", str(tmp_path), "--pcap-max-mb", "1",
                        str(PROGRAM)) as proc, socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as tx:
        wait_for(side_port, proc, log)  # listening once PROG is loaded
        tx.bind((PEER[0], 0))
        for _ in range(fit + 300):
            tx.send(frame)
        wait_until(lambda: json.loads(send_command(side_port, "port_stats"))["1"]["rx_packets"] > fit)
        client = RawClient(grpc_port, device_id=9)
        try:
            client.arbitrate(10)
            info = client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE).p4info
            updates = [p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(counter_entry=p4r.CounterEntry(
                counter_id=info.counters[0].preamble.id, index=p4r.Index(index=i),
                data=p4r.CounterData(packet_count=i))))
                for i in range(16)]
            for _ in range(2000):  # each Write is logged (about 2 KB) until the request log has rotated
                client.write(updates)
                if rotated.exists():
                    break
        finally:
            client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    captured = tmp_path / f"{SW[0]}_in.pcap"
    assert captured.stat().st_size <= 1 << 20
    assert len(read_pcap(str(captured))) == fit  # more than fit frames came in
    assert rotated.exists() and (1 << 20) <= rotated.stat().st_size <= (1 << 20) + 8192
    assert (tmp_path / "s9-p4runtime-requests.txt").stat().st_size < 1 << 20


def test_side_channel_listens_on_loopback_only_and_says_so(tmp_path):
    """The side channel has no authentication: bound to 127.0.0.1, not to every address (127.0.0.2,
    another loopback address, would answer a socket bound to 0.0.0.0), and its help says so."""
    assert "listens on 127.0.0.1 only" in " ".join(aggnet("switch", "--help").stdout.split())
    side_port, log = free_port(), tmp_path / "s9.log"
    with switch_process("--log", str(log), "--grpc-server-addr", f"127.0.0.1:{free_port()}",
                        "--thrift-port", str(side_port)) as proc, socket.socket() as s:
        wait_for(side_port, proc, log)
        assert s.connect_ex(("127.0.0.2", side_port)) != 0
