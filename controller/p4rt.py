"""A small synchronous P4Runtime client: one `SwitchConnection` per switch.

Entities are built by P4 names resolved through the P4Info (`P4InfoIndex`), never raw ids:

    conn = SwitchConnection("127.0.0.1:50001", device_id=1)   # becomes primary or raises
    conn.set_pipeline(p4info, source.encode())
    conn.write([conn.insert(conn.table_entry("AggIngress.ipv4_lpm",
                                             {"hdr.ipv4.dstAddr": ("10.0.0.1", 32)},
                                             "AggIngress.ipv4_forward",
                                             {"dstAddr": "00:00:00:00:00:01", "port": 1}))])
    conn.read([conn.table_entry("AggIngress.ipv4_lpm")])      # wildcard read of one table
    conn.close()

`SwitchConnection(address, device_id, read_only=True)` opens no stream and takes no part in
arbitration, so it can read (counters, tables, registers) from a switch another controller
owns without taking the primary role away; P4Runtime allows Read from any client. Without a
`p4info` argument it resolves names through the P4Info of the pipeline the switch runs.
Anything that writes or needs the stream raises P4RuntimeError.

Match values: exact `v`; lpm `(v, prefix_len)`; ternary `(v, mask)`; range `(lo, hi)`;
optional `v`. A value is an int, a dotted IPv4 string, a colon MAC string or big-endian
bytes. Everything goes on the wire in the P4Runtime canonical form (shortest byte string;
don't-care matches omitted), which is also how servers answer reads, so entries built
here compare equal to entries read back (see `entry_key`).

Registers and queue settings: BMv2's P4Runtime cannot access registers and P4Runtime has
no queue message. `SwitchConnection.register_read/register_write` use P4Runtime unless
the connection was given a side channel (`side_channel`, controller.side_channel: the
embedded switch's TCP line protocol or BMv2's simple_switch_CLI, both taking the same
command lines), and `set_queue_rate` / `set_queue_depth` always use the side channel:
callers see one interface, whatever the target.
"""
from __future__ import annotations

import ipaddress
import queue
import threading
from typing import Any, Iterable, Mapping, Sequence

import grpc
from finsy.proto import p4d, p4i, p4r, p4r_grpc, rpc_status

from controller.side_channel import SideChannel
from p4target.p4info import P4InfoIndex, UnknownEntity
from p4target.sidechannel import SideChannelError

Value = int | str | bytes
INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
_UPDATE_NAMES = {INSERT: "INSERT", MODIFY: "MODIFY", DELETE: "DELETE"}
ARBITRATION_TIMEOUT_S = 10.0
RPC_TIMEOUT_S = 60.0
MAX_ERROR_LINES = 10  # failed updates listed in a Write error; the rest are counted
# A failed Write answers one p4.v1.Error per update in trailing metadata; big batches need room.
_CHANNEL_OPTIONS = [("grpc.max_metadata_size", 64 << 20), ("grpc.max_receive_message_length", 256 << 20),
                    ("grpc.max_send_message_length", 256 << 20)]


class P4RuntimeError(Exception):
    """A failed P4Runtime operation; the message names the switch and says what failed (one
    line per failed update for writes)."""

    exit_code = 1


class EntityError(P4RuntimeError):
    """An entity that cannot be built from the P4Info (unknown name, value too wide)."""

    exit_code = 2


