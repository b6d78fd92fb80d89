"""The P4Runtime server end to end: a real gRPC server on 127.0.0.1, driven by finsy
(an independent P4Runtime client) and, where finsy hides the wire details (per-update
error lists, atomicity, pipeline actions), by the raw generated gRPC stub.
"""
import asyncio
from pathlib import Path

import grpc
import pytest
from finsy import (
    P4CloneSessionEntry,
    P4CounterEntry,
    P4DigestEntry,
    P4DirectCounterEntry,
    P4MulticastGroupEntry,
    P4PacketOut,
    P4RegisterEntry,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
    Switch,
    SwitchOptions,
)
from finsy.p4client import P4ClientError
from finsy.proto import p4i, p4r
from google.protobuf import text_format
from p4rt_raw import RawClient, per_update_codes
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target.frontend import load_program
from p4target.native.pipeline import ENGINES
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer
from p4target.runtime.errors import RuntimeStatus
from p4target.runtime.stream import Session

PROGRAM = Path(__file__).parent / "data" / "runtime" / "ipv4_cpu.p4"
CPU_PORT = 255


@pytest.fixture(scope="module")
def p4info_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("p4info") / "ipv4_cpu.p4info.txtpb"
    path.write_text(text_format.MessageToString(build_p4info(load_program(str(PROGRAM)))))
    return path


def started(tmp_path: Path, engine: str) -> RuntimeServer:
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", cpu_port=CPU_PORT,
                        log_path=str(tmp_path / "s1-p4runtime-requests.txt"), engine=engine)
    srv.port = srv.start()
    return srv


@pytest.fixture(params=ENGINES)
def server(tmp_path, request):
    srv = started(tmp_path, request.param)
    yield srv
    srv.stop()


@pytest.fixture
def unloaded(tmp_path):
    """A server before any pipeline is set: no engine takes part yet (once, not once per engine)."""
    srv = started(tmp_path, "python")
    yield srv
    srv.stop()


def options(p4info_path: Path, **kw) -> SwitchOptions:
    return SwitchOptions(p4info=p4info_path, p4blob=PROGRAM, device_id=1, **kw)


def run(coro):
    return asyncio.run(coro)  # no time limit of its own: the per-test timeout is the hang guard


def ipv4_packet(dst: str = "10.0.1.5") -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") /
                 IP(src="192.168.1.7", dst=dst, ttl=64) / UDP(sport=1234, dport=5678) / b"hello")


def config_for(p4info_path: Path, cookie: int = 7) -> p4r.ForwardingPipelineConfig:
    return p4r.ForwardingPipelineConfig(p4info=text_format.Parse(p4info_path.read_text(), p4i.P4Info()),
                                        p4_device_config=PROGRAM.read_bytes(), cookie=p4r.ForwardingPipelineConfig.Cookie(cookie=cookie))


LPM_ENTRY = P4TableEntry("MyIngress.ipv4_lpm", match=P4TableMatch({"hdr.ipv4.dstAddr": "10.0.1.0/24"}),
                         action=P4TableAction("MyIngress.ipv4_forward", dstAddr=0x0A0B0C0D0E0F, port=2))


# ---------------------------------------------------------------------------- pipeline config


