"""The P4Runtime view of one switch: its forwarding pipeline config and runtime state.

The device config (`ForwardingPipelineConfig.p4_device_config`) carries the P4 program's
source text, UTF-8, self-contained apart from the standard includes (`core.p4`,
`v1model.p4`). The target compiles it with its own front end, computes the P4Info, and
refuses the config (INVALID_ARGUMENT, naming the first differences) when the P4Info sent
by the client does not match that one; documentation, annotations and pkg_info are not
compared.

This module knows no gRPC: the server turns its RuntimeStatus failures into RPC statuses.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from finsy.proto import p4i, p4r
from google.protobuf.descriptor import FieldDescriptor

from p4target import load
from p4target.errors import P4Error
from p4target.limits import DEFAULT_STATE_CAP_MB, READ_BATCH, WRITE_RUN
from p4target.runtime import batch, codec
from p4target.runtime.errors import RuntimeStatus, invalid
from p4target.runtime.translate import MODIFY, Translator
from p4target.state import StateError

DEVICE_CONFIG_FILENAME = "device_config.p4"
Action = p4r.SetForwardingPipelineConfigRequest
ResponseType = p4r.GetForwardingPipelineConfigRequest


def no_pipeline() -> RuntimeStatus:
    # Wording matters: clients (finsy) recognize "no ... forwarding pipeline config".
    return RuntimeStatus(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set for this device")


@dataclass
class LoadedConfig:
    """A compiled ForwardingPipelineConfig: what the client sent plus the live objects."""

    p4info: p4i.P4Info
    device_config: bytes
    cookie: int | None
    pipeline: Any  # a p4target.pipeline.Pipeline or a NativePipeline: the same methods, no common base
    translator: Translator


def compile_source(source: str, filename: str, engine: str = "python",
                   state_cap_mb: int = DEFAULT_STATE_CAP_MB) -> tuple[p4i.P4Info, Any]:
    """(P4Info, pipeline on `engine`) of a P4 program; INVALID_ARGUMENT carrying the "FILE:LINE:COL: error:" line,
    RESOURCE_EXHAUSTED when its state may exceed `state_cap_mb`."""
    try:
        loaded = load.from_source(source, filename, engine)  # for the native engine, lowered and printed once per machine
    except P4Error as exc:
        raise invalid(str(exc)) from None
    assert loaded.p4info is not None, "our front end gives the P4Info"
    return loaded.p4info, _capped_pipeline(loaded, filename, engine, state_cap_mb)


def load_bmv2_json(data: bytes, filename: str, engine: str = "python", state_cap_mb: int = DEFAULT_STATE_CAP_MB,
                   p4info: p4i.P4Info | None = None) -> Any:
    """A pipeline running p4c's BMv2 JSON (what the JSON lacks, as action scopes, from `p4info` when given);
    INVALID_ARGUMENT naming the JSON path of a malformed part."""
    try:
        loaded = load.from_json(data, filename, p4info)
    except P4Error as exc:
        raise invalid(str(exc)) from None
    return _capped_pipeline(loaded, filename, engine, state_cap_mb)


def _capped_pipeline(loaded: load.Loaded, filename: str, engine: str, state_cap_mb: int) -> Any:
    """The program's pipeline, once its declared state is known to fit the switch's cap (nothing allocated before)."""
    try:
        return load.pipeline(loaded, engine, state_cap_mb=state_cap_mb)
    except StateError as exc:
        raise RuntimeStatus(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{filename}: error: {exc}") from None
    except P4Error as exc:
        raise invalid(str(exc)) from None


def compile_config(config: p4r.ForwardingPipelineConfig, engine: str = "python",
                   state_cap_mb: int = DEFAULT_STATE_CAP_MB) -> LoadedConfig:
    """Compile the config's program (P4 source, or p4c's BMv2 JSON as BMv2 takes it) and check its
    P4Info; INVALID_ARGUMENT if either fails. With JSON, the client's P4Info names the objects."""
    from p4target.device_config import bmv2_json_in

    if not config.HasField("p4info"):
        raise invalid("ForwardingPipelineConfig has no p4info")
    cookie = config.cookie.cookie if config.HasField("cookie") else None
    json_data = bmv2_json_in(config.p4_device_config)
    if json_data is not None:
        pipeline = load_bmv2_json(json_data, "p4_device_config.json", engine, state_cap_mb, config.p4info)
        return LoadedConfig(config.p4info, config.p4_device_config, cookie, pipeline,
                            Translator(config.p4info, pipeline.state))
    try:
        source = config.p4_device_config.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(f"p4_device_config must be the P4 source as UTF-8 text: {exc}") from None
    if not source.strip():
        raise invalid("p4_device_config is empty: it must carry the P4 program's source text")
    ours, pipeline = compile_source(source, DEVICE_CONFIG_FILENAME, engine, state_cap_mb)
    differences = p4info_differences(config.p4info, ours)
    if differences:
        shown = "; ".join(differences[:3]) + (f"; and {len(differences) - 3} more" if len(differences) > 3 else "")
        raise invalid(f"P4Info does not match the one computed from the P4 source: {shown}")
    return LoadedConfig(ours, config.p4_device_config, cookie, pipeline, Translator(ours, pipeline.state))


