"""The switch's servers fuzzed over their wires, grammar-aware: P4Runtime (gRPC) and the side channel
(BMv2's Thrift API and the line protocol), with the native engine's calls replayed under the sanitizers.

A switch is wired in this process as `aggnet switch` wires it (p4target.switch.Switch, without ports,
its RuntimeServer and SideChannelServer on 127.0.0.1), running a program on the native engine whose
calls are traced (p4target.native.engine.Trace). Seeded steps (a run repeats exactly), each one of:

P4Runtime (`--fuzzers p4runtime`)
- a unary request made valid (Write batches of scripts/fuzz_p4runtime.py's entities, from the primary
  or not; Reads of them and of wildcards; GetForwardingPipelineConfig; Capabilities; a VERIFY of the
  program), then mutated by its fields (protobuf reflection: a number at an extreme, bytes or text
  long, empty or not UTF-8, a message cleared, a list element repeated) or by its bytes (bits flipped,
  cut short, spliced, bytes inserted), sent as raw bytes;
- a stream session: a sequence of arbitration updates (device ids, election ids old, new, equal to
  another's or absent, roles with and without a role config), PacketOuts (metadata right and wrong,
  payloads up to 64 KB) from primaries and backups, digest acks, unknown and empty messages and bytes
  that are no message; half the streams end their side and read all, the rest stay open (up to
  eight) across steps and are cancelled later.
Thrift (`--fuzzers thrift`)
- a call simple_switch_CLI could make against the program (tables' entries with keys of the right
  kinds and widths, actions, registers, counters, meters, multicast, mirroring, queues, value sets),
  mutated on its values (a field's type or id changed, a field dropped, an integer at an extreme, a
  string long or not UTF-8, a list grown or nested) or on its bytes; a cut call is abandoned;
- a line-protocol command made from the verbs and the program's names, mutated as text.

Verdicts. A unary answer is OK or a status code the spec allows, its message one line of bounded
length: never INTERNAL, never an exception's text, UNKNOWN only for a Write carrying one p4.v1.Error
per update. A stream ends OK or with an allowed code; its StreamErrors carry allowed codes. A Thrift
call is answered with a reply or the declared exception of the method called, or an application
exception for a method that does not exist, never an internal error; bytes that are no call close
the connection. A line gets one `ok`/`error:` line. Every `--check` steps and at the end a
well-behaved controller (a Write, its Read, Capabilities), a Thrift client and a line client must be
served. Then the trace is replayed by the sanitized driver (scripts/fuzz_engine.py: ASan, UBSan,
LeakSanitizer) with `--frames` fuzzed frames more. A finding names the fuzzer, seed and step; exit 1.

    python scripts/fuzz_server.py                        # both fuzzers, 5,000 steps each
    python scripts/fuzz_server.py --fuzzers thrift --steps 500 --seed 3
"""
from __future__ import annotations

import argparse
import logging
import queue
import random
import socket
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from finsy.proto import p4i, p4r
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import fuzz_engine  # noqa: E402  (puts the repository and tests/ on sys.path)
import fuzz_p4runtime  # noqa: E402
from bm_thrift import BmClient  # noqa: E402
from p4rt_raw import RawClient  # noqa: E402

from p4target.errors import MESSAGE_CHARS  # noqa: E402
from p4target.frontend import load_program  # noqa: E402
from p4target.native.engine import Trace  # noqa: E402
from p4target.native.pipeline import NativePipeline  # noqa: E402
from p4target.p4info import build_p4info  # noqa: E402
from p4target.runtime import RuntimeServer  # noqa: E402
from p4target.runtime.bmv2_thrift import wire  # noqa: E402
from p4target.runtime.bmv2_thrift.api import INTERNAL_ERROR  # noqa: E402
from p4target.sidechannel import SideChannelServer, send_command  # noqa: E402
from p4target.switch import Switch  # noqa: E402