def test_finsy_sets_pipeline_and_get_returns_each_response_type(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            assert sw.is_primary
            assert sw.p4runtime_version.major == 1
    run(main())
    assert server.pipeline is not None
    raw = RawClient(server.port)
    RT = p4r.GetForwardingPipelineConfigRequest
    sent = text_format.Parse(p4info_path.read_text(), p4i.P4Info())
    full = raw.get_pipeline(RT.ALL)
    assert full.p4_device_config == PROGRAM.read_bytes() and full.p4info == sent and full.HasField("cookie")
    cookie_only = raw.get_pipeline(RT.COOKIE_ONLY)
    assert cookie_only.cookie == full.cookie and not cookie_only.HasField("p4info") and not cookie_only.p4_device_config
    assert raw.get_pipeline(RT.P4INFO_AND_COOKIE).p4info == sent
    dev = raw.get_pipeline(RT.DEVICE_CONFIG_AND_COOKIE)
    assert dev.p4_device_config == PROGRAM.read_bytes() and not dev.HasField("p4info")
    raw.close()


def test_pipeline_actions_verify_save_commit_reconcile(server, p4info_path):
    raw = RawClient(server.port)
    A = p4r.SetForwardingPipelineConfigRequest
    assert raw.arbitrate(10).status.code == 0
    with pytest.raises(grpc.RpcError) as err:
        raw.get_pipeline(p4r.GetForwardingPipelineConfigRequest.ALL)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    raw.set_pipeline(A.VERIFY, config_for(p4info_path))
    assert server.pipeline is None  # VERIFY changes nothing
    with pytest.raises(grpc.RpcError) as err:
        raw.set_pipeline(A.COMMIT, p4r.ForwardingPipelineConfig())
    assert err.value.code() == grpc.StatusCode.NOT_FOUND  # spec: no saved config
    with pytest.raises(grpc.RpcError) as err:
        raw.set_pipeline(A.COMMIT, config_for(p4info_path))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # spec: COMMIT carries no config
    raw.set_pipeline(A.VERIFY_AND_SAVE, config_for(p4info_path, cookie=1))
    assert server.pipeline is None
    raw.set_pipeline(A.COMMIT, p4r.ForwardingPipelineConfig())
    first = server.pipeline
    assert first is not None
    assert raw.get_pipeline(p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY).cookie.cookie == 1
    update = p4r.Update(type=p4r.Update.INSERT, entity=LPM_ENTRY.encode(_schema(p4info_path)))
    raw.write([update])
    raw.set_pipeline(A.RECONCILE_AND_COMMIT, config_for(p4info_path, cookie=2))
    assert server.pipeline is not first
    assert len(raw.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1  # state carried over
    raw.set_pipeline(A.VERIFY_AND_COMMIT, config_for(p4info_path, cookie=3))
    assert raw.read(p4r.Entity(table_entry=p4r.TableEntry())) == []  # a plain commit starts empty
    raw.close()


def test_mismatched_p4info_or_bad_source_is_invalid_argument(server, p4info_path):
    raw = RawClient(server.port)
    raw.arbitrate(10)
    A = p4r.SetForwardingPipelineConfigRequest
    config = config_for(p4info_path)
    config.p4info.tables[0].preamble.id += 1
    with pytest.raises(grpc.RpcError) as err:
        raw.set_pipeline(A.VERIFY_AND_COMMIT, config)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "P4Info does not match" in err.value.details() and config.p4info.tables[0].preamble.name in err.value.details()
    config = config_for(p4info_path)
    config.p4_device_config = b"control oops {"
    with pytest.raises(grpc.RpcError) as err:
        raw.set_pipeline(A.VERIFY_AND_COMMIT, config)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "device_config.p4:" in err.value.details()
    assert server.pipeline is None
    raw.close()


def _schema(p4info_path: Path):
    from finsy import P4Schema
    return P4Schema(p4info_path)


# ---------------------------------------------------------------------------- tables


def test_table_entries_insert_read_modify_delete_and_wildcards(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            await sw.insert([LPM_ENTRY])
            await sw.insert([P4TableEntry("MyIngress.l2_exact",
                                          match=P4TableMatch({"hdr.ethernet.dstAddr": 0x000000000001}),
                                          action=P4TableAction("MyIngress.set_egress", port=3))])
            [read] = [e async for e in sw.read(P4TableEntry("MyIngress.ipv4_lpm"))]
            assert read.match["dstAddr"] == (0x0A000100, 24)  # finsy decodes to aliases
            assert read.action.args == {"dstAddr": 0x0A0B0C0D0E0F, "port": 2}
            everything = [e async for e in sw.read(P4TableEntry())]
            assert sorted(e.table_id for e in everything) == ["ipv4_lpm", "l2_exact"]
            await sw.modify([P4TableEntry("MyIngress.ipv4_lpm", match=LPM_ENTRY.match,
                                          action=P4TableAction("MyIngress.set_mcast", grp=4))])
            [read] = [e async for e in sw.read(P4TableEntry("MyIngress.ipv4_lpm"))]
            assert read.action.name == "set_mcast" and read.action.args == {"grp": 4}
            await sw.delete([LPM_ENTRY])
            assert [e async for e in sw.read(P4TableEntry("MyIngress.ipv4_lpm"))] == []
    run(main())
    entry = server.pipeline.state.table("MyIngress.l2_exact").lookup((1,))
    assert entry.params == {"port": 3}


def test_default_action_modify_read_and_forwarding(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            [default] = [e async for e in sw.read(P4TableEntry("MyIngress.ipv4_lpm", is_default_action=True))]
            assert default.action.name == "drop"
            await sw.modify([P4TableEntry("MyIngress.ipv4_lpm", is_default_action=True,
                                          action=P4TableAction("MyIngress.ipv4_forward", dstAddr=0xAA, port=7))])
            [default] = [e async for e in sw.read(P4TableEntry("MyIngress.ipv4_lpm", is_default_action=True))]
            assert default.action.args == {"dstAddr": 0xAA, "port": 7}
    run(main())
    [(port, data)] = server.pipeline.process(1, ipv4_packet())
    assert port == 7 and Ether(data)[IP].ttl == 63


# ---------------------------------------------------------------------------- counters, registers, PRE


def test_counters_direct_counters_and_registers(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            acl = P4TableEntry("MyIngress.acl", priority=5,
                               match=P4TableMatch({"hdr.ethernet.etherType": (0x0800, 0xFFFF)}),
                               action=P4TableAction("NoAction"))
            await sw.insert([acl])
            for _ in range(3):
                server.pipeline.process(4, ipv4_packet())
            cells = [e async for e in sw.read(P4CounterEntry("MyIngress.port_counter"))]
            assert len(cells) == 512  # index unset: every cell
            by_index = {c.index: c.data for c in cells}
            assert by_index[4].packet_count == 3 and by_index[4].byte_count == 3 * len(ipv4_packet())
            assert by_index[5].packet_count == 0
            [one] = [e async for e in sw.read(P4CounterEntry("MyIngress.port_counter", index=4))]
            assert one.data.packet_count == 3
            [direct] = [e async for e in sw.read(P4DirectCounterEntry("MyIngress.acl_counter"))]
            assert direct.data.packet_count == 3
            await sw.write([P4DirectCounterEntry(table_entry=acl, data=None)])  # data unset: cells set to 0
            [direct] = [e async for e in sw.read(P4DirectCounterEntry("MyIngress.acl_counter"))]
            assert direct.packet_count == 0
            [reg] = [e async for e in sw.read(P4RegisterEntry("MyIngress.last_src", index=0))]
            assert reg.data == 0xC0A80107  # 192.168.1.7, written by the pipeline
            await sw.write([P4RegisterEntry("MyIngress.last_src", index=3, data=0xDEADBEEF)])
            regs = [e async for e in sw.read(P4RegisterEntry("MyIngress.last_src"))]
            assert [r.data for r in regs][:4] == [0xC0A80107, 0, 0, 0xDEADBEEF] and len(regs) == 16
    run(main())
    assert server.pipeline.state.register_read("MyIngress.last_src", 3) == 0xDEADBEEF


def test_multicast_group_replicates(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            await sw.insert([P4MulticastGroupEntry(1, replicas=[(1, 1), (2, 1), (3, 1)]),
                             P4TableEntry("MyIngress.ipv4_lpm", match=P4TableMatch({"hdr.ipv4.dstAddr": "10.0.9.0/24"}),
                                          action=P4TableAction("MyIngress.set_mcast", grp=1))])
            [group] = [e async for e in sw.read(P4MulticastGroupEntry())]
            assert [(r.port, r.instance) for r in group.replicas] == [(1, 1), (2, 1), (3, 1)]
            await sw.modify([P4MulticastGroupEntry(1, replicas=[(2, 1), (3, 1)])])
    run(main())
    outputs = server.pipeline.process(1, ipv4_packet("10.0.9.1"))
    assert sorted(port for port, _ in outputs) == [2, 3]


# ---------------------------------------------------------------------------- arbitration and errors


def test_backup_client_gets_permission_denied(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path, initial_election_id=10)) as primary:
            async with Switch("s1b", f"127.0.0.1:{server.port}", options(p4info_path, initial_election_id=5)) as backup:
                assert primary.is_primary and not backup.is_primary
                assert backup.primary_id == 10
                with pytest.raises(P4ClientError) as err:
                    await backup.insert([LPM_ENTRY])
                assert err.value.code.name == "PERMISSION_DENIED"
                assert [e async for e in backup.read(P4TableEntry())] == []  # backups may read
                await primary.insert([LPM_ENTRY])
                assert len([e async for e in backup.read(P4TableEntry())]) == 1
    run(main())


def test_duplicate_election_id_and_wrong_device_end_the_stream(unloaded):
    first, second, third = RawClient(unloaded.port), RawClient(unloaded.port), RawClient(unloaded.port)
    assert first.arbitrate(10).status.code == 0
    with pytest.raises(grpc.RpcError) as err:
        second.arbitrate(10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "already in use" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        third.arbitrate(10, device_id=99)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    for c in (first, second, third):
        c.close()


def test_a_stream_that_ends_frees_its_election_id_at_once():
    """The tutorials' PTF tests end the stream in every tearDown and claim the same election id in the next
    setUp straight away. The id is free once the client's side has ended, before our side is wound down
    (our stream generator may still be sending): the next stream becomes primary instead of "in use"."""
    server = RuntimeServer(device_id=1, address="127.0.0.1:0")
    hello = p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
        device_id=1, election_id=p4r.Uint128(low=1)))
    ended = Session(1)

    async def hello_then_half_close():
        yield hello

    asyncio.run(server._read_stream(hello_then_half_close(), ended))
    again = Session(1)
    server.arbitration.update(again, "", 1)
    assert server.arbitration.is_primary(again)
    server.stop()


def test_write_before_pipeline_is_failed_precondition(unloaded, p4info_path):
    async def main():
        # No p4blob: finsy only reads the (absent) pipeline and carries on.
        async with Switch("s1", f"127.0.0.1:{unloaded.port}", SwitchOptions(p4info=p4info_path, device_id=1)) as sw:
            with pytest.raises(P4ClientError) as err:
                await sw.insert([LPM_ENTRY])
            assert err.value.code.name == "FAILED_PRECONDITION"
            assert err.value.is_pipeline_missing
    run(main())


def test_batch_errors_report_per_update_status_and_keep_state(server, p4info_path):
    schema = _schema(p4info_path)
    run(_set_pipeline_with_finsy(server, p4info_path))
    raw = RawClient(server.port)
    raw.arbitrate(20)
    good = LPM_ENTRY.encode(schema)
    other = P4TableEntry("MyIngress.ipv4_lpm", match=P4TableMatch({"hdr.ipv4.dstAddr": "10.0.2.0/24"}),
                         action=P4TableAction("MyIngress.drop")).encode(schema)
    too_wide = p4r.Entity()
    too_wide.CopyFrom(other)
    too_wide.table_entry.match[0].lpm.value = b"\x01" + too_wide.table_entry.match[0].lpm.value
    bad_prefix = p4r.Entity()
    bad_prefix.CopyFrom(other)
    bad_prefix.table_entry.match[0].lpm.prefix_len = 40
    acl_no_priority = P4TableEntry("MyIngress.acl", match=P4TableMatch({"hdr.ethernet.etherType": (0x0800, 0xFFFF)}),
                                   action=P4TableAction("MyIngress.drop")).encode(schema)
    unknown_table = p4r.Entity(table_entry=p4r.TableEntry(table_id=0x02000001))
    raw.write([p4r.Update(type=p4r.Update.INSERT, entity=good)], election_id=20)
    before = raw.read(p4r.Entity(table_entry=p4r.TableEntry()))

    INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
    batch = [p4r.Update(type=INSERT, entity=good), p4r.Update(type=INSERT, entity=too_wide),
             p4r.Update(type=INSERT, entity=bad_prefix), p4r.Update(type=INSERT, entity=acl_no_priority),
             p4r.Update(type=INSERT, entity=unknown_table), p4r.Update(type=MODIFY, entity=other),
             p4r.Update(type=DELETE, entity=other)]
    with pytest.raises(grpc.RpcError) as err:
        raw.write(batch, election_id=20)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    G = grpc.StatusCode
    assert per_update_codes(err.value) == [G.ALREADY_EXISTS.value[0]] + [G.INVALID_ARGUMENT.value[0]] * 4 + \
        [G.NOT_FOUND.value[0]] * 2
    assert raw.read(p4r.Entity(table_entry=p4r.TableEntry())) == before

    # ROLLBACK_ON_ERROR: the good insert is undone because a later update fails.
    rollback = [p4r.Update(type=INSERT, entity=other), p4r.Update(type=DELETE, entity=good),
                p4r.Update(type=INSERT, entity=too_wide)]
    with pytest.raises(grpc.RpcError) as err:
        raw.write(rollback, election_id=20, atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR)
    assert per_update_codes(err.value) == [G.ABORTED.value[0], G.ABORTED.value[0], G.INVALID_ARGUMENT.value[0]]
    assert raw.read(p4r.Entity(table_entry=p4r.TableEntry())) == before
    with pytest.raises(grpc.RpcError) as err:  # DATAPLANE_ATOMIC: the same, and packets never see half of it
        raw.write(rollback, election_id=20, atomicity=p4r.WriteRequest.DATAPLANE_ATOMIC)
    assert per_update_codes(err.value) == [G.ABORTED.value[0], G.ABORTED.value[0], G.INVALID_ARGUMENT.value[0]]
    assert raw.read(p4r.Entity(table_entry=p4r.TableEntry())) == before
    # CONTINUE_ON_ERROR (default): the good updates stay applied; OK ones are reported as OK.
    with pytest.raises(grpc.RpcError) as err:
        raw.write(rollback, election_id=20)
    assert per_update_codes(err.value) == [0, 0, G.INVALID_ARGUMENT.value[0]]
    [left] = raw.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert left.table_entry.match[0].lpm.value == b"\x0a\x00\x02\x00"
    raw.close()


async def _set_pipeline_with_finsy(server, p4info_path):
    async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)):
        pass


# ---------------------------------------------------------------------------- packet I/O and digests


def test_packet_out_through_pipeline_comes_back_as_packet_in(server, p4info_path):
    payload = ipv4_packet()

    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            await sw.insert([P4TableEntry("MyIngress.acl", priority=10,
                                          match=P4TableMatch({"hdr.ethernet.etherType": (0x0800, 0xFFFF),
                                                              "hdr.ipv4.protocol": 17}),
                                          action=P4TableAction("MyIngress.send_to_cpu"))])
            packets = sw.read_packets()
            await sw.write([P4PacketOut(payload, egress_port=0, _pad=0)])  # 0: through the tables
            through_tables = await anext(packets)
            await sw.write([P4PacketOut(b"\x01\x02\x03", egress_port=CPU_PORT, _pad=0)])  # straight back
            direct = await anext(packets)
            return through_tables, direct

    through_tables, direct = run(main())
    assert through_tables.payload == payload  # packet_in header parsed and stripped
    assert through_tables["ingress_port"] == CPU_PORT
    assert direct.payload == b"\x01\x02\x03" and direct["ingress_port"] == CPU_PORT


def test_digest_list_reaches_the_primary(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            await sw.insert([P4DigestEntry("learn_t", max_list_size=1),
                             P4TableEntry("MyIngress.acl", priority=1,
                                          match=P4TableMatch({"hdr.ethernet.etherType": (0x0800, 0xFFFF)}),
                                          action=P4TableAction("MyIngress.learn"))])
            [config] = [e async for e in sw.read(P4DigestEntry())]
            assert config.max_list_size == 1
            digests = sw.read_digests("learn_t")
            await sw.write([P4PacketOut(ipv4_packet(), egress_port=0, _pad=0)])
            return await anext(digests)

    digest_list = run(main())
    assert len(digest_list) == 1
    assert digest_list[0] == {"srcAddr": 0x000000000002, "ingress_port": CPU_PORT}


def test_requests_are_logged(server, p4info_path, tmp_path):
    run(_set_pipeline_with_finsy(server, p4info_path))
    log = (tmp_path / "s1-p4runtime-requests.txt").read_text()
    assert "SetForwardingPipelineConfig" in log and "StreamChannel" in log and "arbitration" in log
    assert "bytes of P4 source>" in log


# ---------------------------------------------------------------------------- switch-process API


def test_load_source_serves_the_program_before_any_client_sets_one(server, p4info_path):
    server.load_source(PROGRAM.read_text(), str(PROGRAM))

    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", SwitchOptions(p4info=p4info_path, device_id=1)) as sw:
            await sw.insert([LPM_ENTRY])
            return [e async for e in sw.read(P4TableEntry("MyIngress.ipv4_lpm"))]
    assert len(run(main())) == 1
    with pytest.raises(RuntimeStatus) as err:
        server.load_source("header h { bit<8> x; }\ncontrol {", "bad.p4")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and err.value.message.startswith("bad.p4:2:")
    assert len(server.pipeline.state.table("MyIngress.ipv4_lpm")) == 1  # the running program is untouched


def test_backup_takes_over_when_the_primary_leaves(server, p4info_path):
    async def main():
        backup = Switch("s1b", f"127.0.0.1:{server.port}", options(p4info_path, initial_election_id=5))
        async with backup:
            async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path, initial_election_id=10)) as primary:
                while not primary.is_primary:  # its arbitration answered
                    await asyncio.sleep(0.05)
                assert not backup.is_primary
            while not backup.is_primary:  # finsy re-claims primacy after the NOT_FOUND update
                await asyncio.sleep(0.05)
            await backup.insert([LPM_ENTRY])
    run(main())
    assert len(server.pipeline.state.table("MyIngress.ipv4_lpm")) == 1


def test_clone_session_insert_read_delete(server, p4info_path):
    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            await sw.insert([P4CloneSessionEntry(5, replicas=[(3, 0)], packet_length_bytes=64)])
            [session] = [e async for e in sw.read(P4CloneSessionEntry())]
            assert session.session_id == 5 and session.packet_length_bytes == 64
            assert list(session.replicas) == [3]  # finsy shows an instance-0 replica as its port
            await sw.delete([P4CloneSessionEntry(5)])
            with pytest.raises(P4ClientError) as err:
                await sw.delete([P4CloneSessionEntry(5)])
            assert err.value.is_not_found_only
    run(main())
    assert server.pipeline.state.clone_sessions == {}


def test_packet_out_from_a_backup_is_refused_on_the_stream(server, p4info_path):
    run(_set_pipeline_with_finsy(server, p4info_path))
    primary, backup = RawClient(server.port), RawClient(server.port)
    primary.arbitrate(20)  # above finsy's 10: the server may not yet have seen the end of finsy's stream
    backup.arbitrate(5)
    backup.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=b"x")))
    error = backup.next_message().error
    assert error.canonical_code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert error.packet_out.packet_out.payload == b"x"
    primary.close()
    backup.close()


