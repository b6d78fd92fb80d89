"""A small synchronous P4Runtime client on finsy's typed entities: one `SwitchConnection` per switch.

Entities are finsy's classes (`P4TableEntry`, `P4TableMatch`, `P4TableAction`, `P4MulticastGroupEntry`,
`P4CloneSessionEntry`, `P4CounterEntry`, `P4DirectCounterEntry`, `P4RegisterEntry`, `P4MeterEntry`,
...) addressed by P4 names, encoded and decoded through the `finsy.P4Schema` of the switch's pipeline:

    conn = SwitchConnection("127.0.0.1:50001", device_id=1)   # becomes primary or raises
    conn.set_pipeline(p4info, source.encode())
    route = P4TableEntry("AggIngress.ipv4_lpm", match=P4TableMatch({"hdr.ipv4.dstAddr": ("10.0.0.1", 32)}),
                         action=P4TableAction("AggIngress.ipv4_forward", dstAddr="00:00:00:00:00:01", port=1))
    conn.write([conn.insert(route)])
    conn.read([P4TableEntry("AggIngress.ipv4_lpm")])           # wildcard read: [P4TableEntry(...), ...]
    conn.close()

Values are what finsy takes (p4values: ints, "10.0.0.1", "00:00:00:00:00:01", lpm `(v, len)` or
"v/len", ternary `(v, mask)`, range `(lo, hi)`, optional `v`; `None` is a don't-care).

Reads come back in one canonical form (`normalize`): full P4 names (`AggIngress.ipv4_lpm`,
`hdr.ipv4.dstAddr`, `AggIngress.ipv4_forward`), values as finsy decodes them (ints), don't-care
matches absent, replicas sorted. `conn.canonical(entity)` puts a hand-built entity in the same
form, so "does the switch hold what I want" is `==` on typed values (see `diff_entities`).
finsy alone decodes to aliases (a table's shortest unique suffix; a match field's last name part,
which is not unique in general) and leaves three canonical-form rules of P4Runtime to the caller
(ternary values masked, a full range omitted, low <= high); `normalize` adds them.

`SwitchConnection(..., tls=TlsFiles(cacert, cert, key))` connects over TLS: `cacert` checks the
switch's certificate, `cert` and `key` are the controller's own for a switch that requires client
certificates (`aggnet switch --grpc-server-with-client-auth`).

`SwitchConnection(address, device_id, read_only=True)` opens no stream and takes no part in
arbitration, so it can read (counters, tables, registers) from a switch another controller
owns without taking the primary role away; P4Runtime allows Read from any client. Without a
`p4info` argument it uses the P4Info of the pipeline the switch runs. Anything that writes or
needs the stream raises P4RuntimeError.

Registers and queue settings: BMv2's P4Runtime cannot access registers and P4Runtime has
no queue message. `SwitchConnection.register_read/register_write` use P4Runtime unless
the connection was given a side channel (`side_channel`, controller.switch_cli: the
embedded switch's TCP line protocol or BMv2's simple_switch_CLI, both taking the same
command lines), and `set_queue_rate` / `set_queue_depth` always use the side channel:
callers see one interface, whatever the target.
"""
from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import grpc
from finsy import (
    P4CloneSessionEntry,
    P4CounterEntry,
    P4DigestEntry,
    P4DirectCounterEntry,
    P4DirectMeterEntry,
    P4MeterEntry,
    P4MulticastGroupEntry,
    P4PacketIn,
    P4PacketOut,
    P4RegisterEntry,
    P4RuntimeVersion,
    P4Schema,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
    p4values,
)
from finsy.p4entity import P4Replica, decode_entity
from finsy.p4schema import P4MatchField, P4MatchType, P4Table
from finsy.proto import p4i, p4r, p4r_grpc, rpc_status

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from controller.switch_cli import SideChannel
from p4target.sidechannel import SideChannelError
from p4target.tls import TlsFiles, channel_credentials

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
_UPDATE_NAMES = {INSERT: "INSERT", MODIFY: "MODIFY", DELETE: "DELETE"}
# Replicas carry their port as bytes (`Replica.port`, P4Runtime 1.4+); finsy picks that encoding
# from 1.5 on. Both targets (the embedded one and BMv2) accept it.
P4RUNTIME_VERSION = P4RuntimeVersion(1, 5, 0, "")
ARBITRATION_TIMEOUT_S = 10.0
ARBITRATION_RETRY_S = 0.2  # between attempts while the switch still holds our election id
RPC_TIMEOUT_S = 60.0
MAX_ERROR_LINES = 10  # failed updates listed in a Write error; the rest are counted
# A failed Write answers one p4.v1.Error per update in trailing metadata; big batches need room.
_CHANNEL_OPTIONS = [("grpc.max_metadata_size", 64 << 20), ("grpc.max_receive_message_length", 256 << 20),
                    ("grpc.max_send_message_length", 256 << 20)]