PROGRAM = REPO / "tests" / "data" / "runtime" / "ipv4_cpu.p4"
SERVICE = "/p4.v1.P4Runtime/"
TOP_ID = p4r.Uint128(high=2**64 - 1, low=2**64 - 1)  # the controller's election id: no fuzzed client passes it
TIMEOUT_S = 60.0  # what one answer may take before the switch counts as not serving (a hang, not a speed)
ALLOWED = fuzz_p4runtime.ALLOWED
STREAM_ENDS = ALLOWED | {grpc.StatusCode.CANCELLED.value[0]}
REQUESTS = {"Write": p4r.WriteRequest, "Read": p4r.ReadRequest, "Capabilities": p4r.CapabilitiesRequest,
            "GetForwardingPipelineConfig": p4r.GetForwardingPipelineConfigRequest,
            "SetForwardingPipelineConfig": p4r.SetForwardingPipelineConfigRequest}
EXTREMES = [0, 1, -1, 2**31 - 1, -2**31, 2**32 - 1, 2**63 - 1, -2**63, 2**64 - 1]


@dataclass
class Result:
    fuzzer: str
    steps: int = 0
    messages: int = 0  # requests, stream messages, calls and lines sent
    findings: list[str] = field(default_factory=list)
    sanitized: str = ""  # the sanitized driver's line

    @property
    def line(self) -> str:
        return (f"{self.fuzzer}: {self.steps} steps, {self.messages} messages, {len(self.findings)} findings; "
                f"sanitized replay: {self.sanitized}")


class Harness:
    """A switch in this process as `aggnet switch` wires it, its engine traced, and its well-behaved clients."""

    def __init__(self, program: Path):
        ir_program = load_program(str(program))
        self.p4info = build_p4info(ir_program)
        self.source = program.read_text()
        self.trace = Trace()
        self.pipeline = NativePipeline(ir_program, trace=self.trace)
        self.switch = Switch({}, device_id=1)
        self.server = RuntimeServer(1, "127.0.0.1:0", on_pipeline_set=self.switch.set_pipeline, engine="native")
        self.server.device.use_pipeline(self.p4info, self.pipeline, self.source.encode())
        self.grpc_port = self.server.start()
        self.side = SideChannelServer(self.switch, 0).start()
        self.thrift_port = self.side.server_address[1]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        self.controller = RawClient(self.grpc_port)
        self.controller.send(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=1, election_id=TOP_ID)))
        assert self.controller.next_message(TIMEOUT_S).arbitration.status.code == 0
        self._checks = 0

    def served(self) -> str | None:
        """Why a well-behaved client was not served (None: all were): the controller's Write of a clone
        session, its Read back and delete, Capabilities, a Thrift call and a line command."""
        self._checks += 1
        session = p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            clone_session_entry=p4r.CloneSessionEntry(session_id=10_000 + self._checks % 1000,
                                                      replicas=[p4r.Replica(egress_port=1, instance=1)])))
        stub = self.controller.stub
        try:
            for kind in (p4r.Update.INSERT, p4r.Update.DELETE):
                stub.Write(p4r.WriteRequest(device_id=1, election_id=TOP_ID, updates=[p4r.Update(type=kind,
                                                                                                  entity=session)]),
                           timeout=TIMEOUT_S)
                got = self.controller.read(session)
                if len(got) != (kind == p4r.Update.INSERT):
                    return f"the controller read back {len(got)} clone sessions"
            stub.Capabilities(p4r.CapabilitiesRequest(), timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            return f"the controller was answered {exc.code().name}: {exc.details()}"
        client = BmClient(self.thrift_port)
        try:
            client.sock.settimeout(TIMEOUT_S)
            client.call("standard", "bm_get_config")
        except (OSError, AssertionError) as exc:
            return f"a Thrift client was not served: {exc}"
        finally:
            client.close()
        try:
            send_command(self.thrift_port, "port_stats", timeout=TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            return f"a line client was not served: {exc}"
        return None

    def sanitized(self, frames: int, seed: int) -> fuzz_engine.Result:
        """The traced engine calls replayed under the sanitizers, then `frames` fuzzed frames."""
        return fuzz_engine.run("server", self.pipeline.source, self.trace.text(), frames, seed)

    def close(self) -> None:
        self.controller.close()
        self.channel.close()
        self.server.stop()
        self.side.stop()
        self.switch.close()
        self.pipeline.close()


# -- mutation ---------------------------------------------------------------------------------------------
def _fields(message: Any, depth: int = 0) -> list[tuple[Any, Any]]:
    """(message, field) of every field set in `message` and its sub-messages, and a few unset ones."""
    out = [(message, f) for f in message.DESCRIPTOR.fields]
    if depth < 6:
        for f, value in message.ListFields():
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                items = value if f.is_repeated else [value]
                if f.message_type.GetOptions().map_entry:
                    continue
                for item in items:
                    out += _fields(item, depth + 1)
    return out


def _scalar(rng: random.Random, f: Any) -> Any:
    if f.type == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if f.type == FieldDescriptor.TYPE_STRING:
        return rng.choice(["", "x" * rng.choice([1, 300, 70_000]), "é\n\x00\"*/", "".join(chr(rng.randrange(1, 0x2FF))
                                                                                      for _ in range(20))])
    if f.type == FieldDescriptor.TYPE_BYTES:
        return rng.choice([b"", b"\x00" * rng.choice([1, 17, 4096]), rng.randbytes(rng.randint(1, 64)),
                           b"\xff" * rng.choice([1, 8, 300])])
    if f.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return rng.choice([0.0, -1.0, 1e300, float("nan")])
    bits = 64 if f.type in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
                            FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64) else 32
    unsigned = f.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED64,
                          FieldDescriptor.TYPE_FIXED32)
    low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    value = rng.choice(EXTREMES + [rng.randint(low, high)])
    return min(max(value, low), high)