def encode_value(value: Value, bitwidth: int, what: str) -> bytes:
    """Canonical P4Runtime byte string (shortest, at least one byte) of a value that fits `bitwidth`."""
    number = to_int(value, what)
    if number < 0 or number >> bitwidth:
        raise EntityError(f"{what}: value {value!r} does not fit in {bitwidth} bits")
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def to_int(value: Value, what: str) -> int:
    """An int from an int, a dotted IPv4 address, a colon-separated MAC, or big-endian bytes."""
    if isinstance(value, bool):
        raise EntityError(f"{what}: expected a number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        try:
            if value.count(".") == 3:
                return int(ipaddress.IPv4Address(value))
            if ":" in value:
                return int(value.replace(":", ""), 16)
            return int(value, 0)
        except ValueError:
            pass
    raise EntityError(f"{what}: cannot read {value!r} as a number, IPv4 address or MAC")


def decode_value(data: bytes) -> int:
    return int.from_bytes(data, "big")


def entry_key(te: p4r.TableEntry) -> tuple:
    """What identifies a table entry on a switch: table, match (order-independent), priority."""
    match = tuple(sorted(fm.SerializeToString(deterministic=True) for fm in te.match))
    return (te.table_id, match, te.priority, te.is_default_action)


def entry_action(te: p4r.TableEntry) -> bytes:
    """The entry's action with parameters in id order, for comparing desired and installed entries."""
    action = p4r.TableAction()
    action.CopyFrom(te.action)
    if action.HasField("action"):
        params = sorted(action.action.params, key=lambda p: p.param_id)
        del action.action.params[:]
        action.action.params.extend(params)
    return action.SerializeToString(deterministic=True)


def replicas_of(replicas: Iterable[p4r.Replica]) -> tuple[tuple[int, int], ...]:
    """Sorted (port, instance) pairs of a multicast group or clone session, whichever port field is used."""
    out = []
    for r in replicas:
        port = decode_value(r.port) if r.WhichOneof("port_kind") == "port" else r.egress_port
        out.append((port, r.instance))
    return tuple(sorted(out))


_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def render_error(error: p4r.Error) -> str:
    """One per-update error as 'CODE: message'."""
    code = _CODE_NAMES.get(error.canonical_code, f"code {error.canonical_code}")
    return f"{code}: {error.message}" if error.message else code


class SwitchConnection:
    """One P4Runtime session to one device: primary arbitration, pipeline, writes, reads, packets.

    The StreamChannel runs in a background thread; PacketIns land in `packet_ins` (a queue of
    p4r.PacketIn), stream errors in `stream_errors`. With `read_only=True` there is no stream
    and no arbitration: reads only (see the module docstring).
    """

    def __init__(self, address: str, device_id: int, election_id: tuple[int, int] = (0, 1),
                 name: str | None = None, p4info: p4i.P4Info | None = None, side_channel: SideChannel | None = None,
                 arbitration_timeout: float = ARBITRATION_TIMEOUT_S, read_only: bool = False):
        self.address = address
        self.device_id = device_id
        self.name = name or f"device {device_id} at {address}"
        self.read_only = read_only
        self.election_id = p4r.Uint128(high=election_id[0], low=election_id[1])
        self.side_channel = side_channel
        self.index: P4InfoIndex | None = P4InfoIndex(p4info) if p4info is not None else None
        self.packet_ins: queue.Queue[p4r.PacketIn] = queue.Queue()
        self.stream_errors: queue.Queue[p4r.StreamError] = queue.Queue()
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._arbitration: queue.Queue[p4r.MasterArbitrationUpdate | Exception] = queue.Queue()
        self._channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._stream = None
        self._thread = threading.Thread(target=self._receive, name=f"p4rt-{self.name}", daemon=True)
        try:
            if not read_only:
                self._become_primary(arbitration_timeout)
            elif self.index is None:
                self.use_running_p4info()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ session

    @property
    def sidechannel_port(self) -> int | None:
        """The side channel's port (embedded: its TCP port; BMv2: the Thrift port); None without one."""
        return None if self.side_channel is None else self.side_channel.port

    def _become_primary(self, timeout: float) -> None:
        self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
        self._thread.start()
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=self.election_id)))
        try:
            reply = self._arbitration.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeError(f"{self.name}: no arbitration answer within {timeout:g} s") from None
        if isinstance(reply, Exception):
            raise reply
        if reply.status.code != 0:
            primary = (reply.election_id.high << 64) | reply.election_id.low
            mine = (self.election_id.high << 64) | self.election_id.low
            raise P4RuntimeError(f"{self.name}: not primary (our election id {mine}, primary's {primary}): "
                                 f"{reply.status.message or 'another controller is primary'}")

    def _receive(self) -> None:
        try:
            for message in self._stream:
                kind = message.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitration.put(message.arbitration)
                elif kind == "packet":
                    self.packet_ins.put(message.packet)
                elif kind == "error":
                    self.stream_errors.put(message.error)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self._arbitration.put(P4RuntimeError(f"{self.name}: stream: {_rpc_text(exc)}"))

    @property
    def alive(self) -> bool:
        """True while the stream runs: it ends when the switch goes away (or on close()).

        A read-only connection has no stream and is never alive.
        """
        return self._thread.is_alive()

    def close(self) -> None:
        """End the stream and the channel; safe to call twice."""
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._channel.close()

    def __enter__(self) -> "SwitchConnection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ pipeline

    def _writable(self, what: str) -> None:
        """Refuse `what` on a read-only connection, before anything reaches the switch."""
        if self.read_only:
            raise P4RuntimeError(f"{self.name}: {what} needs a primary connection; this one is read-only")

    def set_pipeline(self, p4info: p4i.P4Info, device_config: bytes, cookie: int = 0) -> None:
        """Push P4Info + device config (VERIFY_AND_COMMIT); later entities resolve names through this P4Info."""
        self._writable("SetForwardingPipelineConfig")
        config = p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device_config)
        if cookie:
            config.cookie.cookie = cookie
        request = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self.election_id, config=config,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        self._call("SetForwardingPipelineConfig", self._stub.SetForwardingPipelineConfig, request)
        self.index = P4InfoIndex(p4info)

    def pipeline_cookie(self) -> int | None:
        """The cookie of the installed pipeline; None when there is no pipeline or no cookie."""
        request = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            reply = self._stub.GetForwardingPipelineConfig(request, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise P4RuntimeError(f"{self.name}: GetForwardingPipelineConfig: {_rpc_text(exc)}") from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    def use_p4info(self, p4info: p4i.P4Info) -> None:
        """Resolve names through `p4info` (the switch already runs that pipeline)."""
        self.index = P4InfoIndex(p4info)

    def use_running_p4info(self) -> None:
        """Resolve names through the P4Info of the pipeline the switch runs (asked from the switch)."""
        request = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        reply = self._call("GetForwardingPipelineConfig", self._stub.GetForwardingPipelineConfig, request)
        self.use_p4info(reply.config.p4info)

    # ------------------------------------------------------------------ write / read

    def write(self, updates: Sequence[p4r.Update], atomicity: int = p4r.WriteRequest.CONTINUE_ON_ERROR) -> None:
        """Send one batch. Raises P4RuntimeError with one line per failed update."""
        self._writable("Write")
        if not updates:
            return
        request = p4r.WriteRequest(device_id=self.device_id, election_id=self.election_id,
                                   updates=updates, atomicity=atomicity)
        try:
            self._stub.Write(request, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise P4RuntimeError(self._write_failure(exc, updates)) from None

    def _write_failure(self, exc: grpc.RpcError, updates: Sequence[p4r.Update]) -> str:
        failed = [(i, update, error) for i, (update, error) in enumerate(zip(updates, _status_errors(exc)))
                  if error.canonical_code != 0]
        lines = [f"{self.name}: Write failed: {_rpc_text(exc)}"]
        for i, update, error in failed[:MAX_ERROR_LINES]:
            lines.append(f"  update {i} ({_UPDATE_NAMES.get(update.type, update.type)} "
                         f"{self.describe(update.entity)}): {render_error(error)}")
        if len(failed) > MAX_ERROR_LINES:
            lines.append(f"  ... and {len(failed) - MAX_ERROR_LINES} more failed updates")
        return "\n".join(lines)

    def read(self, entities: Sequence[p4r.Entity | Any]) -> list[p4r.Entity]:
        """All entities matching the (possibly wildcard) request entities."""
        request = p4r.ReadRequest(device_id=self.device_id, entities=[_entity(e) for e in entities])
        try:
            return [e for reply in self._stub.Read(request, timeout=RPC_TIMEOUT_S) for e in reply.entities]
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"{self.name}: Read failed: {_rpc_text(exc)}") from None

    @staticmethod
    def insert(entity: Any) -> p4r.Update:
        return p4r.Update(type=INSERT, entity=_entity(entity))

    @staticmethod
    def modify(entity: Any) -> p4r.Update:
        return p4r.Update(type=MODIFY, entity=_entity(entity))

    @staticmethod
    def delete(entity: Any) -> p4r.Update:
        return p4r.Update(type=DELETE, entity=_entity(entity))

    # ------------------------------------------------------------------ entity builders

    def _info(self) -> P4InfoIndex:
        if self.index is None:
            raise EntityError(f"{self.name}: no P4Info yet: call set_pipeline() or use_p4info() first")
        return self.index

    def _lookup(self, kind: str, name: str) -> Any:
        try:
            return getattr(self._info(), kind)(name)
        except UnknownEntity as exc:
            raise EntityError(f"{self.name}: {exc}") from None

    def table_entry(self, table: str, match: Mapping[str, Any] | None = None, action: str | None = None,
                    params: Mapping[str, Value] | None = None, priority: int = 0,
                    is_default: bool = False) -> p4r.TableEntry:
        """A TableEntry by names; no match and no action makes a wildcard read request for `table`."""
        t = self._lookup("table", table)
        te = p4r.TableEntry(table_id=t.preamble.id, priority=priority, is_default_action=is_default)
        fields = {mf.name: mf for mf in t.match_fields}
        given = dict(match or {})
        for name in given:
            if name not in fields:
                raise EntityError(f"{self.name}: table {t.preamble.name} has no match field {name!r} "
                                  f"(fields: {', '.join(fields)})")
        for mf in t.match_fields:  # P4Info order, as servers answer reads
            if mf.name in given:
                fm = _field_match(mf, given[mf.name], f"{t.preamble.name} {mf.name}")
                if fm is not None:
                    te.match.append(fm)
        if action is not None:
            te.action.action.CopyFrom(self.action(action, params or {}))
        return te

    def action(self, action: str, params: Mapping[str, Value]) -> p4r.Action:
        a = self._lookup("action", action)
        known = {p.name: p for p in a.params}
        missing = [n for n in known if n not in params]
        extra = [n for n in params if n not in known]
        if missing or extra:
            problem = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}"
            raise EntityError(f"{self.name}: action {a.preamble.name}: parameters: {problem} "
                              f"(takes: {', '.join(known) or 'none'})")
        out = p4r.Action(action_id=a.preamble.id)
        for p in a.params:
            out.params.add(param_id=p.id, value=encode_value(params[p.name], p.bitwidth,
                                                             f"{a.preamble.name} {p.name}"))
        return out

    @staticmethod
    def multicast_group(group_id: int, replicas: Iterable[tuple[int, int]] = ()) -> p4r.PacketReplicationEngineEntry:
        """A multicast group; `replicas` are (port, instance/rid) pairs. No replicas = wildcard read."""
        group = p4r.MulticastGroupEntry(multicast_group_id=group_id,
                                        replicas=[_replica(port, rid) for port, rid in replicas])
        return p4r.PacketReplicationEngineEntry(multicast_group_entry=group)

    @staticmethod
    def clone_session(session_id: int, replicas: Iterable[tuple[int, int]] = (), class_of_service: int = 0,
                      packet_length_bytes: int = 0) -> p4r.PacketReplicationEngineEntry:
        session = p4r.CloneSessionEntry(session_id=session_id, class_of_service=class_of_service,
                                        packet_length_bytes=packet_length_bytes,
                                        replicas=[_replica(port, rid) for port, rid in replicas])
        return p4r.PacketReplicationEngineEntry(clone_session_entry=session)

    def counter_entry(self, counter: str, index: int | None = None) -> p4r.CounterEntry:
        ce = p4r.CounterEntry(counter_id=self._lookup("counter", counter).preamble.id)
        if index is not None:
            ce.index.index = index
        return ce

    def direct_counter_entry(self, table_entry: p4r.TableEntry) -> p4r.DirectCounterEntry:
        return p4r.DirectCounterEntry(table_entry=table_entry)

    def register_entry(self, register: str, index: int | None = None, value: int | None = None) -> p4r.RegisterEntry:
        r = self._lookup("register", register)
        re = p4r.RegisterEntry(register_id=r.preamble.id)
        if index is not None:
            re.index.index = index
        if value is not None:
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            re.data.CopyFrom(p4d.P4Data(bitstring=encode_value(value, width, f"{r.preamble.name}[{index}]")))
        return re

    def describe(self, entity: p4r.Entity) -> str:
        """A short name for an entity in error messages: 'table AggIngress.agg_job', 'multicast group 5'."""
        kind = entity.WhichOneof("entity")
        names = self.index
        if kind == "table_entry":
            return f"table {names.name(entity.table_entry.table_id) if names else entity.table_entry.table_id}"
        if kind == "packet_replication_engine_entry":
            pre = entity.packet_replication_engine_entry
            if pre.HasField("multicast_group_entry"):
                return f"multicast group {pre.multicast_group_entry.multicast_group_id}"
            return f"clone session {pre.clone_session_entry.session_id}"
        if kind == "register_entry":
            return f"register {names.name(entity.register_entry.register_id) if names else ''}"
        return kind or "empty entity"

    # ------------------------------------------------------------------ reads by name

    def read_counter(self, counter: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) of an indirect counter (all cells when index is None)."""
        return {e.counter_entry.index.index: (e.counter_entry.data.packet_count, e.counter_entry.data.byte_count)
                for e in self.read([self.counter_entry(counter, index)])}

    def read_direct_counter(self, table_entry: p4r.TableEntry) -> tuple[int, int]:
        """(packets, bytes) of one entry's direct counter.

        An entry whose fields are all don't-care has an empty match, which reads as a wildcard:
        pick the answer with this entry's key.
        """
        wanted = entry_key(table_entry)
        for e in self.read([self.direct_counter_entry(table_entry)]):
            if entry_key(e.direct_counter_entry.table_entry) == wanted:
                data = e.direct_counter_entry.data
                return data.packet_count, data.byte_count
        raise P4RuntimeError(f"{self.name}: no direct counter for that entry of {self.describe(_entity(table_entry))}")

    def register_read(self, register: str, index: int | None = None) -> dict[int, int]:
        """index -> value (all cells when index is None); over the side channel if one is configured."""
        if self.side_channel is not None:
            reply = self.side_command(f"register_read {register}" + ("" if index is None else f" {index}"))
            values = [int(v, 0) for v in reply.split()]
            return {index: values[0]} if index is not None else dict(enumerate(values))
        return {e.register_entry.index.index: decode_value(e.register_entry.data.bitstring)
                for e in self.read([self.register_entry(register, index)])}

    def register_write(self, register: str, values: Mapping[int, int]) -> None:
        """Write register cells {index: value}; over the side channel if one is configured."""
        self._writable("register_write")
        if self.side_channel is not None:
            self._side([f"register_write {register} {index} {value}" for index, value in values.items()])
            return
        self.write([self.modify(self.register_entry(register, i, v)) for i, v in values.items()])

    # ------------------------------------------------------------------ traffic manager (side channel)

    def side_command(self, line: str) -> str:
        """One simple_switch_CLI-shaped command on the switch's side channel; the reply after 'ok'."""
        return self._side([line])[0]

    def _side(self, lines: Sequence[str]) -> list[str]:
        """Command lines in one batch on the side channel (one CLI process on BMv2)."""
        if self.side_channel is None:
            raise P4RuntimeError(f"{self.name}: no side channel configured for '{lines[0].split()[0]}'")
        try:
            return self.side_channel.run(lines)
        except SideChannelError as exc:
            raise P4RuntimeError(f"{self.name}: {exc}") from None

    def set_queue_rate(self, pps: float, port: int | None = None) -> None:
        self._writable("set_queue_rate")
        self.side_command(f"set_queue_rate {pps:g}" + ("" if port is None else f" {port}"))

    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        self._writable("set_queue_depth")
        self.side_command(f"set_queue_depth {packets}" + ("" if port is None else f" {port}"))

    # ------------------------------------------------------------------ packets

    def packet_out(self, payload: bytes, metadata: Mapping[str, Value] | None = None) -> None:
        """Send a PacketOut; `metadata` fills the program's packet_out controller header by field name.

        Padding fields (names starting with '_') default to 0; every other field must be given.
        A rejected PacketOut shows up in `stream_errors` (the stream has no reply).
        """
        self._writable("PacketOut")
        packet = p4r.PacketOut(payload=payload)
        if metadata is not None:
            fields = {m.name: m for m in self._lookup("controller_metadata", "packet_out").metadata}
            unknown = [n for n in metadata if n not in fields]
            missing = [n for n in fields if n not in metadata and not n.startswith("_")]
            if unknown or missing:
                problem = f"has no field {unknown[0]!r}" if unknown else f"needs {', '.join(missing)}"
                raise EntityError(f"{self.name}: packet_out {problem} (fields: {', '.join(fields)})")
            for m in fields.values():
                value = metadata.get(m.name, 0)
                packet.metadata.add(metadata_id=m.id, value=encode_value(value, m.bitwidth, f"packet_out {m.name}"))
        self._requests.put(p4r.StreamMessageRequest(packet=packet))

    def packet_in(self, timeout: float = 1.0) -> p4r.PacketIn | None:
        """The next PacketIn, or None after `timeout` seconds."""
        try:
            return self.packet_ins.get(timeout=timeout)
        except queue.Empty:
            return None

    def packet_in_metadata(self, packet: p4r.PacketIn) -> dict[str, int]:
        """A PacketIn's metadata by the program's packet_in header field names."""
        names = {m.id: m.name for m in self._lookup("controller_metadata", "packet_in").metadata}
        return {names.get(m.metadata_id, str(m.metadata_id)): decode_value(m.value) for m in packet.metadata}

    # ------------------------------------------------------------------ helpers

    def _call(self, what: str, rpc: Any, request: Any) -> Any:
        try:
            return rpc(request, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"{self.name}: {what} failed: {_rpc_text(exc)}") from None