# Entities named by one P4Info object: (attribute, schema collection, what it is called).
_NAMED_BY: dict[type, tuple[str, str, str]] = {P4CounterEntry: ("counter_id", "counters", "counter"),
             P4DirectCounterEntry: ("counter_id", "direct_counters", "direct counter"),
             P4RegisterEntry: ("register_id", "registers", "register"),
             P4MeterEntry: ("meter_id", "meters", "meter"),
             P4DigestEntry: ("digest_id", "digests", "digest")}

E = TypeVar("E", bound="DataclassInstance")


class P4RuntimeError(Exception):
    """A failed P4Runtime operation; the message names the switch and says what failed (one
    line per failed update for writes)."""

    exit_code = 1


class _StreamRefused(P4RuntimeError):
    """The switch ended the stream with an error; `election_id_in_use`: because another stream holds
    our election id (P4Runtime's INVALID_ARGUMENT), which may be our own previous one, still closing."""

    def __init__(self, message: str, election_id_in_use: bool):
        super().__init__(message)
        self.election_id_in_use = election_id_in_use


class EntityError(P4RuntimeError):
    """An entity that cannot be encoded with the P4Info (unknown name, value too wide)."""

    exit_code = 2


# ---------------------------------------------------------------------------- schema and canonical form

def load_schema(p4info: p4i.P4Info) -> P4Schema:
    """finsy's schema of `p4info`; ValueError (one line) for a P4Info finsy cannot model.

    finsy also indexes a match field by the last part of its name (`dstAddr` for
    `hdr.ipv4.dstAddr`) and fails on a table where two fields share it; name them here.
    """
    for table in p4info.tables:
        seen: dict[str, str] = {}
        for field in table.match_fields:
            last = field.name.rsplit(".", 1)[-1]
            if last in seen:
                raise ValueError(f"table {table.preamble.name}: match fields {seen[last]} and {field.name} both end "
                                 f"in {last!r}, which finsy's P4Schema cannot tell apart")
            seen[last] = field.name
    schema = P4Schema(p4info)
    schema.set_p4runtime_version(P4RUNTIME_VERSION)
    return schema


def normalize(entity: E, schema: P4Schema) -> E:
    """`entity` with full P4 names, canonical match values and sorted replicas; ValueError naming
    what is wrong (unknown name, missing parameter, bad value). See the module docstring."""
    if isinstance(entity, P4TableEntry):
        return _normalize_table_entry(entity, schema)  # type: ignore[return-value]
    if isinstance(entity, (P4DirectCounterEntry, P4DirectMeterEntry)) and entity.table_entry is not None:
        entity = dataclasses.replace(entity, table_entry=_normalize_table_entry(entity.table_entry, schema))
    if isinstance(entity, (P4MulticastGroupEntry, P4CloneSessionEntry)):
        return dataclasses.replace(entity, replicas=tuple(sorted(entity.replicas, key=_replica_order)))
    named = _NAMED_BY.get(type(entity))
    if named is not None and getattr(entity, named[0]):
        attr, collection, kind = named
        found = _find(getattr(schema, collection), getattr(entity, attr), kind)
        entity = dataclasses.replace(entity, **{attr: found.name})
        if isinstance(entity, P4RegisterEntry) and entity.data is not None:
            with _about(describe(entity)):
                found.type_spec.encode_data(entity.data)
    return entity


def _normalize_table_entry(entry: P4TableEntry, schema: P4Schema) -> P4TableEntry:
    if not entry.table_id:  # every table: a wildcard read
        return entry
    table = _find(schema.tables, entry.table_id, "table")
    given = {}
    for key, value in (entry.match or {}).items():
        field = table.match_fields.get(key)
        if field is None:
            raise ValueError(f"table {table.name} has no match field {key!r} "
                             f"(fields: {', '.join(f.name for f in table.match_fields)})")
        given[field.name] = value
    match = P4TableMatch()
    for field in table.match_fields:  # P4Info order, as servers answer reads
        with _about(f"table {table.name} {field.name}"):
            value = _canonical_value(field, given.get(field.name))
        if value is not None:
            match[field.name] = value
    action = entry.action
    if isinstance(action, P4TableAction):
        action = _normalize_action(action, table)
    return dataclasses.replace(entry, table_id=table.name, match=match or None, action=action)


