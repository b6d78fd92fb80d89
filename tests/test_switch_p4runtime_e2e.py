"""P4Runtime against a real `aggnet switch` process in a Mininet network (root).

Issue #3 proofs, on h1 - s1 - h2 with s1 started WITHOUT a program:
(5) before any pipeline, writes and reads are FAILED_PRECONDITION; then finsy pushes
    tests/data/runtime/ipv4_cpu.p4 and bad writes get their documented codes
    (INVALID_ARGUMENT for unknown ids / too wide values / bad prefixes, ALREADY_EXISTS,
    NOT_FOUND, PERMISSION_DENIED from a backup) while the switch's state reads back
    unchanged;
(3) a PacketOut to a host port arrives on that host (raw capture in its namespace) and
    frames the hosts send that the program punts to the CPU arrive as PacketIns whose
    ingress_port metadata is the port they came in on.
finsy is the client where it can express the request; the bare generated stub
(RawClient) sends what finsy refuses to encode (unknown ids, over-wide values).
The tests run in file order: the first one needs the switch still without a pipeline.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]

PROGRAM = Path(__file__).resolve().parent / "data" / "runtime" / "ipv4_cpu.p4"
TOPOLOGY = {"name": "p4rt-e2e", "hosts": [{"name": "h1"}, {"name": "h2"}],
            "switches": [{"name": "s1", "device_id": 1}],
            "links": [{"a": "h1", "b": "s1"}, {"a": "h2", "b": "s1"}]}
CPU_PORT = 255
PROBE_ETHERTYPE = 0x88B5  # IEEE local experimental: nothing else on the hosts sends it
CAPTURE = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind((sys.argv[1], 0))
s.settimeout(0.2)
marker, end = bytes.fromhex(sys.argv[2]), time.monotonic() + float(sys.argv[3])
print("ready", flush=True)
while time.monotonic() < end:
    try:
        frame, addr = s.recvfrom(65535)
    except socket.timeout:
        continue
    if addr[2] != socket.PACKET_OUTGOING and marker in frame:
        print("got", frame.hex(), flush=True)
        break
else:
    print("timeout", flush=True)
"""
SEND = ("import socket, sys; s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); "
        "s.bind((sys.argv[1], 0)); s.send(bytes.fromhex(sys.argv[2]))")


def run(coro):
    return asyncio.run(coro)  # no time limit of its own: the per-test timeout is the hang guard


class Net:
    """What the tests need of the running network."""

    def __init__(self, tb, topo, p4info: Path):
        self.tb, self.topo, self.p4info = tb, topo, p4info
        self.s1 = topo.switches["s1"]
        self.address = f"127.0.0.1:{self.s1.grpc_port}"

    def options(self, **kw):
        from finsy import SwitchOptions
        return SwitchOptions(p4info=self.p4info, p4blob=PROGRAM, device_id=self.s1.device_id, **kw)

    def raw(self):
        from p4rt_raw import RawClient  # the shared bare-stub client (device 1)
        return RawClient(self.s1.grpc_port)


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root for Mininet")
    from google.protobuf import text_format

    from controller.topology import parse_topology
    from p4target.frontend import load_program
    from p4target.p4info import build_p4info
    from testbed.network import Testbed

    run_dir = tmp_path_factory.mktemp("run")
    topo = parse_topology(TOPOLOGY, "p4rt-e2e")
    p4info = run_dir / "ipv4_cpu.p4info.txtpb"
    p4info.write_text(text_format.MessageToString(build_p4info(load_program(str(PROGRAM)))))
    with Testbed(topo, "embedded", str(run_dir)) as tb:  # no program: s1 waits for a pipeline
        ours = switch_links()
        process = tb.switch("s1").process
        yield Net(tb, topo, p4info)
        tb.check()  # s1 survived every test
    # Torn down: our switch process and our interfaces (by ifindex: another network may
    # reuse the names as soon as ours releases the testbed lock) are gone.
    assert len(ours) == 2 and process.poll() is not None
    assert not set(ours) & set(switch_links())


def switch_links() -> list[str]:
    """ifindex of every s1-eth* interface in the root namespace."""
    return [line.split(":")[0] for line in os.popen("ip -o link").read().splitlines() if ": s1-eth" in line]


@pytest.fixture(scope="module")
def pipeline(net):
    """The program pushed by finsy (SetForwardingPipelineConfig) into the running switch."""
    from finsy import Switch

    async def push():
        async with Switch("s1", net.address, net.options()):
            pass
    run(push())
    return net


# ------------------------------------------------------------------ (5) documented status codes


