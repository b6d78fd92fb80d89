"""A P4Runtime request's cost grows with its size and stops at a stated cap, over real gRPC: a Read
answers requests it cannot tell apart once and streams its answer in batches; errors repeat a
client's value only shortened; a client that never reads its stream loses its messages (counted)
instead of growing the switch, and one that falls too far behind on arbitration is ended."""
from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from p4rt_raw import RawClient, rich_status

from p4target.errors import ECHO_CHARS, MESSAGE_CHARS, shorten
from p4target.frontend import load_source
from p4target.limits import READ_BATCH, STREAM_QUEUE
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer
from p4target.runtime.arbitration import Arbitration
from p4target.runtime.device import distinct_requests
from p4target.runtime.stream import Closed, Session

PROGRAM = Path(__file__).resolve().parent / "data" / "runtime" / "ipv4_cpu.p4"
SOURCE = PROGRAM.read_text().replace("size = 1024;", "size = 4096;")
INSERT = p4r.Update.INSERT


@pytest.fixture
def server():
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", engine="python")
    srv.port = srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    c = RawClient(server.port)
    c.arbitrate(10)
    c.set_pipeline(p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, p4r.ForwardingPipelineConfig(
        p4info=build_p4info(load_source(SOURCE, "prog.p4")), p4_device_config=SOURCE.encode()))
    info = c.get_pipeline(p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE).p4info
    c.ids = {e.preamble.name: e.preamble.id for kind in ("tables", "actions") for e in getattr(info, kind)}
    yield c
    c.close()


def route(ids: dict[str, int], n: int, action: str = "NoAction", params: tuple[bytes, ...] = ()) -> p4r.Entity:
    te = p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"])
    te.match.add(field_id=1).lpm.CopyFrom(p4r.FieldMatch.LPM(value=(0x0A000000 + n).to_bytes(4, "big"), prefix_len=32))
    te.action.action.action_id = ids[action]
    for param_id, value in enumerate(params, 1):
        te.action.action.params.add(param_id=param_id, value=value)
    return p4r.Entity(table_entry=te)


def test_a_read_answers_requests_it_cannot_tell_apart_once_in_batches(client):
    """10,000 copies of a wildcard over 2,500 entries answered 25,000,000 entities; now 2,500, in batches."""
    client.write([p4r.Update(type=INSERT, entity=route(client.ids, n)) for n in range(2500)])
    wildcard = p4r.Entity(table_entry=p4r.TableEntry(table_id=client.ids["MyIngress.ipv4_lpm"]))
    responses = list(client.stub.Read(p4r.ReadRequest(device_id=1, entities=[wildcard] * 10_000)))
    assert [len(r.entities) for r in responses] == [READ_BATCH, READ_BATCH, 500]
    assert len({e.SerializeToString() for r in responses for e in r.entities}) == 2500


def test_distinct_requests_differ_in_what_selects_or_shapes_the_answer():
    table = p4r.TableEntry(table_id=7)
    with_action = p4r.TableEntry(table_id=7, priority=3, idle_timeout_ns=5,
                                 action=p4r.TableAction(action=p4r.Action(action_id=1)))
    with_counters = p4r.TableEntry(table_id=7, counter_data=p4r.CounterData(packet_count=9))
    other_counters = p4r.TableEntry(table_id=7, counter_data=p4r.CounterData(byte_count=1))
    keyed = p4r.TableEntry(table_id=7, priority=3, match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(
        value=b"\x01"))])
    keyed_other_priority = p4r.TableEntry(table_id=7, priority=4, match=keyed.match)
    cells = p4r.CounterEntry(counter_id=3, data=p4r.CounterData(packet_count=1))
    cells_again = p4r.CounterEntry(counter_id=3)
    one_cell = p4r.CounterEntry(counter_id=3, index=p4r.Index(index=0))
    requests = [p4r.Entity(table_entry=t) for t in (table, with_action, with_counters, other_counters, keyed,
                                                    keyed_other_priority)]
    requests += [p4r.Entity(counter_entry=c) for c in (cells, cells_again, one_cell)]
    kept = distinct_requests(requests)
    # the wildcard's priority and action select nothing; its counter_data asks for counts whatever its values;
    # a keyed request's priority selects; a counter's data selects nothing, its index does
    assert kept == [requests[0], requests[2], requests[4], requests[5], requests[6], requests[8]]


