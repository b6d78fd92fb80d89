"""Runtime state of one embedded switch: the front door every control-plane writer and the pipeline use.

The P4Runtime server, the Thrift API, the STF runner and the packet pipeline all drive ONE `State`, by
control-plane names (see schema.py). It is made of one part per kind of object, each in its own module
beside its native twin (p4target/native/store/): tables.py, profiles.py, cells.py (registers, counters,
meters, value sets: what an extern keeps, through its module's `storage` hook), replication.py and
events.py (digests, log lines, port counts). Every write is validated against the schema BEFORE anything
changes, so a failed write never alters state.

Thread-safety: `State.lock` (an RLock; the native engine's holds its mutex too) is taken by every
mutating method here and by `Pipeline` around each packet, so control-plane writes never interleave with a
packet in flight. Readers that need a consistent snapshot take it too.

The native engine's State (NativeState) makes each part its native twin: the `new_*` methods are the one
interface both engines implement.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from p4target.extern_registry import keeper
from p4target.state.cells import CounterArray, MeterArray, MeterConfig, RegisterArray, ValueSet, ValueSetSchema
from p4target.state.errors import InvalidArgument, StateError
from p4target.state.events import Events, PortStats
from p4target.state.profiles import ActionProfile
from p4target.state.replication import Replication
from p4target.state.schema import MATCH_KINDS, ActionProfileSchema, DefaultAction, Match, ProgramSchema, TableEntry, TableSchema
from p4target.state.tables import Table


class State:
    """All mutable state of one switch pipeline; see the module docstring."""

    def __init__(self, schema: ProgramSchema):
        self.schema = schema
        self.lock: AbstractContextManager[Any] = self.new_lock()
        self._check_schema()
        with self.lock:
            self.action_profiles: dict[str, ActionProfile] = {
                n: self.new_profile(p) for n, p in schema.action_profiles.items()}
            self.tables: dict[str, Table] = {
                n: self.new_table(t, self.action_profiles[t.implementation] if t.implementation else None)
                for n, t in schema.tables.items()}
            # an extern's cells are what its module keeps (a register-like extern of a test's too)
            self.registers: dict[str, RegisterArray] = {n: self.new_cells(r) for n, r in schema.registers.items()}
            self.counters: dict[str, CounterArray] = {n: self.new_cells(c) for n, c in schema.counters.items()}
            self.meters: dict[str, MeterArray] = {n: self.new_cells(m) for n, m in schema.meters.items()}
            self.value_sets: dict[str, ValueSet] = {n: self.new_value_set(v) for n, v in schema.value_sets.items()}
            self.replication = self.new_replication()
            self.events = self.new_events()
        # what the pipeline reads per packet, and what writers and readers name most: the parts' own objects
        self.multicast_groups, self.clone_sessions = self.replication.multicast_groups, self.replication.clone_sessions
        self.digests, self.log, self.port_stats = self.events.digests, self.events.log, self.events.port_stats

    # -- the parts, as each engine makes them

    def new_lock(self) -> AbstractContextManager[Any]:
        return threading.RLock()

    def new_profile(self, schema: ActionProfileSchema) -> ActionProfile:
        return ActionProfile(schema, self.schema.actions)

    def new_table(self, schema: TableSchema, profile: ActionProfile | None) -> Table:
        return Table(schema, self.schema.actions, profile)

    def new_cells(self, schema: Any) -> Any:
        """The cells of an extern instance (a RegisterSchema, CounterSchema or MeterSchema): as its extern keeps them."""
        return keeper(schema.extern).storage(schema)

    def new_value_set(self, schema: ValueSetSchema) -> ValueSet:
        return ValueSet(schema)

    def new_replication(self) -> Replication:
        return Replication()

    def new_events(self) -> Events:
        return Events()

    def _check_schema(self) -> None:
        for t in self.schema.tables.values():
            for a in t.actions:
                if a not in self.schema.actions:
                    raise InvalidArgument(f"table {t.name}: action {a!r} is not declared")
            for k in t.keys:
                if k.match_kind not in MATCH_KINDS:
                    raise InvalidArgument(f"table {t.name}: key {k.name} has unsupported match kind {k.match_kind!r}")
            if t.implementation is not None and t.implementation not in self.schema.action_profiles:
                raise InvalidArgument(f"table {t.name}: action profile {t.implementation!r} is not declared")

    # -- lookups by name with clear errors

    def table(self, name: str) -> Table:
        try:
            return self.tables[name]
        except KeyError:
            raise InvalidArgument(f"unknown table {name!r}") from None

    def register(self, name: str) -> RegisterArray:
        try:
            return self.registers[name]
        except KeyError:
            raise InvalidArgument(f"unknown register {name!r}") from None

    def counter(self, name: str) -> CounterArray:
        try:
            return self.counters[name]
        except KeyError:
            raise InvalidArgument(f"unknown counter {name!r}") from None

    def value_set(self, name: str) -> ValueSet:
        try:
            return self.value_sets[name]
        except KeyError:
            raise InvalidArgument(f"unknown value set {name!r}") from None

    # -- tables

    def insert_entry(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self.table(table).insert(entry)

    def modify_entry(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self.table(table).modify(entry)

    def delete_entry(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self.table(table).delete(entry)

    def write_entries(self, table: str, writes: Iterable[tuple[str, TableEntry]]) -> list[StateError | None]:
        """A run of writes to one table ("insert", "modify" or "delete", entry), in order: each one's error or None
        (a failed write changes nothing; the others apply). See Table.write_many."""
        with self.lock:
            return self.table(table).write_many(writes)

    def get_default(self, table: str) -> DefaultAction | None:
        """The default action; None for a table with an action profile (BMv2 has none there)."""
        return self.table(table).default

    def set_default(self, table: str, action: str, params: dict[str, int] | None = None) -> None:
        with self.lock:
            self.table(table).set_default(action, params)

    def reset_default(self, table: str) -> None:
        with self.lock:
            self.table(table).reset_default()

    # -- action profiles (member and group ids are the control plane's)

    def action_profile(self, name: str) -> ActionProfile:
        try:
            return self.action_profiles[name]
        except KeyError:
            raise InvalidArgument(f"unknown action profile {name!r}") from None

    def profile_member_insert(self, profile: str, member_id: int, action: str, params: dict[str, int]) -> None:
        with self.lock:
            self.action_profile(profile).insert_member(member_id, action, params)

    def profile_member_modify(self, profile: str, member_id: int, action: str, params: dict[str, int]) -> None:
        with self.lock:
            self.action_profile(profile).modify_member(member_id, action, params)

    def profile_member_delete(self, profile: str, member_id: int) -> None:
        with self.lock:
            self.action_profile(profile).delete_member(member_id)

    def profile_group_insert(self, profile: str, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        """Create a selector group: {member id: weight} (written order kept) and a weight limit (0: none)."""
        with self.lock:
            self.action_profile(profile).insert_group(group_id, members, max_size)

    def profile_group_modify(self, profile: str, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        with self.lock:
            self.action_profile(profile).modify_group(group_id, members, max_size)

    def profile_group_delete(self, profile: str, group_id: int) -> None:
        with self.lock:
            self.action_profile(profile).delete_group(group_id)

    def direct_counter_table(self, name: str) -> Table:
        """The table a direct counter belongs to (its cells live in the table's entries)."""
        dc = self.schema.direct_counters.get(name)
        if dc is None:
            raise InvalidArgument(f"unknown direct counter {name!r}")
        return self.table(dc.table)

    # -- registers and counters

    def register_read(self, name: str, index: int) -> int:
        return self.register(name).read(index)

    def value_set_write(self, name: str, members: list[tuple[int, ...]]) -> None:
        with self.lock:
            self.value_set(name).write(members)

    def value_set_read(self, name: str) -> list[tuple[int, ...]]:
        return sorted(self.value_set(name).members)

    def register_write(self, name: str, index: int, value: int) -> None:
        with self.lock:
            self.register(name).write(index, value)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        return self.counter(name).read(index)

    def counter_write(self, name: str, index: int, packets: int = 0, nbytes: int = 0) -> None:
        with self.lock:
            self.counter(name).write(index, packets, nbytes)

    # -- meters (time in seconds of time.monotonic(), the clock the pipeline meters with)

    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None:
        """Configure (None: unconfigure, i.e. always GREEN) cell `index` of meter `name`."""
        with self.lock:
            meter = self.meters.get(name)
            if meter is None:
                raise InvalidArgument(f"unknown meter {name!r}")
            meter.cell(index).configure(config, time.monotonic())

    def meter_get(self, name: str, index: int) -> MeterConfig | None:
        meter = self.meters.get(name)
        if meter is None:
            raise InvalidArgument(f"unknown meter {name!r}")
        return meter.cell(index).config

    def direct_meter_set(self, name: str, match: dict[str, Match], priority: int, config: MeterConfig | None) -> None:
        """Configure the direct-meter cell of the entry with this match in the meter's table."""
        with self.lock:
            dm = self.schema.direct_meters.get(name)
            if dm is None:
                raise InvalidArgument(f"unknown direct meter {name!r}")
            cell = self.table(dm.table).find(match, priority).meter
            assert cell is not None, "entries of a table with a direct meter each have a cell"
            cell.configure(config, time.monotonic())

    # -- packet replication engine

    def mc_group_insert(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """Create multicast group `group_id` with (egress_port, rid) replicas."""
        with self.lock:
            self.replication.mc_group_insert(group_id, replicas)

    def mc_group_modify(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        with self.lock:
            self.replication.mc_group_modify(group_id, replicas)

    def mc_group_delete(self, group_id: int) -> None:
        with self.lock:
            self.replication.mc_group_delete(group_id)

    def clone_session_insert(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        """Create clone session `session_id`: (egress_port, instance) replicas, optional truncation."""
        with self.lock:
            self.replication.clone_session_insert(session_id, replicas, packet_length)

    def clone_session_modify(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        with self.lock:
            self.replication.clone_session_modify(session_id, replicas, packet_length)

    def clone_session_delete(self, session_id: int) -> None:
        with self.lock:
            self.replication.clone_session_delete(session_id)

    # -- digests and stats

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        """Remove and return every queued (digest name, field values) in arrival order."""
        with self.lock:
            return self.events.drain_digests()

    def port(self, port: int) -> PortStats:
        """Stats record for `port`, created on first use."""
        return self.events.port(port)

    def iter_tables(self) -> Iterator[Table]:
        return iter(self.tables.values())

    def reset(self) -> None:
        """Forget everything written at run time (P4Runtime SetForwardingPipelineConfig)."""
        with self.lock:
            for t in self.tables.values():
                t.clear()
            for p in self.action_profiles.values():
                p.clear()
            for r in self.registers.values():
                r.reset()
            for c in self.counters.values():
                c.reset()
            for m in self.meters.values():
                m.reset()
            for v in self.value_sets.values():
                v.write([])
            self.replication.clear()
            self.events.clear()