def test_before_a_pipeline_writes_and_reads_are_failed_precondition(net):
    from finsy import P4TableAction, P4TableEntry, P4TableMatch, Switch, SwitchOptions
    from finsy.p4client import P4ClientError
    from finsy.proto import p4r

    async def finsy_write():
        # Without a p4blob finsy only reads the (absent) pipeline and carries on.
        async with Switch("s1", net.address, SwitchOptions(p4info=net.p4info, device_id=1)) as sw:
            with pytest.raises(P4ClientError) as err:
                await sw.insert([P4TableEntry("MyIngress.ipv4_lpm", match=P4TableMatch({"hdr.ipv4.dstAddr": "10.0.0.0/8"}),
                                              action=P4TableAction("MyIngress.drop"))])
            assert err.value.code.name == "FAILED_PRECONDITION" and err.value.is_pipeline_missing
    run(finsy_write())
    raw = net.raw()
    try:
        assert raw.arbitrate(10).status.code == 0
        update = p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=p4r.TableEntry(table_id=1)))
        for call in (lambda: raw.write([update]), lambda: raw.read(p4r.Entity(table_entry=p4r.TableEntry()))):
            with pytest.raises(grpc.RpcError) as err:
                call()
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        raw.close()


def _good_entries():
    from finsy import P4MulticastGroupEntry, P4TableAction, P4TableEntry, P4TableMatch

    route = P4TableEntry("MyIngress.ipv4_lpm", match=P4TableMatch({"hdr.ipv4.dstAddr": "10.0.9.0/24"}),
                         action=P4TableAction("MyIngress.ipv4_forward", dstAddr=0x02AABBCCDDEE, port=2))
    acl = P4TableEntry("MyIngress.acl", priority=7, match=P4TableMatch({"hdr.ethernet.etherType": (0x0806, 0xFFFF)}),
                       action=P4TableAction("MyIngress.drop"))
    group = P4MulticastGroupEntry(3, replicas=[(1, 1), (2, 1)])
    return route, acl, group


def _snapshot(raw) -> list:
    """Every table entry (with counters), the default entries and the multicast groups."""
    from finsy.proto import p4r

    entities = [p4r.Entity(table_entry=p4r.TableEntry(counter_data=p4r.CounterData())),
                p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    multicast_group_entry=p4r.MulticastGroupEntry()))]
    out = raw.read(*entities)
    for table_id in {e.table_entry.table_id for e in out if e.HasField("table_entry")}:
        out += raw.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id, is_default_action=True)))
    return [e.SerializeToString(deterministic=True) for e in out]


def test_bad_writes_get_their_status_codes_and_leave_state_unchanged(pipeline):
    from finsy import P4Schema, P4TableAction, P4TableEntry, P4TableMatch, Switch
    from finsy.p4client import P4ClientError
    from finsy.proto import p4r
    from test_runtime_server import per_update_codes

    net = pipeline
    schema = P4Schema(net.p4info)
    route, acl, group = _good_entries()
    absent = P4TableEntry("MyIngress.ipv4_lpm", match=P4TableMatch({"hdr.ipv4.dstAddr": "10.0.77.0/24"}),
                          action=P4TableAction("MyIngress.drop"))
    G = grpc.StatusCode

    async def with_finsy():
        async with Switch("s1", net.address, net.options(initial_election_id=10)) as sw:
            await sw.insert([route, acl, group])
            before = _snapshot(raw)
            with pytest.raises(P4ClientError) as err:
                await sw.insert([route])
            assert [e.canonical_code.name for e in err.value.details.values()] == ["ALREADY_EXISTS"]
            with pytest.raises(P4ClientError) as err:
                await sw.modify([absent])
            assert err.value.is_not_found_only and len(err.value.details) == 1
            with pytest.raises(P4ClientError) as err:
                await sw.delete([absent])
            assert err.value.is_not_found_only and len(err.value.details) == 1
            assert [e async for e in sw.read(absent)] == []  # a read filters: absent -> empty
            async with Switch("s1b", net.address, net.options(initial_election_id=5)) as backup:
                assert sw.is_primary and not backup.is_primary
                with pytest.raises(P4ClientError) as err:
                    await backup.delete([route])
                assert err.value.code.name == "PERMISSION_DENIED"
                backup_raw = net.raw()
                try:
                    backup_raw.arbitrate(4)
                    with pytest.raises(grpc.RpcError) as denied:
                        backup_raw.write([p4r.Update(type=p4r.Update.DELETE, entity=route.encode(schema))],
                                         election_id=4)
                    assert denied.value.code() == G.PERMISSION_DENIED
                finally:
                    backup_raw.close()
            assert _snapshot(raw) == before
            return before

    raw = net.raw()
    try:
        before = run(with_finsy())
        # finsy has disconnected; the raw client becomes primary for what finsy cannot encode.
        assert raw.arbitrate(20).status.code == 0
        good = route.encode(schema)

        def variant(edit):
            entity = p4r.Entity()
            entity.CopyFrom(good)
            entity.table_entry.match[0].lpm.value = b"\x0a\x00\x0a\x00"  # a key not installed yet
            edit(entity.table_entry)
            return p4r.Update(type=p4r.Update.INSERT, entity=entity)

        bad = {
            "unknown table id": variant(lambda te: setattr(te, "table_id", 0x02FFFFFF)),
            "unknown match field id": variant(lambda te: setattr(te.match[0], "field_id", 9)),
            "unknown action id": variant(lambda te: setattr(te.action.action, "action_id", 0x01FFFFFF)),
            "key wider than 32 bits": variant(lambda te: setattr(te.match[0].lpm, "value", b"\x01\x0a\x00\x0a\x00")),
            "param wider than 9 bits": variant(lambda te: setattr(te.action.action.params[1], "value", b"\x02\x00")),
            "prefix length 33": variant(lambda te: setattr(te.match[0].lpm, "prefix_len", 33)),
            "bits beyond the prefix": variant(lambda te: setattr(te.match[0].lpm, "value", b"\x0a\x00\x0a\x01")),
        }
        for what, update in bad.items():
            with pytest.raises(grpc.RpcError) as err:
                raw.write([update], election_id=20)
            assert err.value.code() == G.UNKNOWN, what
            assert per_update_codes(err.value) == [G.INVALID_ARGUMENT.value[0]], what
        # One batch mixing them with a duplicate: one status per update, in order.
        batch = list(bad.values()) + [p4r.Update(type=p4r.Update.INSERT, entity=good)]
        with pytest.raises(grpc.RpcError) as err:
            raw.write(batch, election_id=20)
        assert per_update_codes(err.value) == [G.INVALID_ARGUMENT.value[0]] * len(bad) + [G.ALREADY_EXISTS.value[0]]
        assert _snapshot(raw) == before
    finally:
        raw.close()
    net.tb.check()