def test_request_log_shows_large_write_batches_by_their_head_and_a_count(tmp_path):
    from p4target.runtime.requestlog import LOGGED_UPDATES, RequestLog

    path = tmp_path / "requests.txt"
    log = RequestLog(str(path))
    updates = [p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=p4r.TableEntry(table_id=i + 1)))
               for i in range(LOGGED_UPDATES + 5)]
    log.write("Write", p4r.WriteRequest(device_id=1, updates=updates[:3]))
    log.write("Write", p4r.WriteRequest(device_id=1, updates=updates))
    log.close()
    small, large = path.read_text().split("---\n")[:2]
    assert small.count("updates {") == 3 and "more updates" not in small
    assert large.count("updates {") == LOGGED_UPDATES
    assert f"table_id: {LOGGED_UPDATES}\n" in large and f"table_id: {LOGGED_UPDATES + 1}\n" not in large
    assert "# ... and 5 more updates (not shown)" in large


def test_request_log_names_a_json_device_config_as_such(tmp_path):
    from p4target.runtime.requestlog import RequestLog

    path = tmp_path / "requests.txt"
    log = RequestLog(str(path))
    log.write("SetForwardingPipelineConfig", p4r.SetForwardingPipelineConfigRequest(
        config=p4r.ForwardingPipelineConfig(p4_device_config=b'{"program": "basic.p4"}')))
    log.close()
    assert "<23 bytes of BMv2 JSON>" in path.read_text()