_IGNORED_FIELDS = frozenset({"doc", "annotations", "structured_annotations", "annotation_locations",
                             "source_location", "pkg_info"})


def _strip(message) -> None:
    """Remove documentation-only fields (recursively) so two P4Infos compare on substance."""
    for field, value in message.ListFields():
        if field.name in _IGNORED_FIELDS:
            message.ClearField(field.name)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                items = value.values() if value_field.type == FieldDescriptor.TYPE_MESSAGE else []
            elif field.is_repeated:
                items = value
            else:
                items = [value]
            for item in items:
                _strip(item)


def p4info_differences(sent: p4i.P4Info, ours: p4i.P4Info) -> list[str]:
    """Human-readable differences between two P4Infos, ignoring docs and annotations."""
    a, b = p4i.P4Info(), p4i.P4Info()
    a.CopyFrom(sent)
    b.CopyFrom(ours)
    _strip(a)
    _strip(b)
    out: list[str] = []
    for field in p4i.P4Info.DESCRIPTOR.fields:
        if field.name in _IGNORED_FIELDS:
            continue
        if not field.is_repeated:
            if getattr(a, field.name) != getattr(b, field.name):
                out.append(f"{field.name} differs")
            continue
        kind = field.name.rstrip("s").replace("_", " ")
        theirs = {e.preamble.name: e for e in getattr(a, field.name)}
        mine = {e.preamble.name: e for e in getattr(b, field.name)}
        for name in sorted(theirs.keys() - mine.keys()):
            out.append(f"{kind} '{name}' is not in the program")
        for name in sorted(mine.keys() - theirs.keys()):
            out.append(f"{kind} '{name}' is missing from the sent P4Info")
        for name in sorted(theirs.keys() & mine.keys()):
            x, y = theirs[name], mine[name]
            if x != y:
                parts = [f.name for f in x.DESCRIPTOR.fields if getattr(x, f.name) != getattr(y, f.name)]
                detail = ", ".join(parts)
                if "preamble" in parts and x.preamble.id != y.preamble.id:
                    detail += f" (id {x.preamble.id} sent, {y.preamble.id} computed)"
                out.append(f"{kind} '{name}' differs in {detail}")
    return out


