"""finsy drives a real `aggnet switch` process the way its README and l2_switch example do.

No Mininet: the switch runs with two ports on veth pairs this test creates (h2p1a/h2p1b,
h2p2a/h2p2b) and deletes, and the test plays both hosts on the far ends. finsy pushes the
pipeline (P4Info plus the device config `aggnet p4 compile --device-config` writes), then:
`delete_all`, a digest subscription, a multicast group and a default entry to flood unknown
destinations, learning from digests (entries with idle timeouts), forwarding, counters,
registers, PacketOut and PacketIn, and the idle-timeout notification that unlearns a host.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from procs import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "data" / "runtime" / "l2_learn.p4"
LINKS = {1: ("h2p1a", "h2p1b"), 2: ("h2p2a", "h2p2b")}  # port: (switch end, host end)
MGRP = 0xAB
HOST_A, HOST_B = 0x02000000000A, 0x02000000000B
TEST_ETHERTYPE = 0x88B6  # forwarded by the tables
TO_CONTROLLER = 0x88B5  # punted by the program
IDLE_TIMEOUT_NS = 300_000_000

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="needs root and iproute2 for veth pairs")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def switch(tmp_path):
    """(P4Runtime address, P4Info path, device config path, host sockets by port) of a running switch."""
    p4info, config = tmp_path / "l2_learn.p4info.txtpb", tmp_path / "l2_learn.device.p4"
    subprocess.run([str(ROOT / ".venv" / "bin" / "aggnet"), "p4", "compile", str(PROGRAM), "--p4info", str(p4info),
                    "--device-config", str(config)], check=True, capture_output=True, timeout=120)
    process, hosts = None, {}
    try:
        for switch_end, host_end in LINKS.values():
            ip("link", "add", switch_end, "type", "veth", "peer", "name", host_end)
            for name in (switch_end, host_end):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], capture_output=True)
                ip("link", "set", name, "up")
        grpc_port = free_port()
        argv = [str(ROOT / ".venv" / "bin" / "aggnet"), "switch", "--device-id", "1",
                *[a for port, (end, _) in LINKS.items() for a in ("-i", f"{port}@{end}")],
                "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--thrift-port", str(free_port()),
                "--log", str(tmp_path / "s1.log")]
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_until(lambda: port_open(grpc_port), process, lambda: f"switch exited: {(tmp_path / 's1.log').read_text()[-500:]}")
        for port, (_, host_end) in LINKS.items():
            hosts[port] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
            hosts[port].bind((host_end, 0))
        yield f"127.0.0.1:{grpc_port}", p4info, config, hosts
    finally:
        for sock in hosts.values():
            sock.close()
        if process is not None:
            process.terminate()
            process.wait(10)
        for switch_end, _ in LINKS.values():
            subprocess.run(["ip", "link", "del", switch_end], capture_output=True)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def frame(dst: int, src: int, ethertype: int = TEST_ETHERTYPE, body: bytes = b"finsy test frame") -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + ethertype.to_bytes(2, "big") + body.ljust(46, b".")


def is_test_frame(data: bytes) -> bool:
    return data[12:14] in (TEST_ETHERTYPE.to_bytes(2, "big"), TO_CONTROLLER.to_bytes(2, "big"))


async def next_frame(sock: socket.socket) -> bytes:
    """The next test frame (our ethertypes) to arrive on a host end, however long it takes (the per-test
    timeout ends a wait for one that never comes)."""
    sock.setblocking(False)
    while not is_test_frame(data := await asyncio.get_running_loop().sock_recv(sock, 2048)):
        pass
    return data


def received(sock: socket.socket, seconds: float = 0.3) -> list[bytes]:
    """The test frames that arrive on a host end within `seconds` (to show that none does)."""
    out, end = [], time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(2048)
        except TimeoutError:
            break
        if is_test_frame(data):
            out.append(data)
    return out


def test_finsy_learning_switch(switch):
    import finsy as fy

    address, p4info, config, hosts = switch
    options = fy.SwitchOptions(p4info=p4info, p4blob=config, device_id=1)

    def learn(mac: int, port: int):
        return [fy.P4TableEntry("smac", match=fy.P4TableMatch(srcAddr=mac), action=fy.P4TableAction("NoAction"),
                                idle_timeout_ns=IDLE_TIMEOUT_NS),
                fy.P4TableEntry("dmac", match=fy.P4TableMatch(dstAddr=mac), action=fy.P4TableAction("fwd", eg_port=port))]

    async def main():
        async with fy.Switch("s1", address, options) as sw:
            assert sw.is_primary and sw.p4info.tables["smac"].idle_timeout_behavior.name == "NOTIFY_CONTROL"
            await sw.insert([fy.P4MulticastGroupEntry(9, replicas=[1]), *learn(HOST_B, 2)])
            await sw.delete_all()
            assert [e async for e in sw.read(fy.P4TableEntry())] == []
            assert [e async for e in sw.read(fy.P4MulticastGroupEntry())] == []

            # finsy subscribes when an iterator first waits: start waiting before anything can arrive
            next_digest = asyncio.create_task(anext(sw.read_digests("digest_t")))
            next_timeout = asyncio.create_task(anext(sw.read_idle_timeouts()))
            next_packet = asyncio.create_task(anext(sw.read_packets()))
            await asyncio.sleep(0)
            await sw.write([
                +fy.P4DigestEntry("digest_t", max_list_size=1, ack_timeout_ns=int(1e9)),
                +fy.P4MulticastGroupEntry(MGRP, replicas=[1, 2]),
                ~fy.P4TableEntry("dmac", action=fy.P4TableAction("broadcast", mgrp=MGRP), is_default_action=True),
            ])

            # A (port 1) to unknown B: flooded (not back to port 1) and A is reported in a digest
            a_to_b = frame(HOST_B, HOST_A)
            hosts[1].send(a_to_b)
            assert await next_frame(hosts[2]) == a_to_b
            assert await asyncio.to_thread(received, hosts[1]) == []
            digest = await next_digest
            assert [(d["srcAddr"], d["ingressPort"]) for d in digest] == [(HOST_A, 1)]
            await sw.write([*(+e for e in learn(HOST_A, 1)), digest.ack()])

            # B (port 2) to A, now known: out of port 1 only
            b_to_a = frame(HOST_A, HOST_B)
            hosts[2].send(b_to_a)
            assert await next_frame(hosts[1]) == b_to_a
            assert await asyncio.to_thread(received, hosts[2]) == []

            ingress = {c.index: c.data.packet_count async for c in sw.read(fy.P4CounterEntry("igPortsCounts"))}
            egress = {c.index: c.data.packet_count async for c in sw.read(fy.P4CounterEntry("egPortsCounts"))}
            assert (ingress[1], ingress[2], egress[1], egress[2]) == (1, 1, 1, 1)
            [last] = [r async for r in sw.read(fy.P4RegisterEntry("lastIngressPort", index=0))]
            assert last.data == 2
            await sw.write([fy.P4RegisterEntry("lastIngressPort", index=0, data=7)])
            [last] = [r async for r in sw.read(fy.P4RegisterEntry("lastIngressPort", index=0))]
            assert last.data == 7

            # PacketOut leaves on the port it names; a punted frame comes back as a PacketIn
            sent = frame(HOST_B, HOST_A, body=b"packet out")
            await sw.write([fy.P4PacketOut(sent, egress_port=2, _pad=0)])
            assert await next_frame(hosts[2]) == sent
            punted = frame(HOST_B, HOST_A, TO_CONTROLLER, b"to the controller")
            hosts[1].send(punted)
            packet_in = await next_packet
            assert packet_in.payload == punted and packet_in["ingress_port"] == 1

            # A sends nothing more: its smac entry ages out and is unlearned, as in finsy's example
            notification = await next_timeout
            assert [entry["srcAddr"] for entry in notification] == [HOST_A]
            await sw.write([-fy.P4TableEntry("smac", match=fy.P4TableMatch(srcAddr=HOST_A)),
                            -fy.P4TableEntry("dmac", match=fy.P4TableMatch(dstAddr=HOST_A))])
            assert [e.match["dstAddr"] async for e in sw.read(fy.P4TableEntry("dmac"))] == []

    asyncio.run(main())