def test_reconcile_that_cannot_keep_the_state_is_invalid_argument_and_keeps_the_old_pipeline(p4info_path):
    from p4target.runtime.device import Device

    device = Device(1)
    device.load_source(PROGRAM.read_text(), str(PROGRAM))
    first = device.current
    update = p4r.Update(type=p4r.Update.INSERT, entity=LPM_ENTRY.encode(_schema(p4info_path)))
    assert device.write([update], p4r.WriteRequest.CONTINUE_ON_ERROR) == [None]
    other = PROGRAM.parent / "route_scale.p4"  # no MyIngress.ipv4_lpm: the entry has nowhere to go
    config = p4r.ForwardingPipelineConfig(p4info=build_p4info(load_program(str(other))),
                                          p4_device_config=other.read_bytes())
    with pytest.raises(RuntimeStatus) as err:
        device.set_pipeline(p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT, config)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "cannot preserve" in err.value.message
    assert device.current is first and len(first.pipeline.state.table("MyIngress.ipv4_lpm")) == 1


def test_wildcard_reads_of_kinds_the_program_lacks_answer_nothing_and_delete_all_works(server, p4info_path):
    run(_set_pipeline_with_finsy(server, p4info_path))
    raw = RawClient(server.port)
    raw.arbitrate(20)  # above finsy's 10: the server may not yet have seen the end of finsy's stream
    for kind in ("action_profile_member", "action_profile_group", "meter_entry", "direct_meter_entry",
                 "value_set_entry", "extern_entry"):
        assert raw.read(p4r.Entity(**{kind: {}})) == [], kind  # ipv4_cpu.p4 has none of these: nothing, as BMv2
    raw.close()

    async def main():
        async with Switch("s1", f"127.0.0.1:{server.port}", options(p4info_path)) as sw:
            await sw.insert([LPM_ENTRY, P4MulticastGroupEntry(3, replicas=[(1, 1)]), P4CloneSessionEntry(4, replicas=[(2, 0)])])
            await sw.delete_all()  # the first call finsy's README makes
            assert [e async for e in sw.read(P4TableEntry())] == []
            assert [e async for e in sw.read(P4MulticastGroupEntry())] == []
    run(main())
