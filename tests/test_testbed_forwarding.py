"""End to end on real Mininet: star4, the embedded switch, entries over P4Runtime (finsy).

(1) ping between all hosts; per-port counters read over P4Runtime equal the packets the
hosts sent and received; (2) a multicast group replicates to exactly its ports;
(4) a rate-limited egress queue, and a host's shaped link, never pass more than the configured
rate (frames counted at the interface with kernel timestamps, so a busy machine cannot fake a burst)
and drop what is offered beyond it. How close the rate comes to the configured one is a figure for
a benchmark, not a test: on a busy machine the sender may not even offer it.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import struct
import threading
from pathlib import Path

import pytest
from procs import wait_until

pytestmark = [pytest.mark.root, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
STAR4 = REPO / "topologies" / "star4.yaml"
PROGRAM = REPO / "tests" / "data" / "testbed" / "ipv4_counters.p4"
MCAST_IP = "10.0.255.1"
MCAST_GROUP, MCAST_PORTS = 1, (2, 3)


def write_p4info(build_dir: str) -> Path:
    from google.protobuf import text_format

    from p4target.frontend import load_program
    from p4target.p4info import build_p4info

    path = Path(build_dir) / "ipv4_counters.p4info.txtpb"
    path.write_text(text_format.MessageToString(build_p4info(load_program(str(PROGRAM)))))
    return path


async def program_switch(address: str, device_id: int, p4info: Path, topo) -> None:
    """Push the pipeline, one /32 route per host, and the multicast group + its route."""
    import finsy as fy

    opts = fy.SwitchOptions(p4info=p4info, p4blob=PROGRAM.read_bytes(), device_id=device_id)
    async with fy.Switch("s1", address, opts) as sw:
        updates = [+fy.P4TableEntry("ipv4_lpm", match=fy.P4TableMatch(dstAddr=f"{h.ip}/32"),
                                    action=fy.P4TableAction("ipv4_forward", dstAddr=h.mac,
                                                            port=topo.port_of("s1", h.name)))
                   for h in topo.hosts.values()]
        updates.append(+fy.P4MulticastGroupEntry(MCAST_GROUP, replicas=[(p, 1) for p in MCAST_PORTS]))
        updates.append(+fy.P4TableEntry("ipv4_lpm", match=fy.P4TableMatch(dstAddr=f"{MCAST_IP}/32"),
                                        action=fy.P4TableAction("multicast", group=MCAST_GROUP)))
        await sw.write(updates)


async def read_counter(address: str, device_id: int, p4info: Path, name: str) -> dict[int, int]:
    import finsy as fy

    opts = fy.SwitchOptions(p4info=p4info, device_id=device_id)
    async with fy.Switch("s1", address, opts) as sw:
        return {c.index: c.data.packet_count async for c in sw.read(fy.P4CounterEntry(name))
                if c.data and c.data.packet_count}


def host_counts(host, intf: str) -> tuple[int, int]:
    out = host.cmd(f"cat /sys/class/net/{intf}/statistics/tx_packets /sys/class/net/{intf}/statistics/rx_packets")
    tx, rx = (int(v) for v in out.split())
    return tx, rx


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root for Mininet")
    from controller.topology import load_topology
    from testbed.network import Testbed

    run_dir = str(tmp_path_factory.mktemp("run"))
    topo = load_topology(str(STAR4))
    with Testbed(topo, "embedded", run_dir, pcap=True) as tb:
        s1 = topo.switches["s1"]
        address = f"127.0.0.1:{s1.grpc_port}"
        p4info = write_p4info(tb.build_dir)
        asyncio.run(program_switch(address, s1.device_id, p4info, topo))
        yield tb, topo, address, s1.device_id, p4info
    assert [line for line in os.popen("ip -o link").read().splitlines() if "-eth" in line] == []


def test_ping_all_pairs_and_port_counters_match(network):
    tb, topo, address, device_id, p4info = network
    hosts = list(topo.hosts.values())
    before = {h.name: host_counts(tb.host(h.name), f"{h.name}-eth0") for h in hosts}
    for a, b in itertools.permutations(hosts, 2):
        out = tb.host(a.name).cmd(f"ping -c1 -W2 {b.ip}")
        assert " 0% packet loss" in out, f"{a.name} -> {b.name}: {out}"
    after = {h.name: host_counts(tb.host(h.name), f"{h.name}-eth0") for h in hosts}
    port_in = asyncio.run(read_counter(address, device_id, p4info, "port_in"))
    port_out = asyncio.run(read_counter(address, device_id, p4info, "port_out"))
    for h in hosts:
        port = topo.port_of("s1", h.name)
        sent = after[h.name][0] - before[h.name][0]
        received = after[h.name][1] - before[h.name][1]
        assert sent == received == 6  # 3 echo requests + 3 replies each way
        assert port_in.get(port, 0) == sent, (h.name, port_in)
        assert port_out.get(port, 0) == received, (h.name, port_out)
    tb.check()


def test_multicast_group_replicates_to_its_ports(network):
    tb, topo, address, device_id, p4info = network
    before = asyncio.run(read_counter(address, device_id, p4info, "port_out"))
    h1 = tb.host("h1")
    h1.cmd(f"ip neigh replace {MCAST_IP} lladdr 01:00:5e:00:ff:01 dev h1-eth0 nud permanent")
    h1.cmd("python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
           f".sendto(b'mcast-probe', ('{MCAST_IP}', 9999))\"")
    from p4target.ports import read_pcap

    def grown_by_both_copies() -> dict[int, int] | None:
        after = asyncio.run(read_counter(address, device_id, p4info, "port_out"))
        grew = {p: after.get(p, 0) - before.get(p, 0) for p in range(1, 5)}
        return grew if sum(grew.values()) >= 2 else None

    assert wait_until(grown_by_both_copies) == {1: 0, 2: 1, 3: 1, 4: 0}

    def seen(port: int) -> bool:
        frames = read_pcap(os.path.join(tb.pcaps_dir, f"s1-eth{port}_out.pcap"))
        return any(f.endswith(b"mcast-probe") for _, f in frames)

    wait_until(lambda: all(seen(p) for p in MCAST_PORTS))  # the switch flushes its pcaps every second
    assert [p for p in range(1, 5) if seen(p)] == list(MCAST_PORTS)


RECEIVER = """
import json, pathlib, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 5001))
s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS: when the kernel got the frame, however late we read it
pathlib.Path(sys.argv[1]).touch()  # bound: the sender may start
n, first, last = 0, None, None
s.recvmsg(2048, socket.CMSG_SPACE(16), socket.MSG_PEEK)  # however long the sender takes to start
s.settimeout(1.0)  # then: the stream has ended after a second without a frame
while True:
    try:
        _, anc, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(16))
    except socket.timeout:
        break
    sec, nsec = struct.unpack("qq", anc[0][2][:16])
    now = sec + nsec / 1e9; first = first or now; last = now; n += 1