def mutate_fields(rng: random.Random, message: Any) -> None:
    """One to three field-level changes, in place."""
    for _ in range(rng.randint(1, 3)):
        owner, f = rng.choice(_fields(message))
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            if f.is_repeated:
                items = getattr(owner, f.name)
                if len(items) and not f.message_type.GetOptions().map_entry:
                    if rng.random() < 0.5:
                        items.add().CopyFrom(items[rng.randrange(len(items))])
                    else:
                        del items[rng.randrange(len(items))]
            elif rng.random() < 0.5:
                owner.ClearField(f.name)
            else:
                getattr(owner, f.name).SetInParent()
        elif f.is_repeated:
            getattr(owner, f.name).append(_scalar(rng, f))
        else:
            try:
                setattr(owner, f.name, _scalar(rng, f))
            except (ValueError, TypeError):
                pass  # e.g. an enum value the field's (closed) enum lacks


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """Bits flipped, the bytes cut, spliced with themselves, or random bytes inserted."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        how = rng.randrange(4)
        if how == 0 and out:
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
        elif how == 1 and out:
            del out[rng.randrange(len(out)):]
        elif how == 2 and out:
            i, j = sorted(rng.randrange(len(out) + 1) for _ in range(2))
            out[i:i] = out[i:j]
        else:
            i = rng.randrange(len(out) + 1)
            out[i:i] = rng.randbytes(rng.randint(1, 8))
    return bytes(out)


# -- P4Runtime ------------------------------------------------------------------------------------------
class P4RuntimeFuzzer:
    """Seeded P4Runtime steps against a Harness (see the module docstring)."""

    def __init__(self, harness: Harness, rng: random.Random, result: Result):
        self.h, self.rng, self.result = harness, rng, result
        self.entities = fuzz_p4runtime.Fuzzer(harness.p4info, rng)
        self.open_streams: list[tuple[Any, queue.Queue]] = []
        self.packet_out = harness.p4info.controller_packet_metadata
        self.elections = 0
        self.unary = {name: self.h.channel.unary_unary(SERVICE + name, request_serializer=bytes,
                                                       response_deserializer=bytes)
                      for name in REQUESTS if name != "Read"}
        self.read = self.h.channel.unary_stream(SERVICE + "Read", request_serializer=bytes,
                                                response_deserializer=p4r.ReadResponse.FromString)
        self.stream = self.h.channel.stream_stream(SERVICE + "StreamChannel", request_serializer=bytes,
                                                   response_deserializer=p4r.StreamMessageResponse.FromString)

    def step(self, n: int) -> None:
        if self.rng.random() < 0.7:
            self._unary(n)
        else:
            self._stream(n)

    def _finding(self, n: int, text: str) -> None:
        self.result.findings.append(f"p4runtime step {n}: {text}")

    # -- unary
    def _valid(self, name: str) -> Any:
        rng = self.rng
        election = TOP_ID if rng.random() < 0.6 else p4r.Uint128(low=rng.randrange(100))
        if name == "Write":
            return p4r.WriteRequest(device_id=1, election_id=election, updates=[
                self.entities.update() for _ in range(rng.randint(1, 5))],
                atomicity=rng.choice([0, 1, 2]), role=rng.choice(["", "", "r1"]))
        if name == "Read":
            entities = [self.entities.update().entity for _ in range(rng.randint(1, 4))]
            return p4r.ReadRequest(device_id=1, entities=entities)
        if name == "GetForwardingPipelineConfig":
            return p4r.GetForwardingPipelineConfigRequest(device_id=1, response_type=rng.randrange(4))
        if name == "SetForwardingPipelineConfig":
            return p4r.SetForwardingPipelineConfigRequest(
                device_id=1, election_id=election, action=p4r.SetForwardingPipelineConfigRequest.VERIFY,
                config=p4r.ForwardingPipelineConfig(p4info=self.h.p4info, p4_device_config=self.h.source.encode()))
        return p4r.CapabilitiesRequest()

    def _unary(self, n: int) -> None:
        rng = self.rng
        name = rng.choices(list(REQUESTS), weights=[50, 20, 5, 10, 1])[0]
        request = self._valid(name)
        if rng.random() < 0.5:
            mutate_fields(rng, request)
            data = request.SerializeToString()
        else:
            data = mutate_bytes(rng, request.SerializeToString())
        try:
            parsed = REQUESTS[name].FromString(data)
        except DecodeError:
            parsed = None
        self.result.messages += 1
        try:
            if name == "Read":
                for _ in self.read(data, timeout=TIMEOUT_S):
                    pass
            else:
                self.unary[name](data, timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            why = self._unclean(name, parsed, exc)
            if why:
                self._finding(n, f"{name} ({len(data)} bytes): {why}")

    @staticmethod
    def _unclean(name: str, parsed: Any, exc: grpc.RpcError) -> str | None:
        code, details = exc.code(), exc.details() or ""
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"no answer in {TIMEOUT_S:.0f} s"
        if parsed is None:
            return None if code == grpc.StatusCode.INVALID_ARGUMENT else f"undecodable bytes answered {code.name}"
        if "\n" in details or len(details) > MESSAGE_CHARS + 64 or "Exception" in details or "Traceback" in details:
            return f"{code.name} with a message that is not one short line: {details[:200]!r}"
        if code == grpc.StatusCode.UNKNOWN:
            if name != "Write":
                return f"UNKNOWN: {details}"
            codes = fuzz_p4runtime._details(exc)
            if codes is None or len(codes) != len(parsed.updates) or any(c not in ALLOWED for c in codes):
                return f"UNKNOWN without an allowed p4.v1.Error per update: {details}"
            return None
        return None if code.value[0] in ALLOWED else f"{code.name}: {details}"

    # -- streams
    def _stream_message(self, kind: str | None = None) -> bytes:
        rng = self.rng
        kind = kind or rng.choices(["arbitration", "packet", "digest_ack", "other", "empty", "bytes"],
                                   weights=[20, 50, 5, 5, 5, 15])[0]
        if kind == "arbitration":
            update = p4r.MasterArbitrationUpdate(device_id=1 if rng.random() < 0.9 else rng.choice([0, 7]))
            if rng.random() < 0.9:  # a new highest id (primary of its role, unless the controller's) or an old one
                self.elections += 1
                update.election_id.CopyFrom(rng.choices([p4r.Uint128(high=1, low=self.elections), TOP_ID,
                                                         p4r.Uint128(low=rng.randrange(20))], weights=[14, 1, 5])[0])
            if rng.random() < 0.7:  # another role than the controller's: the fuzzed client may be its primary
                update.role.name = rng.choice(["r1", "r1", "r2", "", "x" * 1000])
                if rng.random() < 0.5:
                    update.role.config.Pack(p4r.Role(name="not a role config")
                                            if rng.random() < 0.3 else _role_config(rng, self.h.p4info))
            message = p4r.StreamMessageRequest(arbitration=update)
        elif kind == "packet":
            header = next((h for h in self.packet_out if h.preamble.name == "packet_out"), None)
            metadata = [p4r.PacketMetadata(metadata_id=m.id if rng.random() < 0.95 else rng.randrange(9),
                                           value=rng.getrandbits(m.bitwidth).to_bytes((m.bitwidth + 7) // 8, "big")
                                           if rng.random() < 0.9 else rng.randbytes(rng.randint(0, 3)))
                        for m in (header.metadata if header else [])]
            message = p4r.StreamMessageRequest(packet=p4r.PacketOut(
                payload=rng.randbytes(rng.choice([0, 14, 64, 1500, 64 * 1024])), metadata=metadata))
        elif kind == "digest_ack":
            message = p4r.StreamMessageRequest(digest_ack=p4r.DigestListAck(digest_id=rng.randrange(9),
                                                                             list_id=rng.randrange(9)))
        elif kind == "other":
            message = p4r.StreamMessageRequest()
            message.other.type_url = "type.googleapis.com/fuzz"
        else:
            message = p4r.StreamMessageRequest()
        data = message.SerializeToString()
        if kind == "bytes":
            data = mutate_bytes(rng, arbitration_bytes(rng))
        elif rng.random() < 0.2:
            mutate_fields(rng, message)
            data = message.SerializeToString()
        return data

    def _stream(self, n: int) -> None:
        rng = self.rng
        if self.open_streams and rng.random() < 0.3:
            call, _ = self.open_streams.pop(rng.randrange(len(self.open_streams)))
            call.cancel()
        requests: queue.Queue = queue.Queue()
        first = [self._stream_message("arbitration")] if rng.random() < 0.8 else []
        messages = first + [self._stream_message() for _ in range(rng.randint(1, 8))]
        for data in messages:
            requests.put(data)
        self.result.messages += len(messages)
        call = self.stream(iter(requests.get, None), timeout=None)
        if rng.random() < 0.5 and len(self.open_streams) < 8:
            self.open_streams.append((call, requests))
            threading.Thread(target=_drain, args=(call,), daemon=True).start()
            return
        requests.put(None)  # our side ends; read what the switch sends until its side ends
        got: queue.Queue = queue.Queue()
        threading.Thread(target=_collect, args=(call, got), daemon=True).start()
        try:
            answers, status = got.get(timeout=TIMEOUT_S)
        except queue.Empty:
            call.cancel()
            return self._finding(n, f"a stream of {len(messages)} messages did not end in {TIMEOUT_S:.0f} s")
        for answer in answers:
            if answer.HasField("error") and answer.error.canonical_code not in ALLOWED:
                self._finding(n, f"StreamError code {answer.error.canonical_code}: {answer.error.message}")
        if status is not None:
            code, details = status
            if code.value[0] not in STREAM_ENDS or "\n" in details or "Exception" in details:
                self._finding(n, f"a stream ended {code.name}: {details[:200]!r}")

    def close(self) -> None:
        for call, _ in self.open_streams:
            call.cancel()


def arbitration_bytes(rng: random.Random) -> bytes:
    return p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
        device_id=1, election_id=p4r.Uint128(low=rng.randrange(20)))).SerializeToString()


def _role_config(rng: random.Random, info: p4i.P4Info) -> Any:
    from p4target.runtime.roles import P4RoleConfig

    ids = [t.preamble.id for t in info.tables] + [rng.randrange(1 << 32)]
    return P4RoleConfig(shared_p4_ids=rng.sample(ids, rng.randint(0, len(ids))),
                        exclusive_p4_ids=rng.sample(ids, rng.randint(0, 1)), can_push_pipeline=rng.random() < 0.3,
                        receives_packet_ins=rng.random() < 0.5)


def _drain(call: Any) -> None:
    try:
        for _ in call:
            pass
    except grpc.RpcError:
        pass


def _collect(call: Any, got: queue.Queue) -> None:
    answers = []
    try:
        for answer in call:
            answers.append(answer)
    except grpc.RpcError as exc:
        got.put((answers, (exc.code(), exc.details() or "")))
        return
    got.put((answers, None))


# -- Thrift and the line protocol ------------------------------------------------------------------------
S, I32, I64, LIST, STRUCT, BYTE = wire.STRING, wire.I32, wire.I64, wire.LIST, wire.STRUCT, wire.BYTE
MATCH_TYPE = {"exact": 0, "lpm": 1, "ternary": 2, "range": 4, "optional": 0}


class ThriftFuzzer:
    """Seeded side-channel steps against a Harness (see the module docstring)."""

    def __init__(self, harness: Harness, rng: random.Random, result: Result):
        self.h, self.rng, self.result = harness, rng, result
        self.schema = harness.pipeline.state.schema
        self.seqid = 0

    def _name(self, names: Any) -> str:
        names = list(names)
        return self.rng.choice(names) if names and self.rng.random() < 0.9 else self.rng.choice(["", "nope", "x" * 300])

    def _value(self, width: int) -> bytes:
        nbytes = max(1, (width + 7) // 8)
        if self.rng.random() < 0.1:
            return self.rng.randbytes(self.rng.choice([0, nbytes + 1, 100]))
        return self.rng.getrandbits(nbytes * 8).to_bytes(nbytes, "big")

    def _key(self, key: Any) -> dict:
        kind = key.match_kind if self.rng.random() < 0.9 else self.rng.choice(list(MATCH_TYPE))
        w = key.bitwidth
        if kind == "lpm":
            return {1: (I32, 1), 3: (STRUCT, {1: (S, self._value(w)), 2: (I32, self.rng.randint(0, w))})}
        if kind == "ternary":
            return {1: (I32, 2), 4: (STRUCT, {1: (S, self._value(w)), 2: (S, self._value(w))})}
        if kind == "range":
            return {1: (I32, 4), 6: (STRUCT, {1: (S, self._value(w)), 2: (S, self._value(w))})}
        return {1: (I32, 0), 2: (STRUCT, {1: (S, self._value(w))})}

    def _call(self) -> tuple[str, dict]:
        """A method and its arguments (field id -> (type, value)), valid for the program most of the time."""
        rng, schema = self.rng, self.schema
        table = schema.tables.get(self._name(schema.tables))
        action = self._name(table.actions if table else schema.actions)
        params = schema.actions[action].params if action in schema.actions else []
        data = (LIST, (S, [self._value(w) for _, w in params]))
        handle = (I32, rng.choice([0, 1, 2, -1, 2**31 - 1]))
        register = self._name(schema.registers)
        counter = self._name(schema.counters)
        calls = {
            "bm_mt_add_entry": lambda: [(S, table.name if table else "nope"),
                                        (LIST, (STRUCT, [self._key(k) for k in (table.keys if table else [])])),
                                        (S, action), data, (STRUCT, {1: (I32, rng.randint(0, 9))})],
            "bm_mt_set_default_action": lambda: [(S, table.name if table else ""), (S, action), data],
            "bm_mt_modify_entry": lambda: [(S, table.name if table else ""), handle, (S, action), data],
            "bm_mt_delete_entry": lambda: [(S, table.name if table else ""), handle],
            "bm_mt_get_entries": lambda: [(S, table.name if table else "")],
            "bm_mt_read_counter": lambda: [(S, table.name if table else ""), handle],
            "bm_register_read": lambda: [(S, register), (I32, rng.choice([0, 1, 1 << 20, -1]))],
            "bm_register_write": lambda: [(S, register), (I32, rng.randrange(4)), (I64, rng.choice(EXTREMES[:8]))],
            "bm_register_read_all": lambda: [(S, register)],
            "bm_counter_read": lambda: [(S, counter), (I32, rng.choice([0, 1, 511, 1 << 20]))],
            "bm_meter_set_rates": lambda: [(S, self._name(schema.meters)), (I32, 0), (LIST, (STRUCT, [
                {1: (wire.DOUBLE, rng.choice([0.0, 1.0, -1.0])), 2: (I32, rng.randint(-1, 9))}
                for _ in range(rng.choice([2, 2, 1, 3]))]))],
            "bm_parse_vset_add": lambda: [(S, self._name(schema.value_sets)), (S, self._value(16))],
        }
        unscoped = {  # methods without the context id first
            "bm_mc_mgrp_create": lambda: [(I32, 0), (I32, rng.choice([1, 7, 0, 1 << 16]))],
            "bm_mc_node_create": lambda: [(I32, 0), (I32, rng.randrange(4)), (S, rng.choice(["1100", "", "1" * 600])),
                                          (S, "")],
            "bm_mc_node_associate": lambda: [(I32, 0), handle, handle],
            "mirroring_session_add": lambda: [(I32, rng.randrange(8)), (STRUCT, {1: (I32, rng.randrange(600))})],
            "set_egress_queue_depth": lambda: [(I32, rng.randrange(600)), (I32, rng.choice([0, 64, -1]))],
            "set_all_egress_queue_rates": lambda: [(I64, rng.choice([0, 1000, -1]))],
            "bm_get_config": lambda: [],
            "bm_mgmt_get_info": lambda: [],
        }
        method = rng.choice(list(calls) + list(unscoped) + ["no_such_method"])
        if method in calls:
            args = [(I32, 0), *calls[method]()]
        else:
            args = unscoped.get(method, lambda: [])()
        return method, {i + 1: arg for i, arg in enumerate(args)}

    def _mutate_values(self, body: dict) -> None:
        rng = self.rng
        for _ in range(rng.randint(1, 3)):
            if not body:
                body[rng.randint(1, 9)] = (I32, 1)
                continue
            fid = rng.choice(list(body))
            ttype, value = body[fid]
            how = rng.randrange(5)
            if how == 0:
                del body[fid]
            elif how == 1:
                body[rng.choice([fid, 0, 99, -1])] = rng.choice([(S, b"\xff\xfe" * 50), (I64, -1), (BYTE, 7),
                                                                  (LIST, (I32, [1, 2])), (STRUCT, {})])
            elif how == 2 and ttype == STRUCT:
                self._mutate_values(value)
            elif how == 3 and ttype == LIST:
                etype, items = value
                body[fid] = (LIST, (etype, items * rng.choice([0, 2, 50])))
            else:
                body[fid] = (LIST, (STRUCT, [{1: (ttype, value)}]))

    def step(self, n: int) -> None:
        if self.rng.random() < 0.25:
            return self._line(n)
        method, body = self._call()
        if self.rng.random() < 0.5:
            self._mutate_values(body)
        self.seqid += 1
        mtype = wire.CALL if self.rng.random() < 0.95 else self.rng.choice([wire.ONEWAY, wire.REPLY, 9])
        try:
            data = wire.message(method, mtype, self.seqid, body)
        except (ValueError, TypeError, struct.error):
            return  # a mutated value its wire type cannot hold
        if self.rng.random() < 0.3:
            data = mutate_bytes(self.rng, data)
        self.result.messages += 1
        why = self._send(method, data)
        if why:
            self.result.findings.append(f"thrift step {n} ({method}): {why}")

    def _send(self, method: str, data: bytes) -> str | None:
        expected, name = _expected(data)
        with socket.create_connection(("127.0.0.1", self.h.thrift_port), timeout=TIMEOUT_S) as conn:
            try:
                conn.sendall(data)
            except OSError:
                return None if expected == "no call" else "the connection closed on a call"
            if expected in ("incomplete", "oneway"):
                return None  # a cut call is abandoned; a oneway call is not answered
            reader = wire.Reader(conn.makefile("rb").read)
            try:
                reply = reader.message()
            except TimeoutError:
                return f"no answer in {TIMEOUT_S:.0f} s ({expected})"
            except (wire.WireError, OSError) as exc:
                return None if expected == "no call" else f"the answer is no Thrift message: {exc}"
        if expected == "no call":
            return None if reply is None else f"bytes that are no call were answered ({reply[1]})"
        if reply is None:
            return "the connection closed without an answer"
        answered, mtype, _, result = reply
        if answered != name:
            return f"answered for method {answered!r}, called {name!r}"
        if mtype == wire.EXCEPTION and result.get(2) == INTERNAL_ERROR:
            return f"an internal error: {result.get(1)!r}"
        return None

    def _line(self, n: int) -> None:
        rng, schema = self.rng, self.schema
        verbs = ["set_queue_rate", "set_queue_depth", "set_queue_delay", "set_queue_loss", "queue_stats",
                 "port_stats", "register_read", "register_write", "counter_read", "table_add", "nope"]
        words = [rng.choice(verbs)]
        names = list(schema.registers) + list(schema.counters) + list(schema.tables) + list(schema.actions)
        for _ in range(rng.randint(0, 6)):
            words.append(rng.choice([self._name(names), str(rng.choice(EXTREMES)), "=>", "10.0.0.1/24",
                                     "0x0800&&&0xffff", "1->5", "00:11:22:33:44:55", "1.5", "-1"]))
        line = " ".join(words)
        if rng.random() < 0.2:
            line = mutate_bytes(rng, line.encode()).decode("latin-1").replace("\n", " ")
        self.result.messages += 1
        with socket.create_connection(("127.0.0.1", self.h.thrift_port), timeout=TIMEOUT_S) as conn:
            conn.sendall(line.encode("utf-8", "replace") + b"\n")  # never a Thrift call's first byte, 0x80
            try:
                reply = conn.makefile("rb").readline()
            except TimeoutError:
                reply = b"(no answer)"
        if not reply.startswith((b"ok", b"error: ")) or not reply.endswith(b"\n"):
            self.result.findings.append(f"line step {n}: {line[:100]!r} answered {reply[:100]!r}")


def _expected(data: bytes) -> tuple[str, str]:
    """What the switch should do with `data` ('call': answer it, 'oneway': run it and answer nothing, 'no call':
    close the connection, 'incomplete': wait for the rest) and the method it names (as the switch answers it)."""
    if data[:1] != bytes([wire.FIRST_BYTE]):
        return "incomplete", ""  # a line-protocol connection: the switch waits for the line's end
    chunks = [data]

    def read(n: int) -> bytes:
        head, chunks[0] = chunks[0][:n], chunks[0][n:]
        return head

    try:
        message = wire.Reader(read).message()
    except wire.WireError as exc:
        return ("incomplete" if "closed inside" in str(exc) else "no call"), ""
    if message is None:
        return "incomplete", ""
    name, mtype = message[0].rpartition(":")[2], message[1]
    if mtype == wire.ONEWAY:
        return "oneway", name
    return ("call" if mtype == wire.CALL else "no call"), name


# -- running -------------------------------------------------------------------------------------------------
FUZZERS: dict[str, Callable[[Harness, random.Random, Result], Any]] = {"p4runtime": P4RuntimeFuzzer,
                                                                        "thrift": ThriftFuzzer}


def fuzz(kind: str, steps: int, seed: int, check_every: int = 100, frames: int = 2000,
         program: Path = PROGRAM) -> Result:
    """`steps` steps of one fuzzer on a fresh in-process switch, then the sanitized replay."""
    result = Result(kind)
    harness = Harness(program)
    fuzzer = FUZZERS[kind](harness, random.Random(f"{kind}:{seed}"), result)
    try:
        for n in range(1, steps + 1):
            fuzzer.step(n)
            result.steps = n
            if n % check_every == 0 or n == steps:
                why = harness.served()
                if why:
                    result.findings.append(f"{kind} step {n}: the switch stopped serving: {why}")
                    break
        if isinstance(fuzzer, P4RuntimeFuzzer):
            fuzzer.close()
        sanitized = harness.sanitized(frames, seed)
        result.sanitized = sanitized.line.splitlines()[-1] if sanitized.ok else "FAILED"
        if not sanitized.ok:
            result.findings.append(f"{kind}: the sanitized replay failed:\n{sanitized.line}")
    finally:
        harness.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzzers", default="p4runtime,thrift", help="p4runtime, thrift or both")
    parser.add_argument("--steps", type=int, default=5000, help="steps per fuzzer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check", type=int, default=100, help="steps between checks that a good client is served")
    parser.add_argument("--frames", type=int, default=20_000, help="fuzzed frames after the sanitized replay")
    args = parser.parse_args(argv)
    logging.getLogger("aggnet").setLevel(logging.ERROR)  # a fuzzed client's expected warnings are no news
    failed = False
    for kind in args.fuzzers.split(","):
        failed |= fuzz_p4runtime.reported(fuzz(kind, args.steps, args.seed, args.check, args.frames))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