def _canonical_value(field: P4MatchField, value: Any) -> Any:
    """A match value in the form P4Runtime requires (spec 9.1.1), or None for a don't-care (or, for
    an exact field, absent: fine in a read request, refused by the switch in a write)."""
    width, kind = field.bitwidth, field.match_type
    if value is None:
        return None
    if kind == P4MatchType.TERNARY:
        data, mask = (int.from_bytes(b, "big") for b in p4values.encode_ternary(value, width))
        return None if mask == 0 else (data & mask, mask)
    if kind == P4MatchType.RANGE:
        low, high = (int.from_bytes(b, "big") for b in p4values.encode_range(value, width))
        if low > high:
            raise ValueError(f"range low {low} is above high {high}")
        return None if (low, high) == (0, (1 << width) - 1) else (low, high)
    return None if field.encode_field(value) is None else value  # finsy omits a /0 lpm


def _normalize_action(action: P4TableAction, table: P4Table) -> P4TableAction:
    ref = table.actions.get(action.name)
    if ref is None:
        raise ValueError(f"table {table.name} has no action {action.name!r} "
                         f"(actions: {', '.join(a.name for a in table.actions)})")
    known = [p.name for p in ref.params]
    missing = [n for n in known if n not in action.args]
    extra = [n for n in action.args if n not in known]
    if missing or extra:
        problem = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}"
        raise ValueError(f"action {ref.name}: parameters: {problem} (takes: {', '.join(known) or 'none'})")
    for param in ref.params:
        with _about(f"action {ref.name} {param.name}"):
            param.encode_param(action.args[param.name])
    return P4TableAction(ref.name, **{n: action.args[n] for n in known})


def _find(entities: Any, key: str, kind: str) -> Any:
    found = entities.get(key)
    if found is None:
        raise ValueError(f"P4Info has no {kind} {key!r}")
    return found