def test_errors_repeat_a_clients_value_only_shortened(client):
    """A 3 MB action parameter was repeated in 6 MB of hex: past gRPC's metadata limit, the client saw only
    RESOURCE_EXHAUSTED: received metadata size exceeds hard limit."""
    huge = b"\x01" * (3 << 20)
    update = p4r.Update(type=INSERT, entity=route(client.ids, 1, "MyIngress.ipv4_forward", (huge, b"\x01")))
    with pytest.raises(grpc.RpcError) as refused:
        client.write([update])
    assert refused.value.code() == grpc.StatusCode.UNKNOWN
    error = p4r.Error()
    assert rich_status(refused.value).details[0].Unpack(error)
    assert error.canonical_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert f"value {shorten(huge)} does not fit in 48 bits" in error.message
    assert len(error.message) < 2 * ECHO_CHARS + 100 and "(3145728 bytes)" in error.message
    role = "r" * 100_000  # a client's role name, repeated in the error for a Write without primacy
    with pytest.raises(grpc.RpcError) as refused:
        client.stub.Write(p4r.WriteRequest(device_id=1, role=role, election_id=p4r.Uint128(low=10)))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert len(refused.value.details()) <= MESSAGE_CHARS and "(100000 characters)" in refused.value.details()


def test_shorten_cuts_bytes_and_text_and_keeps_them_on_one_line():
    assert shorten(b"\x02\x00") == "0x0200"
    assert shorten(bytes(100), 8) == "0x00000000... (100 bytes)"
    assert shorten("a\nb") == "a\\nb"
    assert shorten("x" * 70, 4) == "xxxx... (70 characters)"


def test_a_backup_that_never_reads_loses_its_stream_errors_counted(server, client):
    """Each PacketOut of a backup earns a StreamError; the backup reads none until the switch has taken
    them all and its side is closed. What its queue could not hold was dropped and counted, and each error
    it gets echoes a cut payload."""
    sent = 3 * STREAM_QUEUE
    out = p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=bytes(1000)))
    hello = p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=1,
                                                                              election_id=p4r.Uint128(low=5)))
    # A client whose transport takes little ahead of its reading (gRPC's would otherwise take megabytes of
    # errors off the switch's hands into its own buffers): what it does not read stays the switch's.
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}",
                                    options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)])
    try:
        responses = p4r_grpc.P4RuntimeStub(channel).StreamChannel(iter([hello] + [out] * sent))  # then half-closes
        deadline = time.monotonic() + 60
        while not any(s.closed for s in list(server.sessions) if s.election_id == 5):  # it has taken them all
            assert time.monotonic() < deadline
            time.sleep(0.01)
        received = list(responses)
    finally:
        channel.close()
    errors = [m.error for m in received if m.HasField("error")]
    assert all(e.canonical_code == grpc.StatusCode.PERMISSION_DENIED.value[0] for e in errors)
    assert all(len(e.packet_out.packet_out.payload) == ECHO_CHARS for e in errors)
    assert server.stream_drops > 0 and len(errors) + server.stream_drops == sent


def test_a_client_too_far_behind_for_an_arbitration_update_is_ended():
    """Arbitration updates cannot be dropped (the client would be wrong about who is primary): past the
    queue's bound the stream is ended instead, and what waited is dropped with it."""
    arbitration, reader = Arbitration(), Session(1)
    arbitration.update(reader, "", 1)
    reader.take()  # it read that it is primary
    packet_in = p4r.StreamMessageResponse(packet=p4r.PacketIn(payload=b"x"))
    for _ in range(STREAM_QUEUE):
        reader.offer(packet_in)
    assert not reader.offer(packet_in) and reader.dropped == 1
    arbitration.update(Session(1), "", 2)  # a new primary: `reader` must be told and cannot be
    [item] = reader.take()
    assert isinstance(item, Closed) and item.failure.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "not reading its stream" in item.failure.message and reader.dropped == 1 + STREAM_QUEUE