class Device:
    """One P4Runtime device: config lifecycle (verify/save/commit/reconcile), writes, reads, packet I/O.

    `on_pipeline_set(pipeline)` runs after every commit so the packet path switches over.
    """

    def __init__(self, device_id: int, on_pipeline_set: Callable[[object], None] | None = None,
                 engine: str = "python"):
        self.device_id = device_id
        self.engine = engine  # which engine runs the programs committed here: python or native
        self.state_cap_mb = DEFAULT_STATE_CAP_MB  # the most a program's state may take (aggnet switch --max-state-mb)
        self.on_pipeline_set = on_pipeline_set
        self.lock = threading.RLock()
        self.current: LoadedConfig | None = None
        self.saved: LoadedConfig | None = None
        self._next_list_id = 1

    # ------------------------------------------------------------------ config

    def check_device_id(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise RuntimeStatus(grpc.StatusCode.NOT_FOUND, f"Unknown device id {device_id} (this is device {self.device_id})")

    def loaded(self) -> LoadedConfig:
        """The committed config; FAILED_PRECONDITION when none is set."""
        current = self.current
        if current is None:
            raise no_pipeline()
        return current

    def set_pipeline(self, action: int, config: p4r.ForwardingPipelineConfig) -> None:
        """SetForwardingPipelineConfig semantics for every action the spec defines."""
        with self.lock:
            if action == Action.VERIFY:
                compile_config(config, self.engine, self.state_cap_mb)
            elif action == Action.VERIFY_AND_SAVE:
                self.saved = compile_config(config, self.engine, self.state_cap_mb)
            elif action == Action.VERIFY_AND_COMMIT:
                self._commit(compile_config(config, self.engine, self.state_cap_mb))
            elif action == Action.COMMIT:
                if config.ByteSize():
                    raise invalid("COMMIT takes no config: it commits the one saved by VERIFY_AND_SAVE")
                if self.saved is None:
                    raise RuntimeStatus(grpc.StatusCode.NOT_FOUND,
                                        "COMMIT without a saved config (send VERIFY_AND_SAVE first)")
                self._commit(self.saved)
            elif action == Action.RECONCILE_AND_COMMIT:
                loaded = compile_config(config, self.engine, self.state_cap_mb)
                if self.current is not None:
                    self._carry_state(self.current, loaded)
                self._commit(loaded)
            else:
                raise invalid(f"unsupported SetForwardingPipelineConfig action {action}")

    def load_source(self, source: str, filename: str) -> None:
        """Commit a program given as P4 source or p4c's BMv2 JSON (a switch started with PROG.p4 or
        PROG.json); no cookie. A JSON program has no P4Info until a client sends one."""
        from p4target.device_config import bmv2_json_in

        json_data = bmv2_json_in(source.encode())
        if json_data is not None:
            pipeline = load_bmv2_json(json_data, filename, self.engine, self.state_cap_mb)
            p4info = p4i.P4Info()
        else:
            p4info, pipeline = compile_source(source, filename, self.engine, self.state_cap_mb)
        self.use_pipeline(p4info, pipeline, source.encode())

    def use_pipeline(self, p4info: p4i.P4Info, pipeline: Any, device_config: bytes) -> None:
        """Commit a pipeline already made, with its P4Info (and the device config it came from); no cookie.
        The fuzzers give theirs an engine whose calls are traced for the sanitizers' replay."""
        with self.lock:
            self._commit(LoadedConfig(p4info, device_config, None, pipeline, Translator(p4info, pipeline.state)))

    def _commit(self, loaded: LoadedConfig) -> None:
        self.current, self.saved = loaded, None
        if self.on_pipeline_set is not None:
            self.on_pipeline_set(loaded.pipeline)

    @staticmethod
    def _carry_state(old: LoadedConfig, new: LoadedConfig) -> None:
        """Copy every entity of `old` into `new` (RECONCILE_AND_COMMIT); INVALID_ARGUMENT if impossible (spec)."""
        wildcards = [p4r.Entity(action_profile_member=p4r.ActionProfileMember()),
                     p4r.Entity(action_profile_group=p4r.ActionProfileGroup()),
                     p4r.Entity(table_entry=p4r.TableEntry(counter_data=p4r.CounterData(), meter_config=p4r.MeterConfig())),
                     p4r.Entity(register_entry=p4r.RegisterEntry()), p4r.Entity(counter_entry=p4r.CounterEntry()),
                     p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                         multicast_group_entry=p4r.MulticastGroupEntry())),
                     p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                         clone_session_entry=p4r.CloneSessionEntry())),
                     p4r.Entity(digest_entry=p4r.DigestEntry())]
        wildcards.append(p4r.Entity(meter_entry=p4r.MeterEntry()))
        for table in old.translator.info.p4info.tables:
            if not table.implementation_id:  # BMv2: no default action with an action profile
                wildcards.append(p4r.Entity(table_entry=p4r.TableEntry(table_id=table.preamble.id,
                                                                       is_default_action=True)))
        for request in wildcards:
            update_type = MODIFY if request.WhichOneof("entity") in ("register_entry", "counter_entry", "meter_entry") \
                or request.table_entry.is_default_action else p4r.Update.INSERT
            with old.pipeline.state.lock:
                entities = list(old.translator.read(request))
            for entity in entities:
                try:
                    new.translator.apply(update_type, entity)
                except RuntimeStatus as failure:
                    if _installed_by_program(new, entity, failure):
                        continue
                    raise invalid(f"cannot preserve forwarding state in the new pipeline: {failure.message}") from None

    def get_pipeline(self, response_type: int) -> p4r.ForwardingPipelineConfig:
        """GetForwardingPipelineConfig: the parts `response_type` asks for."""
        if response_type not in ResponseType.ResponseType.values():
            raise invalid(f"unknown response_type {response_type}")
        loaded = self.loaded()
        out = p4r.ForwardingPipelineConfig()
        if loaded.cookie is not None:
            out.cookie.cookie = loaded.cookie
        if response_type in (ResponseType.ALL, ResponseType.P4INFO_AND_COOKIE):
            out.p4info.CopyFrom(loaded.p4info)
        if response_type in (ResponseType.ALL, ResponseType.DEVICE_CONFIG_AND_COOKIE):
            out.p4_device_config = loaded.device_config
        return out

    # ------------------------------------------------------------------ writes and reads

    def write(self, updates, atomicity: int) -> list[RuntimeStatus | None]:
        """Apply a batch; per-update failures (None = applied). ROLLBACK_ON_ERROR undoes all on failure.

        The whole batch runs under the state lock, so packets never see half of it; with
        rollback that makes ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC the same thing here.
        Without rollback, each run of updates to one table's entries goes to the state WRITE_RUN at a time (see
        runtime/batch.py): the native engine takes them in one call.
        """
        loaded = self.loaded()
        if atomicity in (p4r.WriteRequest.ROLLBACK_ON_ERROR, p4r.WriteRequest.DATAPLANE_ATOMIC):
            return self._write_or_roll_back(loaded, updates)
        translator = loaded.translator
        failures: list[RuntimeStatus | None] = []
        with loaded.pipeline.state.lock, _collector_paused():
            for table_id, run in itertools.groupby(updates, lambda update: batch.batched_table(translator, update)):
                if table_id:
                    while chunk := list(itertools.islice(run, WRITE_RUN)):
                        failures.extend(batch.write_table_run(translator, table_id, chunk))
                    continue
                for update in run:
                    try:
                        translator.apply(update.type, update.entity)
                        failures.append(None)
                    except RuntimeStatus as failure:
                        failures.append(failure)
        return failures

    @staticmethod
    def _write_or_roll_back(loaded: LoadedConfig, updates) -> list[RuntimeStatus | None]:
        """Each update in turn; after a failure, the applied ones undone and each answered ABORTED."""
        failures: list[RuntimeStatus | None] = []
        undo: list[tuple[int, p4r.Entity]] = []
        with loaded.pipeline.state.lock, _collector_paused():
            for update in updates:
                try:
                    inverse = loaded.translator.inverse(update)
                    loaded.translator.apply(update.type, update.entity)
                    undo.extend(inverse)
                    failures.append(None)
                except RuntimeStatus as failure:
                    failures.append(failure)
            if any(failures):
                for update_type, entity in reversed(undo):
                    loaded.translator.apply(update_type, entity)
                first = next(i for i, f in enumerate(failures) if f is not None)
                aborted = RuntimeStatus(grpc.StatusCode.ABORTED, f"rolled back: update {first} failed")
                failures = [f if f is not None else aborted for f in failures]
        return failures

    def read_batches(self, entities) -> Iterator[list[p4r.Entity]]:
        """A Read's answer in batches of READ_BATCH entities (at least one, maybe empty), each made when
        taken under the state lock, so a Read holds one batch however much it answers. Requests a read
        cannot tell apart (the same entity, or one differing only in fields a read ignores) are answered
        once: what a Read costs grows with its distinct requests, not its length. A malformed request
        raises RuntimeStatus here, before any batch."""
        loaded = self.loaded()
        answers = [loaded.translator.read(entity) for entity in distinct_requests(entities)]
        return _batched(loaded.pipeline.state.lock, answers)

    # ------------------------------------------------------------------ packet I/O and digests

    def packet_out_frame(self, packet: p4r.PacketOut) -> bytes:
        """The frame that enters ingress on the CPU port: packet_out header + payload (as BMv2 does)."""
        info = self.loaded().translator.info
        header = info.find("controller_packet_metadata", "packet_out")
        if header is None:
            if packet.metadata:
                raise invalid("PacketOut has metadata but the program has no @controller_header(\"packet_out\")")
            return packet.payload
        fields = {m.id: m for m in header.metadata}
        values: dict[int, int] = {}
        for md in packet.metadata:
            field = fields.get(md.metadata_id)
            if field is None:
                raise invalid(f"PacketOut: unknown packet_out metadata id {md.metadata_id}")
            values[md.metadata_id] = codec.decode(md.value, field.bitwidth, f"PacketOut metadata {field.name}")
        missing = [m.name for m in header.metadata if m.id not in values]
        if missing:
            raise invalid(f"PacketOut: packet_out metadata {missing[0]} is missing")
        widths = [m.bitwidth for m in header.metadata]
        return codec.pack_fields([values[m.id] for m in header.metadata], widths) + packet.payload

    def packet_in_message(self, frame: bytes) -> p4r.PacketIn:
        """A frame the pipeline sent to the CPU port -> PacketIn, packet_in header parsed and stripped."""
        header = self.loaded().translator.info.find("controller_packet_metadata", "packet_in")
        if header is None:
            return p4r.PacketIn(payload=frame)
        widths = [m.bitwidth for m in header.metadata]
        values = codec.unpack_fields(frame, widths)
        metadata = [p4r.PacketMetadata(metadata_id=m.id, value=codec.encode(v)) for m, v in zip(header.metadata, values)]
        return p4r.PacketIn(payload=frame[(sum(widths) + 7) // 8:], metadata=metadata)

    def idle_timeout_notifications(self) -> list[p4r.IdleTimeoutNotification]:
        """One ageing sweep over the committed pipeline's tables (see Translator.idle_timeout_notifications)."""
        with self.lock:
            loaded = self.current
            return [] if loaded is None else loaded.translator.idle_timeout_notifications(time.monotonic())

    def digest_lists(self) -> list[p4r.DigestList]:
        """Drain the digest queue into DigestLists for the digests a client configured (others dropped)."""
        with self.lock:
            return self._drain_digests()

    def _drain_digests(self) -> list[p4r.DigestList]:
        loaded = self.current
        if loaded is None:
            return []
        queued = loaded.pipeline.state.drain_digests()
        info, configs = loaded.translator.info, loaded.translator.digest_configs
        lists: dict[int, p4r.DigestList] = {}
        for name, values in queued:
            digest = info.find("digests", name)
            if digest is None or digest.preamble.id not in configs:
                continue
            digest_id = digest.preamble.id
            if digest_id not in lists:
                lists[digest_id] = p4r.DigestList(digest_id=digest_id, list_id=self._next_list_id,
                                                  timestamp=time.time_ns())
                self._next_list_id += 1
            data = lists[digest_id].data.add()
            for value in values:
                data.struct.members.add(bitstring=codec.encode(value))
        return list(lists.values())


def _installed_by_program(loaded: LoadedConfig, entity: p4r.Entity, failure: RuntimeStatus) -> bool:
    """Whether a carried-over entry failed only because the new program installs it itself."""
    if not entity.HasField("table_entry"):
        return False
    table = loaded.translator.info.find("tables", entity.table_entry.table_id)
    return table is not None and (table.is_const_table or table.has_initial_entries) and \
        failure.code in (grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.PERMISSION_DENIED)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a Write batch runs. A batch makes objects that live on (the
    stored entries), and each time they grow the heap by a quarter the collector walks every object there is:
    half of a 100,000-entry Write's time. What the batch drops is freed by reference counting all the same."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _batched(lock: Any, answers: list[Iterator[p4r.Entity]]) -> Iterator[list[p4r.Entity]]:
    batch: list[p4r.Entity] = []
    sent = False
    for answer in answers:
        while True:
            with lock:
                batch.extend(itertools.islice(answer, READ_BATCH - len(batch)))
            if len(batch) < READ_BATCH:
                break  # this answer is done
            yield batch
            batch, sent = [], True
    if batch or not sent:
        yield batch


# Fields a read request may carry that select nothing (action data, counter data, configs, replicas, ...):
# left out when telling a Read's requests apart. The presence-only ones say what to include in the answer.
_READ_IGNORES = frozenset({"action", "controller_metadata", "metadata", "idle_timeout_ns", "is_const", "data",
                           "config", "members", "max_size", "replicas", "class_of_service", "packet_length_bytes",
                           "entry"})
_READ_PRESENCE_ONLY = frozenset({"counter_data", "meter_config", "meter_counter_data", "time_since_last_hit"})


def distinct_requests(entities) -> list[p4r.Entity]:
    """A Read's request entities, each answer-changing one once, in order."""
    if len(entities) < 2:
        return list(entities)
    seen_bytes: set[bytes] = set()
    seen_keys: set[bytes] = set()
    out = []
    for entity in entities:
        raw = entity.SerializeToString(deterministic=True)
        if raw in seen_bytes:
            continue
        seen_bytes.add(raw)
        key = p4r.Entity()
        key.CopyFrom(entity)
        _selecting_part(key)
        kind = key.WhichOneof("entity")
        if kind == "table_entry" and not key.table_entry.match:
            key.table_entry.ClearField("priority")  # a wildcard's priority selects nothing
        compact = key.SerializeToString(deterministic=True)
        if compact not in seen_keys:
            seen_keys.add(compact)
            out.append(entity)
    return out


def _selecting_part(message: Any) -> None:
    """Clear, in place and at every depth, the fields of a read request that do not change its answer."""
    for field, value in message.ListFields():
        if field.name in _READ_PRESENCE_ONLY:
            value.Clear()  # still present: the answer includes it
        elif field.name in _READ_IGNORES:
            message.ClearField(field.name)
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not field.is_repeated:
            _selecting_part(value)