def _field_match(mf: p4i.MatchField, value: Any, what: str) -> p4r.FieldMatch | None:
    """One FieldMatch in canonical form; None for a don't-care (lpm /0, ternary mask 0, full range)."""
    width = mf.bitwidth
    fm = p4r.FieldMatch(field_id=mf.id)
    kind = mf.match_type
    if kind == p4i.MatchField.EXACT:
        fm.exact.value = encode_value(value, width, what)
    elif kind == p4i.MatchField.OPTIONAL:
        if value is None:
            return None
        fm.optional.value = encode_value(value, width, what)
    elif kind == p4i.MatchField.LPM:
        v, plen = _pair(value, what, "(value, prefix_len)")
        if not 0 <= plen <= width:
            raise EntityError(f"{what}: prefix length {plen} is outside 0..{width}")
        if plen == 0:
            return None
        mask = ((1 << plen) - 1) << (width - plen)
        fm.lpm.value = encode_value(to_int(v, what) & mask, width, what)
        fm.lpm.prefix_len = plen
    elif kind == p4i.MatchField.TERNARY:
        v, m = _pair(value, what, "(value, mask)")
        mask = to_int(m, what)
        if mask == 0:
            return None
        fm.ternary.mask = encode_value(mask, width, what)
        fm.ternary.value = encode_value(to_int(v, what) & mask, width, what)
    elif kind == p4i.MatchField.RANGE:
        lo, hi = (to_int(x, what) for x in _pair(value, what, "(low, high)"))
        if lo > hi:
            raise EntityError(f"{what}: range low {lo} is above high {hi}")
        if lo == 0 and hi == (1 << width) - 1:
            return None
        fm.range.low, fm.range.high = encode_value(lo, width, what), encode_value(hi, width, what)
    else:
        raise EntityError(f"{what}: match type {kind} is not supported")
    return fm