print(json.dumps({"n": n, "span": (last - first) if n > 1 else 0}))
"""
SENDER = """
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload = bytes({size}); end = time.monotonic() + {seconds}; t = time.monotonic()
while t < end:
    s.sendto(payload, ("{dst}", 5001)); t += 1.0 / {pps}
    time.sleep(max(0.0, t - time.monotonic()))
"""


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
PACKET_OUTGOING = 4


class KernelCount:
    """UDP frames to port 5001 received on a root-namespace interface, with the kernel's timestamps
    (when the frame arrived, not when a busy process got to read it)."""

    def __init__(self, ifname: str):
        self.stamps: list[float] = []
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
        self._sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self._sock.bind((ifname, 0x0800))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, anc, _, addr = self._sock.recvmsg(2048, socket.CMSG_SPACE(16))
            except TimeoutError:
                continue
            ihl = (data[14] & 0x0F) * 4
            is_udp_5001 = data[23] == 17 and struct.unpack("!H", data[14 + ihl + 2:14 + ihl + 4])[0] == 5001
            if is_udp_5001 and addr[2] != PACKET_OUTGOING:
                sec, nsec = struct.unpack("qq", anc[0][2][:16])
                self.stamps.append(sec + nsec / 1e9)

    def stop(self) -> tuple[int, float]:
        """(frames, seconds from the first to the last)."""
        self._stop.set()
        self._thread.join()
        self._sock.close()
        return len(self.stamps), (self.stamps[-1] - self.stamps[0]) if len(self.stamps) > 1 else 0.0


@pytest.mark.parametrize("verb, value, payload, expect_pps", [
    ("set_queue_rate", 200, 100, 200.0),
    ("set_queue_rate_bps", 1_600_000, 958, 1_600_000 / (1000 * 8)),  # 1000-byte frames
])
def test_rate_limited_port_limits_udp_throughput(network, verb, value, payload, expect_pps):
    from p4target.sidechannel import send_command

    tb, topo, *_ = network
    port = topo.port_of("s1", "h2")
    thrift = tb.side_channel_port("s1")
    send_command(thrift, f"{verb} {value} {port}")
    receiver, sender = Path(tb.run_dir) / "receiver.py", Path(tb.run_dir) / "sender.py"
    receiver.write_text(RECEIVER)
    sender.write_text(SENDER.format(size=payload, seconds=3, dst=topo.hosts["h2"].ip, pps=800))
    ready = Path(tb.run_dir) / "receiver.ready"
    ready.unlink(missing_ok=True)
    try:
        h2, h1 = tb.host("h2"), tb.host("h1")
        h2.sendCmd(f"python3 {receiver} {ready}")
        wait_until(ready.exists)
        h1.cmd(f"python3 {sender}")
        output = h2.waitOutput()
        result = json.loads(output.strip().splitlines()[-1])
    finally:
        send_command(thrift, f"{verb} 0 {port}")
    # The shaper's bucket holds one frame: h2's kernel never sees more than that plus the rate over the span.
    assert 0 < result["n"] <= expect_pps * result["span"] + 2, result
    drops = json.loads(send_command(thrift, f"queue_stats {port}"))[str(port)]["tail_drops"]
    assert drops > 0  # 800 pps offered into the limit: the queue overflowed


def test_host_to_switch_direction_is_shaped_like_the_link(network):
    """A host's own interface carries its link's rate (testbed.network.host_tbf_command): h1 offers
    800 pps of 1000-byte frames for a second into a 1.6 Mbit/s link; no more than 200 a second leave it, and the
    host's queue pushes back on the sending socket instead of dropping (a 16-packet queue_pkts is
    the switch port's depth, not the host's)."""
    import dataclasses

    from testbed.network import FRAME_BYTES, HOST_BURST_FRAMES, host_tbf_command

    tb, topo, *_ = network
    link = dataclasses.replace(topo.link_between("h1", "s1"), bw_mbps=1.6, queue_pkts=16)
    h1, h2 = tb.host("h1"), tb.host("h2")
    assert h1.cmd(f"{host_tbf_command(link, 'h1-eth0')} && echo ok").strip().endswith("ok")
    receiver, sender = Path(tb.run_dir) / "receiver.py", Path(tb.run_dir) / "sender.py"
    receiver.write_text(RECEIVER)
    sender.write_text(SENDER.format(size=958, seconds=1, dst=topo.hosts["h2"].ip, pps=800))
    arrived = KernelCount(f"s1-eth{topo.port_of('s1', 'h1')}")  # what h1's tbf let out
    ready = Path(tb.run_dir) / "receiver.ready"
    ready.unlink(missing_ok=True)
    try:
        h2.sendCmd(f"python3 {receiver} {ready}")
        wait_until(ready.exists)
        h1.cmd(f"python3 {sender}")
        result = json.loads(h2.waitOutput().strip().splitlines()[-1])
        qdisc = h1.cmd("tc -s qdisc show dev h1-eth0")
    finally:
        passed, span = arrived.stop()
        h1.cmd(host_tbf_command(topo.link_between("h1", "s1"), "h1-eth0"))
    # tbf's bucket holds HOST_BURST_FRAMES full frames (three of these 1000-byte ones): never more than
    # that plus 200 a second over the span, and one more for where the span's edges fall
    bucket = HOST_BURST_FRAMES * FRAME_BYTES // 1000
    assert 0 < passed <= 200 * span + bucket + 1, (passed, span, result)
    dropped = int(qdisc.split("dropped", 1)[1].split(",", 1)[0])
    assert "tbf" in qdisc and "rate 1600Kbit" in qdisc and dropped == 0, qdisc  # the sender waited instead
