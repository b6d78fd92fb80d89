"""P4Runtime entities <-> the switch's runtime state (p4target.state).

The state speaks control-plane names and Python ints; P4Runtime speaks P4Info ids and
byte strings. `Translator` converts one way for writes (`apply`) and the other for reads
(`read`), checking everything the P4Info says (ids, widths, match kinds, canonical
forms the spec demands) so the state only sees well-formed requests. Every failure is a
`RuntimeStatus` with the gRPC code the spec asks for.

Supported entities: TableEntry (incl. default entries, direct counter data, meter configs
and idle timeouts), CounterEntry, DirectCounterEntry, MeterEntry, DirectMeterEntry,
RegisterEntry, PacketReplicationEngineEntry (multicast groups, clone sessions: runtime/replication.py) and
DigestEntry, ValueSetEntry (parser value sets, written whole with MODIFY, exact matches as BMv2
takes them). Externs: v1model has none in P4Info, so wildcard reads answer nothing (as BMv2's
server does) and writes answer UNIMPLEMENTED. Counters, meters, registers and digests (direct ones too) are
read and written by their extern modules (p4target.externs, the `p4runtime_*` hooks); the Translator
dispatches on the entity's kind and lends them its P4Info lookups (`by_id`, `match_in`, `cells_read`, ...).

Reads answer in the form the client wrote (P4Runtime's read-write symmetry): a replica
written with `egress_port` is read back with `egress_port`, one written with `port` with
`port`, so a client can write back what it read.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc
from finsy.proto import p4i, p4r

from p4target import state as st
from p4target.extern_registry import for_entity
from p4target.p4info import P4InfoIndex
from p4target.runtime import codec
from p4target.runtime.errors import RuntimeStatus, invalid, state_call, unimplemented
from p4target.runtime.profiles import ProfileTranslator
from p4target.runtime.replication import ReplicationTranslator

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE

_MATCH_ONEOF = {p4i.MatchField.EXACT: "exact", p4i.MatchField.LPM: "lpm", p4i.MatchField.TERNARY: "ternary",
                p4i.MatchField.RANGE: "range", p4i.MatchField.OPTIONAL: "optional"}


class Translator:
    """Applies P4Runtime writes to a State and answers reads from it, for one P4Info."""

    def __init__(self, p4info: p4i.P4Info, state: st.State):
        self.info = P4InfoIndex(p4info)
        self.state = state
        self.digest_configs: dict[int, p4r.DigestEntry.Config] = {}
        self.profiles = ProfileTranslator(self)
        self.replication = ReplicationTranslator(self.state)
        self._aged: dict[str, dict[int, st.TableEntry]] = {}  # table -> entries notified in the last sweep
        self._shapes: dict[int, tuple[str, dict[int, tuple[str, str | None, int, str]], list[str]]] = {}

    def by_id(self, kind: str, entity_id: int):
        """Entity `entity_id` of `kind` ("tables", ...); INVALID_ARGUMENT naming the id if absent."""
        found = self.info.find(kind, entity_id)
        if found is None:
            raise invalid(f"unknown {kind[:-1].replace('_', ' ')} id {entity_id}")
        return found

    # ------------------------------------------------------------------ writes

    def apply(self, update_type: int, entity: p4r.Entity) -> None:
        """Apply one update; raises RuntimeStatus and leaves the state unchanged on failure."""
        if update_type not in (INSERT, MODIFY, DELETE):
            raise invalid(f"update type {update_type} is not INSERT, MODIFY or DELETE")
        kind = entity.WhichOneof("entity")
        if kind is None:
            raise invalid("update has no entity")
        extern = for_entity(kind)
        if extern is not None:
            extern.p4runtime_write(self, update_type, getattr(entity, kind))
        elif kind == "table_entry":
            self._write_table_entry(update_type, entity.table_entry)
        elif kind == "action_profile_member":
            self.profiles.write_member(update_type, entity.action_profile_member)
        elif kind == "action_profile_group":
            self.profiles.write_group(update_type, entity.action_profile_group)
        elif kind == "packet_replication_engine_entry":
            self.replication.write(update_type, entity.packet_replication_engine_entry)
        elif kind == "value_set_entry":
            self._write_value_set(update_type, entity.value_set_entry)
        else:
            raise unimplemented(f"{kind} is not supported by this target")

    def _write_table_entry(self, update_type: int, te: p4r.TableEntry) -> None:
        table = self.by_id("tables", te.table_id)
        name = table.preamble.name
        if te.controller_metadata or te.metadata:
            raise unimplemented(f"table {name}: controller_metadata and metadata are not supported")
        if te.is_default_action:
            return self._write_default(update_type, table, te)
        entry = st.TableEntry(self.match_in(table, te.match), "", {}, te.priority, idle_timeout_ns=te.idle_timeout_ns)
        with self.state.lock:
            if update_type == DELETE:
                if not table.implementation_id:
                    return state_call(self.state.delete_entry, name, entry)
                old = state_call(self.state.table(name).find, entry.match, entry.priority)
                state_call(self.state.delete_entry, name, entry)
                return self.profiles.discard(table, old.member_id, old.group_id)
            counts = None
            if te.HasField("counter_data"):
                if self.info.direct_counter_of(te.table_id) is None:
                    raise invalid(f"table {name} has no direct counter for counter_data")
                counts = state_call(st.counter_values, f"table {name} counter_data", te.counter_data.packet_count,
                                    te.counter_data.byte_count)
            meter = self._direct_meter_config_in(table, te) if te.HasField("meter_config") else None
            if table.implementation_id:
                self._write_indirect_entry(update_type, table, te, entry)
            else:
                entry.action, entry.params = self.entry_action_in(table, te.action)
                call = self.state.insert_entry if update_type == INSERT else self.state.modify_entry
                state_call(call, name, entry)
            if counts is not None:
                stored = state_call(self.state.table(name).find, entry.match, entry.priority)
                stored.packets, stored.bytes = counts
            if meter is not None:
                state_call(self.state.direct_meter_set, meter[0], entry.match, entry.priority, meter[1])

    def _write_indirect_entry(self, update_type: int, table: p4i.Table, te: p4r.TableEntry, entry: st.TableEntry) -> None:
        """Insert/modify an entry naming a member, a group or a one-shot action set (freed if the write fails)."""
        name = table.preamble.name
        old = state_call(self.state.table(name).find, entry.match, entry.priority) if update_type == MODIFY else None
        replaced = (old.member_id, old.group_id) if old is not None else None
        entry.member_id, entry.group_id = self.profiles.table_action_in(table, te.action)
        try:
            state_call(self.state.insert_entry if update_type == INSERT else self.state.modify_entry, name, entry)
        except RuntimeStatus:
            self.profiles.discard(table, entry.member_id, entry.group_id)
            raise
        if replaced is not None:
            self.profiles.discard(table, *replaced)

    def _direct_meter_config_in(self, table: p4i.Table, te: p4r.TableEntry) -> tuple[str, st.MeterConfig]:
        """(direct meter name, config) for a table entry's meter_config, validated."""
        direct = self.info.direct_meter_of(table.preamble.id)
        if direct is None:
            raise invalid(f"table {table.preamble.name} has no direct meter for meter_config")
        return direct.preamble.name, codec.meter_config_in(te.meter_config, f"table {table.preamble.name} meter_config")

    def _write_default(self, update_type: int, table: p4i.Table, te: p4r.TableEntry) -> None:
        name = table.preamble.name
        if update_type != MODIFY:
            raise invalid(f"table {name}: the default entry can only be modified (not inserted or deleted)")
        if te.match or te.priority:
            raise invalid(f"table {name}: a default entry has no match fields and no priority")
        if table.implementation_id:
            raise invalid(f"table {name} has an action profile: it has no default action to set or reset (as on BMv2)")
        if not te.HasField("action"):
            return state_call(self.state.reset_default, name)
        action, params = self.entry_action_in(table, te.action, default=True)
        state_call(self.state.set_default, name, action, params)

    def match_in(self, table: p4i.Table, matches) -> dict[str, st.Match]:
        """FieldMatch list -> {field name: match spec}, enforcing the spec's canonical forms."""
        where, fields, exact = self._match_shape(table)
        out: dict[str, st.Match] = {}
        for fm in matches:
            field = fields.get(fm.field_id)
            if field is None:
                raise invalid(f"{where}: unknown match field id {fm.field_id}")
            name, expected, width, what = field
            if name in out:
                raise invalid(f"{what}: matched twice")
            kind = fm.WhichOneof("field_match_type")
            if kind != expected:
                raise invalid(f"{what}: expected a {expected} match, got {kind}")
            out[name] = self._field_in(fm, kind, width, what)
        missing = [name for name in exact if name not in out]
        if missing:
            raise invalid(f"{where}: exact match field {missing[0]} is missing")
        return out

    def _match_shape(self, table: p4i.Table) -> tuple[str, dict[int, tuple[str, str | None, int, str]], list[str]]:
        """What match_in checks a table's matches against, read from the P4Info once: the table as errors name it,
        (name, match oneof, width, the field as errors name it) by field id, the exact fields' names."""
        shape = self._shapes.get(table.preamble.id)
        if shape is None:
            fields, exact = self.info.fields_by_id(table)
            where = f"table {table.preamble.name}"
            shape = self._shapes[table.preamble.id] = (where, {
                i: (f.name, _MATCH_ONEOF.get(f.match_type), f.bitwidth, f"{where} field {f.name}")
                for i, f in fields.items()}, exact)
        return shape

    @staticmethod
    def _field_in(fm: p4r.FieldMatch, kind: str, width: int, what: str) -> st.Match:
        """One field's match, of `kind` (its oneof, the one the field's match type wants)."""
        if kind == "exact":
            return st.Exact(codec.decode(fm.exact.value, width, what))
        if kind == "lpm":
            if fm.lpm.prefix_len == 0:
                raise invalid(f"{what}: a /0 lpm match must be omitted (don't care)")
            if not 0 < fm.lpm.prefix_len <= width:
                raise invalid(f"{what}: prefix length {fm.lpm.prefix_len} out of range 1..{width}")
            return st.Lpm(codec.decode(fm.lpm.value, width, what), fm.lpm.prefix_len)
        if kind == "optional":
            return st.Optional(codec.decode(fm.optional.value, width, what))
        if kind == "ternary":
            mask = codec.decode(fm.ternary.mask, width, what + " mask")
            if mask == 0:
                raise invalid(f"{what}: a ternary match with mask 0 must be omitted (don't care)")
            return st.Ternary(codec.decode(fm.ternary.value, width, what), mask)
        low = codec.decode(fm.range.low, width, what + " low")
        high = codec.decode(fm.range.high, width, what + " high")
        if low == 0 and high == (1 << width) - 1:
            raise invalid(f"{what}: a full range match must be omitted (don't care)")
        return st.Range(low, high)

    def entry_action_in(self, table: p4i.Table, ta: p4r.TableAction, default: bool = False) -> tuple[str, dict[str, int]]:
        """(action name, {param: value}) of a table entry's (or with `default` the default entry's) action."""
        where = f"table {table.preamble.name}"
        if ta.WhichOneof("type") != "action":
            if ta.WhichOneof("type") is None:
                raise invalid(f"{where}: entry has no action")
            raise invalid(f"{where}: the table has no action profile; an entry names an action")
        action = self.by_id("actions", ta.action.action_id)
        scopes = self.info.action_scopes(table)
        if action.preamble.id not in scopes:
            raise invalid(f"{where}: action {action.preamble.name} is not one of the table's actions")
        forbidden = p4i.ActionRef.TABLE_ONLY if default else p4i.ActionRef.DEFAULT_ONLY
        if scopes[action.preamble.id] == forbidden:
            raise invalid(f"{where}: action {action.preamble.name} is {'@tableonly' if default else '@defaultonly'}")
        return self.action_call_in(ta.action, where)

    def action_call_in(self, call: p4r.Action, where: str) -> tuple[str, dict[str, int]]:
        """(action name, {param name: value}) of an Action message, checked against the P4Info."""
        action = self.by_id("actions", call.action_id)
        params = self.info.params_by_id(action)
        values: dict[str, int] = {}
        for param in call.params:
            decl = params.get(param.param_id)
            if decl is None:
                raise invalid(f"{where}: action {action.preamble.name} has no parameter id {param.param_id}")
            if decl.name in values:
                raise invalid(f"{where}: action {action.preamble.name} parameter {decl.name} given twice")
            values[decl.name] = codec.decode(param.value, decl.bitwidth,
                                             f"{where}: action {action.preamble.name} param {decl.name}")
        if len(values) != len(params):
            missing = [p.name for p in action.params if p.name not in values]
            raise invalid(f"{where}: action {action.preamble.name} is missing parameter {missing[0]}")
        return action.preamble.name, values

    def _write_value_set(self, update_type: int, vse: p4r.ValueSetEntry) -> None:
        """The set becomes exactly the members given: each one exact value per match field."""
        vs = self.by_id("value_sets", vse.value_set_id)
        name = vs.preamble.name
        if update_type != MODIFY:
            raise invalid(f"value set {name}: value sets can only be modified (written whole)")
        fields = {f.id: f for f in vs.match}
        members = []
        for member in vse.members:
            values: dict[int, int] = {}
            for fm in member.match:
                field = fields.get(fm.field_id)
                if field is None:
                    raise invalid(f"value set {name}: unknown match field id {fm.field_id}")
                if not fm.HasField("exact") or fm.field_id in values:
                    raise invalid(f"value set {name} field {field.id}: expected one exact match")
                values[fm.field_id] = codec.decode(fm.exact.value, field.bitwidth, f"value set {name} field {field.id}")
            if len(values) != len(fields):
                raise invalid(f"value set {name}: a member must match all {len(fields)} fields")
            members.append(tuple(values[f.id] for f in vs.match))
        state_call(self.state.value_set_write, name, members)

    # ------------------------------------------------------------------ reads

    def read(self, entity: p4r.Entity) -> Iterator[p4r.Entity]:
        """Entities matching a (possibly wildcard) read request entity, made as they are taken: hold
        `state.lock` while taking them for a consistent view. A malformed request raises here, not later."""
        kind = entity.WhichOneof("entity")
        readers: dict[str, Callable[[Any], Iterator[p4r.Entity]]] = {
            "table_entry": self._read_tables, "packet_replication_engine_entry": self.replication.read,
            "value_set_entry": self._read_value_sets, "extern_entry": self._read_externs,
            "action_profile_member": self.profiles.read_members, "action_profile_group": self.profiles.read_groups}
        if kind is None:
            raise invalid("read request entity is empty")
        extern = for_entity(kind)
        if extern is not None:
            readers[kind] = lambda entry: extern.p4runtime_read(self, entry)
        if kind not in readers:
            raise unimplemented(f"{kind} is not supported by this target")
        answer = readers[kind](getattr(entity, kind))
        with self.state.lock:
            first = next(answer, None)  # the reader checks the request before its first entity
        return answer if first is None else itertools.chain([first], answer)

    def cells_array(self, kind: str, array_id: int, update_type: int) -> tuple[Any, str]:
        """The P4Info array of `kind` ("counters", ...) whose cells an update writes, and its name: an indexed
        array's cells always exist, so they can only be modified."""
        array = self.by_id(kind, array_id)
        name = array.preamble.name
        if update_type != MODIFY:
            raise invalid(f"{kind[:-1]} {name}: {kind[:-1]} cells can only be modified")
        return array, name

    def cells_write(self, array: Any, entry: Any, write: Callable[[int], object]) -> None:
        """`write(index)` the cell of P4Info `array` that `entry` names, or every cell without an index (one lock)."""
        with self.state.lock:
            for index in [entry.index.index] if entry.HasField("index") else range(array.size):
                state_call(write, index)

    def cells_read(self, kind: str, array_id: int, entry: Any) -> Iterator[tuple[Any, int]]:
        """(P4Info array, index) a read of an indexed entity (counter, meter, register) answers: the cell `entry`
        names, or all cells of array `array_id` without an index, of every array of `kind` ("counters", ...) with 0."""
        arrays = [self.by_id(kind, array_id)] if array_id else list(getattr(self.info.p4info, kind))
        for array in arrays:
            for index in [entry.index.index] if entry.HasField("index") else range(array.size):
                yield array, index

    def direct_entries_read(self, te: p4r.TableEntry, what: str, direct_of: Callable[[int], Any],
                            directs: Iterable[Any]) -> Iterator[tuple[p4i.Table, st.TableEntry]]:
        """(table, entry) a read of a direct counter or meter (`what`) answers: `te`'s table, which must have one
        (`direct_of` its id), or with table_id 0 every table one of `directs` is attached to."""
        if te.table_id:
            table = self.by_id("tables", te.table_id)
            if direct_of(table.preamble.id) is None:
                raise invalid(f"table {table.preamble.name} has no {what}")
            tables = [table]
        else:
            tables = [self.info.table(d.direct_table_id) for d in directs]
        for table in tables:
            for entry in self.entries_read(table, te):
                yield table, entry

    def _read_tables(self, te: p4r.TableEntry) -> Iterator[p4r.Entity]:
        if not te.table_id and (te.match or te.is_default_action):
            raise invalid("reading by match or default entry needs a table_id")
        tables = [self.by_id("tables", te.table_id)] if te.table_id else list(self.info.p4info.tables)
        with_counters = te.HasField("counter_data")
        now = time.monotonic()
        for table in tables:
            name = table.preamble.name
            if te.is_default_action:
                default = self.state.get_default(name)
                out = p4r.TableEntry(table_id=table.preamble.id, is_default_action=True)
                if default is not None:  # None: a table with an action profile has no default action
                    out.action.action.CopyFrom(self.action_out(default.action, default.params))
                yield p4r.Entity(table_entry=out)
                continue
            for entry in self.entries_read(table, te):
                out = self.entry_out(table, entry, with_counters)
                if te.HasField("meter_config") and entry.meter is not None and entry.meter.config is not None:
                    out.meter_config.CopyFrom(codec.meter_config_out(entry.meter.config))
                if te.HasField("time_since_last_hit"):
                    out.time_since_last_hit.elapsed_ns = int((now - entry.last_hit) * 1e9) if entry.idle_timeout_ns else 0
                yield p4r.Entity(table_entry=out)

    def entries_read(self, table: p4i.Table, te: p4r.TableEntry) -> list[st.TableEntry]:
        """The entries a table read selects: all of them, or the one its match names.

        A read request is a filter (P4Runtime spec, "Read RPC"): a fully specified key that
        names no entry selects nothing, so the answer is empty, not NOT_FOUND.
        """
        stored = self.state.table(table.preamble.name)
        if not te.match:
            return stored.entries()
        match = self.match_in(table, te.match)
        try:
            return [stored.find(match, te.priority)]
        except st.NotFound:
            return []
        except st.StateError as exc:
            raise RuntimeStatus(grpc.StatusCode[exc.code], str(exc)) from None

    def entry_out(self, table: p4i.Table, entry: st.TableEntry, with_counters: bool) -> p4r.TableEntry:
        out = p4r.TableEntry(table_id=table.preamble.id, priority=entry.priority)
        for field in table.match_fields:
            spec = entry.match.get(field.name)
            if spec is None or _is_wildcard(spec, field.bitwidth):
                continue
            fm = out.match.add(field_id=field.id)
            if isinstance(spec, st.Exact):
                fm.exact.value = codec.encode(spec.value)
            elif isinstance(spec, st.Optional):
                fm.optional.value = codec.encode(spec.value)
            elif isinstance(spec, st.Lpm):
                fm.lpm.value, fm.lpm.prefix_len = codec.encode(spec.value), spec.prefix_len
            elif isinstance(spec, st.Ternary):
                fm.ternary.value, fm.ternary.mask = codec.encode(spec.value), codec.encode(spec.mask)
            else:
                fm.range.low, fm.range.high = codec.encode(spec.low), codec.encode(spec.high)
        if table.implementation_id:
            out.action.CopyFrom(self.profiles.table_action_out(table, entry))
        else:
            out.action.action.CopyFrom(self.action_out(entry.action, entry.params))
        out.idle_timeout_ns = entry.idle_timeout_ns
        if with_counters and self.info.direct_counter_of(table.preamble.id) is not None:
            out.counter_data.packet_count, out.counter_data.byte_count = entry.packets, entry.bytes
        return out

    def action_out(self, name: str, params: dict[str, int]) -> p4r.Action:
        action = self.info.action(name)
        out = p4r.Action(action_id=action.preamble.id)
        for param in action.params:
            out.params.add(param_id=param.id, value=codec.encode(params[param.name]))
        return out

    def _read_value_sets(self, vse: p4r.ValueSetEntry) -> Iterator[p4r.Entity]:
        sets = [self.by_id("value_sets", vse.value_set_id)] if vse.value_set_id else list(self.info.p4info.value_sets)
        for vs in sets:
            out = p4r.ValueSetEntry(value_set_id=vs.preamble.id)
            for member in state_call(self.state.value_set_read, vs.preamble.name):
                out.members.add().match.extend(
                    p4r.FieldMatch(field_id=f.id, exact=p4r.FieldMatch.Exact(value=codec.encode(v)))
                    for f, v in zip(vs.match, member))
            yield p4r.Entity(value_set_entry=out)

    def _read_externs(self, ee: p4r.ExternEntry) -> Iterator[p4r.Entity]:
        if ee.extern_type_id or ee.extern_id:
            raise invalid(f"unknown extern type id {ee.extern_type_id}")
        return iter(())  # v1model has no P4Info externs

    # ------------------------------------------------------------------ idle timeouts

    def idle_timeout_notifications(self, now: float) -> list[p4r.IdleTimeoutNotification]:
        """One sweep of the tables with `support_timeout`: a notification per table with aged entries.

        As BMv2's ageing monitor: an entry idle for its idle_timeout_ns is reported, then not in
        the next sweep, then again, for as long as no packet hits it (and it is not deleted).
        """
        out = []
        for table in self.info.p4info.tables:
            if table.idle_timeout_behavior != p4i.Table.NOTIFY_CONTROL:
                continue
            name = table.preamble.name
            with self.state.lock:
                aged = {id(e): e for e in self.state.table(name).idle_entries(now)}
            previous = self._aged.get(name, {})
            fresh = [e for key, e in aged.items() if key not in previous]
            self._aged[name] = {id(e): e for e in fresh}
            if not fresh:
                continue
            notification = p4r.IdleTimeoutNotification(timestamp=time.time_ns())
            for entry in fresh:
                reported = self.entry_out(table, entry, False)
                reported.ClearField("action")
                notification.table_entry.append(reported)
            out.append(notification)
        return out

    # ------------------------------------------------------------------ rollback support

    def inverse(self, update: p4r.Update) -> list[tuple[int, p4r.Entity]]:
        """Updates that undo `update` if applied after it (read before applying it)."""
        entity = update.entity
        if update.type == INSERT:
            return [(DELETE, entity)]
        read_request = p4r.Entity()
        read_request.CopyFrom(entity)
        if entity.HasField("table_entry") and not entity.table_entry.is_default_action:
            read_request.table_entry.counter_data.SetInParent()
        with self.state.lock:
            prior = list(self.read(read_request))
        if update.type == DELETE:
            return [(INSERT, e) for e in prior]
        return [(MODIFY, e) for e in prior]


def _is_wildcard(spec: st.Match, width: int) -> bool:
    """Whether a stored match is a don't-care (omitted on reads, as the spec wants)."""
    if isinstance(spec, st.Lpm):
        return spec.prefix_len == 0
    if isinstance(spec, st.Ternary):
        return spec.mask == 0
    if isinstance(spec, st.Range):
        return spec.low == 0 and spec.high == (1 << width) - 1
    return False