def _pair(value: Any, what: str, shape: str) -> tuple[Any, Any]:
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return value[0], value[1]
    raise EntityError(f"{what}: expected {shape}, got {value!r}")


def _replica(port: int, rid: int) -> p4r.Replica:
    return p4r.Replica(port=encode_value(port, 32, "replica port"), instance=rid)


def _entity(thing: Any) -> p4r.Entity:
    """Wrap a TableEntry / PRE entry / CounterEntry / ... into an Entity."""
    if isinstance(thing, p4r.Entity):
        return thing
    field = {p4r.TableEntry: "table_entry", p4r.PacketReplicationEngineEntry: "packet_replication_engine_entry",
             p4r.CounterEntry: "counter_entry", p4r.DirectCounterEntry: "direct_counter_entry",
             p4r.RegisterEntry: "register_entry", p4r.DigestEntry: "digest_entry"}.get(type(thing))
    if field is None:
        raise TypeError(f"not a P4Runtime entity: {type(thing).__name__}")
    entity = p4r.Entity()
    getattr(entity, field).CopyFrom(thing)
    return entity


def _status_errors(exc: grpc.RpcError) -> list[p4r.Error]:
    """The per-update p4.v1.Errors of a failed Write (empty when the server sent none)."""
    for key, value in (exc.trailing_metadata() or ()):
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            errors = []
            for detail in status.details:
                error = p4r.Error()
                if detail.Unpack(error):
                    errors.append(error)
            return errors
    return []


def _rpc_text(exc: grpc.RpcError) -> str:
    code = exc.code()
    return f"{code.name if code else 'UNKNOWN'}: {exc.details() or 'no details'}"