# ------------------------------------------------------------------ (3) PacketOut / PacketIn


def _probe_frame(dst: str, src: str, marker: bytes) -> bytes:
    """An Ethernet frame of the probe EtherType carrying `marker`, padded to 60 bytes."""
    frame = bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) + \
        PROBE_ETHERTYPE.to_bytes(2, "big") + marker
    return frame + bytes(max(0, 60 - len(frame)))


def _start_capture(host, script: Path, intf: str, marker: bytes, seconds: float = 30.0) -> None:
    host.sendCmd(f"python3 {script} {intf} {marker.hex()} {seconds}")
    seen = ""
    for _ in range(100):
        seen += host.monitor(timeoutms=100)
        if "ready" in seen:
            return
    raise AssertionError(f"capture on {host.name} did not start: {seen!r}")


def test_packet_out_to_a_host_port_arrives_at_the_host(pipeline):
    from finsy import P4PacketOut, Switch

    net = pipeline
    h2 = net.topo.hosts["h2"]
    script = Path(net.tb.run_dir) / "capture.py"
    script.write_text(CAPTURE)
    marker = b"packet-out-to-h2"
    frame = _probe_frame(h2.mac, "02:00:00:00:00:aa", marker)
    host = net.tb.host("h2")
    _start_capture(host, script, "h2-eth0", marker)

    async def send() -> str:
        async with Switch("s1", net.address, net.options()) as sw:
            await sw.write([P4PacketOut(frame, egress_port=net.topo.port_of("s1", "h2"), _pad=0)])
            # Keep the stream open until the capture ends: closing it right after the write
            # cancels the RPC, and the server may drop a PacketOut it has not read yet.
            return await asyncio.to_thread(host.waitOutput)
    output = asyncio.run(asyncio.wait_for(send(), 60))  # the capture itself ends after 30 s
    lines = [line for line in output.splitlines() if line.startswith(("got", "timeout"))]
    assert lines == [f"got {frame.hex()}"], output  # exactly the payload: packet_out header consumed


def test_frames_punted_to_cpu_arrive_as_packet_ins_with_their_ingress_port(pipeline):
    from finsy import P4TableAction, P4TableEntry, P4TableMatch, Switch

    net = pipeline
    punt = P4TableEntry("MyIngress.acl", priority=20,
                        match=P4TableMatch({"hdr.ethernet.etherType": (PROBE_ETHERTYPE, 0xFFFF)}),
                        action=P4TableAction("MyIngress.send_to_cpu"))
    frames = {name: _probe_frame("ff:ff:ff:ff:ff:ff", net.topo.hosts[name].mac, f"punt-from-{name}".encode())
              for name in ("h1", "h2")}

    async def main():
        async with Switch("s1", net.address, net.options()) as sw:
            await sw.insert([punt])
            packets = sw.read_packets()
            got = {}
            for name, frame in frames.items():
                net.tb.host(name).cmd(f"python3 -c \"{SEND}\" {name}-eth0 {frame.hex()}")
                while name not in got:
                    packet = await anext(packets)
                    if frame[14:] in packet.payload:
                        got[name] = packet
            await sw.delete([punt])
            return got

    got = run(main())
    for name, frame in frames.items():
        assert got[name].payload == frame, name  # packet_in header parsed off, frame intact
        assert got[name]["ingress_port"] == net.topo.port_of("s1", name), name
