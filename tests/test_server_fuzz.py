"""The switch's servers fuzzed over their wires (scripts/fuzz_server.py), bounded for CI: grammar-aware P4Runtime
requests and stream sessions, and Thrift calls and line commands, each answered cleanly while a well-behaved
controller, Thrift client and line client stay served; the native engine's traced calls then replay clean
under ASan, UBSan and LeakSanitizer. The findings of longer runs are regression tests below and in the files
they name. The full run (5,000 steps a fuzzer): `python scripts/fuzz_server.py`."""
from __future__ import annotations

import sys
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r
from google.protobuf import any_pb2
from p4rt_raw import RawClient, write_codes

from p4target.externs.register import Register
from p4target.frontend import load_program
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer
from p4target.runtime.errors import RuntimeStatus
from p4target.runtime.roles import P4RoleConfig, RoleScope

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import fuzz_server as fs  # noqa: E402

STEPS = {"p4runtime": 1500, "thrift": 5000}


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_fuzzed_clients_get_clean_answers_and_good_clients_stay_served(kind):
    result = fs.fuzz(kind, STEPS[kind], seed=1, check_every=250, frames=2000)
    assert result.findings == []
    assert result.steps == STEPS[kind] and result.messages >= STEPS[kind]
    assert result.sanitized.startswith("replayed") and "0 with outputs differing" in result.sanitized


def test_a_request_that_crashes_the_server_is_a_finding(monkeypatch):
    """The fuzzer notices a server bug: register writes made to raise a plain Python error, which the server
    answers INTERNAL in one line (its traceback goes to the log), never with the exception's text."""
    def broken(self, translator, update_type, entry):
        raise KeyError("planted bug")
    monkeypatch.setattr(Register, "p4runtime_write", broken)
    result = fs.fuzz("p4runtime", 300, seed=1, check_every=300, frames=10)
    writes = [f for f in result.findings if ": Write (" in f]
    assert writes and all("INTERNAL: internal error (KeyError); the switch's log has the details" in f for f in writes)


@pytest.fixture
def client():
    server = RuntimeServer(device_id=1, address="127.0.0.1:0", engine="python")
    port = server.start()
    program = fs.PROGRAM
    raw = RawClient(port)
    raw.arbitrate(10)
    raw.set_pipeline(p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, p4r.ForwardingPipelineConfig(
        p4info=build_p4info(load_program(str(program))), p4_device_config=program.read_bytes()))
    yield raw, port
    raw.close()
    server.stop()


def test_bytes_that_are_no_request_are_invalid_argument(client):
    """Found by the fuzzer: gRPC's own parsing answered UNKNOWN with a Python exception's text."""
    _, port = client
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        write = channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=bytes, response_deserializer=bytes)
        with pytest.raises(grpc.RpcError) as refused:
            write(b"\x0a\xff\xff", timeout=60)
    finally:
        channel.close()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "the request is not a p4.v1.WriteRequest"


def test_counter_data_that_does_not_fit_64_unsigned_bits_is_refused_and_changes_nothing(client):
    """Found by the fuzzer: a negative packet count (CounterData's fields are int64) raised OverflowError into the
    numpy cells; the Write answered UNKNOWN with its text."""
    raw, _ = client
    info = raw.get_pipeline(p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE).p4info
    counter = next(c for c in info.counters if c.preamble.name == "MyIngress.port_counter")
    cell = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter.preamble.id, index=p4r.Index(index=1),
                                                     data=p4r.CounterData(packet_count=-1, byte_count=5)))
    assert write_codes(raw, p4r.Update(type=p4r.Update.MODIFY, entity=cell)) == ["INVALID_ARGUMENT"]
    [read] = raw.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=counter.preamble.id,
                                                                 index=p4r.Index(index=1))))
    assert (read.counter_entry.data.packet_count, read.counter_entry.data.byte_count) == (0, 0)


def test_a_role_config_that_does_not_parse_is_invalid_argument():
    """Found by the fuzzer: a config of the right type whose bytes do not parse raised DecodeError in the stream's
    reader (before the aio server, the stream then never ended)."""
    config = any_pb2.Any()
    config.Pack(P4RoleConfig(shared_p4_ids=[1]))
    config.value = b"\xff\xff"
    with pytest.raises(RuntimeStatus) as refused:
        RoleScope.parse("r1", config)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.message == "role 'r1': its config does not parse as a stratum.P4RoleConfig"