@contextlib.contextmanager
def _about(what: str) -> Iterator[None]:
    """A ValueError raised inside gets `what` in front."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _replica_order(replica: Any) -> tuple[int, int]:
    """A replica as finsy takes it (port, (port, instance) or P4Replica) as (port, instance)."""
    if isinstance(replica, P4Replica):
        return replica.port, replica.instance
    if isinstance(replica, int):
        return replica, 0
    return tuple(replica)


def entry_key(entry: P4TableEntry) -> tuple:
    """What identifies a table entry on a switch: table, match, priority, default-ness (a canonical entry)."""
    return entry.table_id, tuple(sorted((entry.match or {}).items())), entry.priority, entry.is_default_action


def describe(entity: Any) -> str:
    """A short name for an entity in messages: 'table AggIngress.agg_job', 'multicast group 5'."""
    if isinstance(entity, P4TableEntry):
        return f"table {entity.table_id or '(all)'}"
    if isinstance(entity, P4MulticastGroupEntry):
        return f"multicast group {entity.multicast_group_id}"
    if isinstance(entity, P4CloneSessionEntry):
        return f"clone session {entity.session_id}"
    named = _NAMED_BY.get(type(entity))
    if named is not None:
        index = getattr(entity, "index", None)
        return f"{named[2]} {getattr(entity, named[0])}" + ("" if index is None else f"[{index}]")
    return type(entity).__name__


@dataclasses.dataclass
class EntityDiff(Generic[E]):
    """What to write so a switch holds the wanted entities: each list in the order given."""

    insert: list[E]
    modify: list[E]
    delete: list[E]


def diff_entities(want: Iterable[E], have: Iterable[E], key: Callable[[E], Hashable],
                  value: Callable[[E], Any] = lambda e: e) -> EntityDiff[E]:
    """Compare canonical entities by typed value: insert the wanted ones missing, modify those whose
    `value` differs (the wanted entity), delete the ones held but not wanted (the held entity)."""
    held = {key(e): e for e in have}
    wanted = {key(e): e for e in want}
    return EntityDiff(insert=[e for k, e in wanted.items() if k not in held],
                      modify=[e for k, e in wanted.items() if k in held and value(held[k]) != value(e)],
                      delete=[e for k, e in held.items() if k not in wanted])


_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def render_error(error: p4r.Error) -> str:
    """One per-update error as 'CODE: message'."""
    code = _CODE_NAMES.get(error.canonical_code, f"code {error.canonical_code}")
    return f"{code}: {error.message}" if error.message else code


# ---------------------------------------------------------------------------- the connection

class SwitchConnection:
    """One P4Runtime session to one device: primary arbitration, pipeline, writes, reads, packets.

    The StreamChannel runs in a background thread; PacketIns land in `packet_ins` (a queue of
    p4r.PacketIn, decoded by `packet_in`), stream errors in `stream_errors`. With
    `read_only=True` there is no stream and no arbitration: reads only (see the module docstring).
    """

    def __init__(self, address: str, device_id: int, election_id: tuple[int, int] = (0, 1),
                 name: str | None = None, p4info: p4i.P4Info | None = None, side_channel: SideChannel | None = None,
                 arbitration_timeout: float = ARBITRATION_TIMEOUT_S, read_only: bool = False,
                 tls: TlsFiles | None = None):
        self.address = address
        self.device_id = device_id
        self.name = name or f"device {device_id} at {address}"
        self.read_only = read_only
        self.election_id = p4r.Uint128(high=election_id[0], low=election_id[1])
        self.side_channel = side_channel
        self.schema: P4Schema | None = None
        self.packet_ins: queue.Queue[p4r.PacketIn] = queue.Queue()
        self.stream_errors: queue.Queue[p4r.StreamError] = queue.Queue()
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._arbitration: queue.Queue[p4r.MasterArbitrationUpdate | Exception] = queue.Queue()
        if tls is None:
            self._transport = "insecure"
            self._channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        else:
            self._transport = "TLS" + (" client-certificate" if tls.cert else "")
            self._channel = grpc.secure_channel(address, channel_credentials(tls), options=_CHANNEL_OPTIONS)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._stream: Any = None  # grpc's response iterator, which also has cancel()
        self._thread = self._receiver()
        try:
            if p4info is not None:
                self.use_p4info(p4info)
            if not read_only:
                self._become_primary(arbitration_timeout)
            elif self.schema is None:
                self.use_running_p4info()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ session

    def _receiver(self) -> threading.Thread:
        return threading.Thread(target=self._receive, name=f"p4rt-{self.name}", daemon=True)

    def _become_primary(self, timeout: float) -> None:
        """Open the stream and win arbitration. A switch that still holds our election id (the stream
        of a client that just closed, whose end it has not processed yet: a restarted controller) is
        asked again with a new stream until `timeout`; P4Runtime answers that with INVALID_ARGUMENT."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self._arbitrate(deadline)
            if not (isinstance(reply, _StreamRefused) and reply.election_id_in_use
                    and time.monotonic() + ARBITRATION_RETRY_S < deadline):
                break
            self._requests.put(None)  # that stream is over: end its request iterator, start afresh
            self._thread.join(timeout=1)
            self._requests, self._arbitration, self._thread = queue.Queue(), queue.Queue(), self._receiver()
            time.sleep(ARBITRATION_RETRY_S)
        if reply is None:
            raise P4RuntimeError(f"{self.name}: no arbitration answer within {timeout:g} s")
        if isinstance(reply, Exception):
            raise reply
        if reply.status.code != 0:
            primary = (reply.election_id.high << 64) | reply.election_id.low
            mine = (self.election_id.high << 64) | self.election_id.low
            raise P4RuntimeError(f"{self.name}: not primary (our election id {mine}, primary's {primary}): "
                                 f"{reply.status.message or 'another controller is primary'}")

    def _arbitrate(self, deadline: float) -> p4r.MasterArbitrationUpdate | Exception | None:
        """One stream and its arbitration request: the switch's answer, why there is none, or None by
        the deadline."""
        self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
        self._thread.start()
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=self.election_id)))
        try:
            return self._arbitration.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def _receive(self) -> None:
        assert self._stream is not None, "the stream opens before the receiving thread starts"
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
                self._arbitration.put(_StreamRefused(f"{self.name}: stream: {_rpc_text(exc, self._transport)}",
                                                     exc.code() == grpc.StatusCode.INVALID_ARGUMENT
                                                     and "election id" in (exc.details() or "").lower()))

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

    def __enter__(self) -> SwitchConnection:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ pipeline

    def _writable(self, what: str) -> None:
        """Refuse `what` on a read-only connection, before anything reaches the switch."""
        if self.read_only:
            raise P4RuntimeError(f"{self.name}: {what} needs a primary connection; this one is read-only")

    def set_pipeline(self, p4info: p4i.P4Info, device_config: bytes, cookie: int = 0) -> None:
        """Push P4Info + device config (VERIFY_AND_COMMIT); later entities are encoded with this P4Info."""
        self._writable("SetForwardingPipelineConfig")
        schema = self._load_schema(p4info)
        config = p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device_config)
        if cookie:
            config.cookie.cookie = cookie
        request = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self.election_id, config=config,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        self._call("SetForwardingPipelineConfig", self._stub.SetForwardingPipelineConfig, request)
        self.schema = schema

    def pipeline_cookie(self) -> int | None:
        """The cookie of the installed pipeline; None when there is no pipeline or no cookie."""
        request = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            reply = self._stub.GetForwardingPipelineConfig(request, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise P4RuntimeError(f"{self.name}: GetForwardingPipelineConfig: {_rpc_text(exc, self._transport)}") from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    def use_p4info(self, p4info: p4i.P4Info) -> None:
        """Encode and decode with `p4info` (the switch already runs that pipeline)."""
        self.schema = self._load_schema(p4info)

    def use_running_p4info(self) -> None:
        """Encode and decode with the P4Info of the pipeline the switch runs (asked from the switch)."""
        request = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        reply = self._call("GetForwardingPipelineConfig", self._stub.GetForwardingPipelineConfig, request)
        self.use_p4info(reply.config.p4info)

    def _load_schema(self, p4info: p4i.P4Info) -> P4Schema:
        try:
            return load_schema(p4info)
        except ValueError as exc:
            raise EntityError(f"{self.name}: {exc}") from None

    def _schema(self) -> P4Schema:
        if self.schema is None:
            raise EntityError(f"{self.name}: no P4Info yet: call set_pipeline() or use_p4info() first")
        return self.schema

    # ------------------------------------------------------------------ entities

    def encode(self, entity: Any) -> p4r.Entity:
        """The P4Runtime Entity of a typed entity, checked and in canonical form (EntityError if wrong)."""
        schema = self._schema()
        try:
            return normalize(entity, schema).encode(schema)
        except ValueError as exc:
            raise EntityError(f"{self.name}: {exc}") from None

    def decode(self, message: p4r.Entity) -> Any:
        """The typed entity of a P4Runtime Entity, names and values in canonical form."""
        schema = self._schema()
        try:
            return normalize(decode_entity(message, schema), schema)
        except (ValueError, KeyError) as exc:
            raise EntityError(f"{self.name}: cannot decode {message.WhichOneof('entity')}: {exc}") from None

    def canonical(self, entity: E) -> E:
        """`entity` as a read would return it, so it compares equal to what the switch holds."""
        return self.decode(self.encode(entity))

    def insert(self, entity: Any) -> p4r.Update:
        return p4r.Update(type=INSERT, entity=self.encode(entity))

    def modify(self, entity: Any) -> p4r.Update:
        return p4r.Update(type=MODIFY, entity=self.encode(entity))

    def delete(self, entity: Any) -> p4r.Update:
        return p4r.Update(type=DELETE, entity=self.encode(entity))

    # ------------------------------------------------------------------ write / read

    def write(self, updates: Sequence[p4r.Update],
              atomicity: p4r.WriteRequest.Atomicity.ValueType = p4r.WriteRequest.CONTINUE_ON_ERROR) -> None:
        """Send one batch (from insert/modify/delete). Raises P4RuntimeError with one line per failed update."""
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
        lines = [f"{self.name}: Write failed: {_rpc_text(exc, self._transport)}"]
        for i, update, error in failed[:MAX_ERROR_LINES]:
            lines.append(f"  update {i} ({_UPDATE_NAMES.get(update.type, update.type)} "
                         f"{describe(self.decode(update.entity))}): {render_error(error)}")
        if len(failed) > MAX_ERROR_LINES:
            lines.append(f"  ... and {len(failed) - MAX_ERROR_LINES} more failed updates")
        return "\n".join(lines)

    def read(self, entities: Sequence[Any]) -> list[Any]:
        """Every entity matching the (possibly wildcard) typed request entities, decoded."""
        request = p4r.ReadRequest(device_id=self.device_id, entities=[self.encode(e) for e in entities])
        try:
            replies = [e for reply in self._stub.Read(request, timeout=RPC_TIMEOUT_S) for e in reply.entities]
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"{self.name}: Read failed: {_rpc_text(exc, self._transport)}") from None
        return [self.decode(e) for e in replies]

    # ------------------------------------------------------------------ reads by name

    def read_counter(self, counter: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) of an indirect counter (all cells when index is None)."""
        return {e.index: (e.packet_count, e.byte_count) for e in self.read([P4CounterEntry(counter, index=index)])}

    def read_direct_counter(self, table_entry: P4TableEntry) -> tuple[int, int]:
        """(packets, bytes) of one entry's direct counter.

        An entry whose fields are all don't-care has an empty match, which reads as a wildcard:
        pick the answer with this entry's key.
        """
        wanted = entry_key(self.canonical(table_entry))
        for e in self.read([P4DirectCounterEntry(table_entry=table_entry)]):
            if entry_key(e.table_entry) == wanted:
                return e.packet_count, e.byte_count
        raise P4RuntimeError(f"{self.name}: no direct counter for that entry of {describe(table_entry)}")

    def register_read(self, register: str, index: int | None = None) -> dict[int, int]:
        """index -> value (all cells when index is None); over the side channel if one is configured."""
        if self.side_channel is not None:
            reply = self.side_command(f"register_read {register}" + ("" if index is None else f" {index}"))
            values = [int(v, 0) for v in reply.split()]
            return {index: values[0]} if index is not None else dict(enumerate(values))
        return {e.index: e.data for e in self.read([P4RegisterEntry(register, index=index)])}

    def register_write(self, register: str, values: Mapping[int, int]) -> None:
        """Write register cells {index: value}; over the side channel if one is configured."""
        self.write_registers({register: values})

    def write_registers(self, cells: Mapping[str, Mapping[int, int]]) -> None:
        """Write cells {register: {index: value}} in one batch: one Write, or one side-channel batch
        (on BMv2 one simple_switch_CLI process, which takes about a second to start)."""
        self._writable("register_write")
        writes = [(register, index, value) for register, values in cells.items() for index, value in values.items()]
        if self.side_channel is not None:
            self._side([f"register_write {register} {index} {value}" for register, index, value in writes])
            return
        self.write([self.modify(P4RegisterEntry(register, index=index, data=value)) for register, index, value in writes])

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

    def packet_out(self, payload: bytes, metadata: Mapping[str, Any] | None = None) -> None:
        """Send a PacketOut; `metadata` fills the program's packet_out controller header by field name.

        Padding fields (names starting with '_') default to 0; every other field must be given.
        A rejected PacketOut shows up in `stream_errors` (the stream has no reply).
        """
        self._writable("PacketOut")
        if metadata is None:
            self._requests.put(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=payload)))
            return
        schema = self._schema()
        header = schema.controller_packet_metadata.get("packet_out")
        fields = [m.name for m in header.metadata] if header is not None else []
        unknown = [n for n in metadata if n not in fields]
        missing = [n for n in fields if n not in metadata and not n.startswith("_")]
        if unknown or missing:
            problem = f"has no field {unknown[0]!r}" if unknown else f"needs {', '.join(missing)}"
            raise EntityError(f"{self.name}: packet_out {problem} (fields: {', '.join(fields) or 'none'})")
        packet = P4PacketOut(payload, **{n: metadata.get(n, 0) for n in fields})
        try:
            self._requests.put(packet.encode_update(schema))
        except ValueError as exc:
            raise EntityError(f"{self.name}: packet_out: {exc}") from None

    def packet_in(self, timeout: float = 1.0) -> P4PacketIn | None:
        """The next PacketIn, its metadata by the packet_in header's field names; None after `timeout` s."""
        try:
            packet = self.packet_ins.get(timeout=timeout)
        except queue.Empty:
            return None
        return P4PacketIn.decode(p4r.StreamMessageResponse(packet=packet), self._schema())

    # ------------------------------------------------------------------ helpers

    def _call(self, what: str, rpc: Any, request: Any) -> Any:
        try:
            return rpc(request, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"{self.name}: {what} failed: {_rpc_text(exc, self._transport)}") from None


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


def _rpc_text(exc: grpc.RpcError, transport: str) -> str:
    """`CODE: details`; for a switch that cannot be reached, also how we tried (a TLS mismatch looks like that)."""
    code = exc.code()
    text = f"{code.name if code else 'UNKNOWN'}: {exc.details() or 'no details'}"
    if code == grpc.StatusCode.UNAVAILABLE:
        text += f" (switch down, or it refused this {transport} connection)"
    return text
