"""`State` with its data-plane half in native memory.

`State` (p4target/state.py) stays the front door: it validates every write before anything
changes and keeps the control-plane model (entries, groups, sessions, meter configurations)
that reads answer from. These subclasses then mirror each accepted change into the engine,
where packets see it (action profiles' members and groups too, by handles handed out here).
Registers and counters live only in native memory (numpy views of it); a table entry's
direct-counter cells too (`NativeTableEntry`); meter buckets run in
the engine (`NativeMeterCell` forwards each configuration). The lock is the engine's mutex
(plus a Python RLock for re-entry), so a write batch is atomic to packets as before.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from p4target import state as st
from p4target.backends.c import CProgram, value_set_cells
from p4target.constants import EV_DIGEST, EV_LOG, EV_PACKET_IN
from p4target.native.engine import Engine

MAX_DIGESTS_QUEUED = 65536


class EngineLock:
    """Re-entrant lock that also holds the engine's mutex while held (the packet loop waits)."""

    def __init__(self, engine: Engine):
        self._rlock = threading.RLock()
        self._engine = engine
        self._depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._rlock.acquire(blocking, timeout):
            return False
        self._depth += 1
        if self._depth == 1:
            self._engine.lock()
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._engine.unlock()
        self._rlock.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


class NativeMeterCell(st.MeterCell):
    """A meter cell whose accepted configurations also configure the engine's cell."""

    def __init__(self, configure: Callable[[st.MeterConfig | None], None]):
        super().__init__()
        self._configure_native = configure

    def configure(self, config: st.MeterConfig | None, now: float) -> None:
        super().configure(config, now)
        self._configure_native(config)


class NativeMeterArray(st.MeterArray):
    """Indirect meter `mid` of the engine: the configurations, mirrored into it."""

    def __init__(self, schema: st.MeterSchema, engine: Engine, mid: int):
        self.schema = schema
        self.cells = [NativeMeterCell(functools.partial(engine.meter_set, mid, i)) for i in range(schema.size)]


class NativeTableEntry(st.TableEntry):
    """A stored entry whose direct-counter cells and last-hit time are the engine's (set by NativeTable.insert).
    The pointers to the engine's cells are fetched when first used, most entries' never: two per entry cost a
    100,000-entry table some 30 MB and a tenth of its insert time."""

    _handle: int  # the engine's entry
    _engine: Engine

    def _pointer(self, name: str, fetch: Callable[[int], Any]) -> Any:
        pointer = self.__dict__.get(name)
        if pointer is None:
            pointer = self.__dict__[name] = fetch(self._handle)
        return pointer

    def _cells(self) -> Any:
        """[0] packets, [1] bytes"""
        return self._pointer("_cells_ptr", self._engine.entry_counters)

    def _last_hit(self) -> Any:
        """[0] the time.monotonic() of the last hit: the engine sets it when it adds the entry"""
        return self._pointer("_last_hit_ptr", self._engine.entry_last_hit)

    def _attached(self) -> bool:
        return "_handle" in self.__dict__

    @property
    def packets(self) -> int:
        return int(self._cells()[0])

    @packets.setter
    def packets(self, value: int) -> None:
        if self._attached():
            self._cells()[0] = value

    @property
    def bytes(self) -> int:
        return int(self._cells()[1])

    @bytes.setter
    def bytes(self, value: int) -> None:
        if self._attached():
            self._cells()[1] = value

    @property
    def last_hit(self) -> float:
        return self._last_hit()[0]

    @last_hit.setter
    def last_hit(self, value: float) -> None:
        if self._attached():
            self._last_hit()[0] = value


def _detach(entry: st.TableEntry) -> None:
    """Make a NativeTableEntry a plain TableEntry again, its counters and last hit as the engine has them now: its
    cells are another engine's memory (or this one's about to be freed), which its setters must never write."""
    if isinstance(entry, NativeTableEntry):
        packets, nbytes, last_hit = entry.packets, entry.bytes, entry.last_hit
        for name in ("_handle", "_engine", "_cells_ptr", "_last_hit_ptr"):
            entry.__dict__.pop(name, None)
        plain: st.TableEntry = entry
        plain.__class__ = st.TableEntry
        plain.packets, plain.bytes, plain.last_hit = packets, nbytes, last_hit


def _native(entry: st.TableEntry | None) -> NativeTableEntry:
    """A stored entry of a NativeTable (its insert made every one a NativeTableEntry)."""
    assert isinstance(entry, NativeTableEntry), entry
    return entry


WORD_BITS = 64


def _words(width: int) -> int:
    """Engine words of a key or action parameter of `width` bits (wider ones: one per 64-bit chunk)."""
    return max(1, -(-width // WORD_BITS))


def _chunks(value: int, width: int) -> list[int]:
    """`value` as the engine's words, least significant first (p4target/backends/c.py reads them so)."""
    return [(value >> (WORD_BITS * i)) & ((1 << WORD_BITS) - 1) for i in range(_words(width))]


def _key_spec(key: st.KeyField, part: tuple | None) -> list[tuple[int, int, int, int]]:
    """A canonical match part (state.Table._canonical_field) as the engine's (kind, value, mask, high) per word."""
    full = (1 << key.bitwidth) - 1
    if part is not None and key.bitwidth <= WORD_BITS and part[0] != "r":  # most keys: one word, no range
        return [(1, part[1], full if part[0] == "v" else part[2] if part[0] == "t" else
                 full ^ ((1 << (key.bitwidth - part[2])) - 1), 0)]
    if part is None:
        kind, value, mask, high = 0, 0, 0, 0
    elif part[0] == "v":
        kind, value, mask, high = 1, part[1], full, 0
    elif part[0] == "l":
        kind, value, mask, high = 1, part[1], full ^ ((1 << (key.bitwidth - part[2])) - 1), 0
    elif part[0] == "t":
        kind, value, mask, high = 1, part[1], part[2], 0
    else:
        kind, value, mask, high = 2, part[1], 0, part[2]
    words = [(kind, *word) for word in zip(*(_chunks(x, key.bitwidth) for x in (value, mask, high)))]
    if kind == 2:  # a range over several words: kind 3 on all but the most significant (engine/tables.c)
        words = [(3, *w[1:]) for w in words[:-1]] + words[-1:]
    return words


def _param_widths(actions: dict[str, st.ActionSchema]) -> dict[str, list[int]]:
    return {name: [width for _, width in a.params] for name, a in actions.items()}


def _arg_words(widths: list[int], args: tuple[int, ...]) -> tuple[int, ...]:
    """An action's arguments as the engine's words (a parameter wider than 64 bits takes several)."""
    return tuple(word for arg, width in zip(args, widths) for word in _chunks(arg, width))


class Handles:
    """Numbers for the engine's members (or groups), shared by all profiles of one engine: freed ones first."""

    def __init__(self) -> None:
        self._free: list[int] = []
        self._next = 0

    def take(self) -> int:
        if self._free:
            return self._free.pop()
        self._next += 1
        return self._next - 1

    def give(self, handle: int) -> None:
        self._free.append(handle)


class _Mirrored:
    """The engine handles of one profile's members (or groups), by their control-plane ids."""

    def __init__(self, handles: Handles, delete: Callable[[int], None]):
        self._handles, self._delete = handles, delete
        self.of: dict[int, int] = {}

    def add(self, object_id: int) -> None:
        self.of[object_id] = self._handles.take()

    def remove(self, object_id: int) -> None:
        handle = self.of.pop(object_id)
        self._delete(handle)
        self._handles.give(handle)

    def clear(self) -> None:
        for object_id in list(self.of):
            self.remove(object_id)


class NativeActionProfile(st.ActionProfile):
    """An ActionProfile whose accepted member and group writes are mirrored into the engine.

    Each member and group has an engine handle; a group is mirrored as its selection list
    (`ProfileGroup.choices`, as member handles), so a packet picks exactly what the Python
    engine's `pick` would. A modified member keeps its handle: groups and entries naming it
    run the new action at once, as in the Python engine.
    """

    def __init__(self, schema: st.ActionProfileSchema, actions: dict[str, st.ActionSchema], engine: Engine,
                 action_ids: dict[str, int], member_handles: Handles, group_handles: Handles):
        super().__init__(schema, actions)
        self._engine, self._action_ids, self._param_widths = engine, action_ids, _param_widths(actions)
        self._members = _Mirrored(member_handles, engine.member_delete)
        self._groups = _Mirrored(group_handles, engine.group_delete)

    def insert_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        super().insert_member(member_id, action, params)
        self._members.add(member_id)
        self._mirror_member(member_id)

    def modify_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        super().modify_member(member_id, action, params)
        self._mirror_member(member_id)

    def delete_member(self, member_id: int) -> None:
        super().delete_member(member_id)
        self._members.remove(member_id)

    def _mirror_member(self, member_id: int) -> None:
        member = self.members[member_id]
        self._engine.member_set(self._members.of[member_id], self._action_ids[member.action],
                                _arg_words(self._param_widths[member.action], member.args))

    def insert_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        super().insert_group(group_id, members, max_size)
        self._groups.add(group_id)
        self._mirror_group(group_id)

    def modify_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        super().modify_group(group_id, members, max_size)
        self._mirror_group(group_id)

    def delete_group(self, group_id: int) -> None:
        super().delete_group(group_id)
        self._groups.remove(group_id)

    def _mirror_group(self, group_id: int) -> None:
        member_of = {m.handle: member_id for member_id, m in self.members.items()}
        self._engine.group_set(self._groups.of[group_id],
                               [self._members.of[member_of[m.handle]] for m in self.groups[group_id].choices])

    def engine_handles(self, entry: st.TableEntry) -> tuple[int, int]:
        """(member, group) engine handles of what an accepted entry names (-1: not that kind)."""
        return (self._members.of[entry.member_id] if entry.member_id is not None else -1,
                self._groups.of[entry.group_id] if entry.group_id is not None else -1)

    def clear(self) -> None:
        self._groups.clear()
        self._members.clear()
        super().clear()


class NativeTable(st.Table):
    """A Table whose accepted writes are mirrored into the engine's table `tid`."""

    def __init__(self, schema: st.TableSchema, actions: dict[str, st.ActionSchema], engine: Engine, tid: int,
                 action_ids: dict[str, int], profile: NativeActionProfile | None = None):
        self._engine, self._tid, self._action_ids = engine, tid, action_ids
        self._param_widths = _param_widths(actions)
        kinds = [k.match_kind for k in schema.keys]
        lpm = [i for i, k in enumerate(kinds) if k == "lpm"]
        prio = bool(set(kinds) & {"ternary", "range", "optional"}) or len(lpm) > 1
        lpm_word = sum(_words(k.bitwidth) for k in schema.keys[:lpm[0]]) if lpm else -1
        engine.table_setup(tid, lpm_word if lpm and not prio else -1, schema.keys[lpm[0]].bitwidth if lpm else 0, prio)
        super().__init__(schema, actions, profile)

    @property
    def default(self) -> st.DefaultAction | None:
        return self._default

    @default.setter
    def default(self, value: st.DefaultAction | None) -> None:
        self._default = value
        if value is not None:  # None: a table with an action profile, whose misses run nothing
            self._engine.table_default(self._tid, self._action_ids[value.action], self._args(value.action, value.args))

    def insert(self, entry: st.TableEntry) -> tuple:
        _detach(entry)  # an entry object inserted before, into this engine or another (maybe freed since)
        parts, priority = super().insert(entry)
        keys = [word for k, p in zip(self._keys, parts) for word in _key_spec(k, p)]
        indirect = isinstance(self.profile, NativeActionProfile)  # the entry names a member or group: no action
        action, args = (-1, ()) if indirect else (self._action_ids[entry.action], self._args(entry.action, entry.args))
        handle = self._engine.table_add(self._tid, keys, priority, action, args)
        if isinstance(self.profile, NativeActionProfile):
            self._engine.entry_names(handle, *self.profile.engine_handles(entry))
        entry.__class__ = NativeTableEntry  # its counter cells and last hit now read the engine's (both fresh)
        stored = _native(entry)
        stored._engine, stored._handle = self._engine, handle
        if entry.meter is not None:
            entry.meter = NativeMeterCell(lambda config: self._engine.direct_meter_set(handle, config))
        return parts, priority

    def modify(self, entry: st.TableEntry) -> None:
        super().modify(entry)
        stored = _native(self._entries[self._canonical(entry)])
        if isinstance(self.profile, NativeActionProfile):
            self._engine.entry_names(stored._handle, *self.profile.engine_handles(stored))
        else:
            self._engine.table_modify(stored._handle, self._action_ids[stored.action],
                                      self._args(stored.action, stored.args))

    def _args(self, action: str, args: tuple[int, ...]) -> tuple[int, ...]:
        return _arg_words(self._param_widths[action], args)

    def delete(self, entry: st.TableEntry) -> None:
        self._check_mutable()
        stored = self._entries.get(self._canonical(entry))
        super().delete(entry)  # raises if there is none
        native = _native(stored)
        handle = native._handle
        _detach(native)  # a plain entry with its last counts: its views would outlive the engine's entry
        self._engine.table_delete(self._tid, handle)

    def clear(self) -> None:
        if not self._const:
            for entry in self._entries.values():
                handle = _native(entry)._handle
                _detach(entry)
                self._engine.table_delete(self._tid, handle)
        super().clear()


class NativeRegisterArray(st.RegisterArray):
    """`values` is a numpy view of the engine's register cells: one row of words per cell wider than 64 bits."""

    values: np.ndarray

    def __init__(self, schema: st.RegisterSchema, values: np.ndarray):
        self.schema = schema
        self.words = _words(schema.bitwidth)
        self.values = values if self.words == 1 else values.reshape(schema.size, self.words)

    def read(self, index: int) -> int:
        cell = self.values[self._index(index)]
        return int(cell) if self.words == 1 else sum(int(w) << (WORD_BITS * k) for k, w in enumerate(cell))

    def write(self, index: int, value: int) -> None:
        if self.words == 1:
            super().write(index, value)
            return
        i = self._index(index)
        st._check_width(f"register {self.schema.name}[{i}]", value, self.schema.bitwidth)
        self.values[i] = _chunks(value, self.schema.bitwidth)

    def reset(self) -> None:
        self.values[:] = 0


class NativeCounterArray(st.CounterArray):
    """`packets`/`bytes` are numpy views of the engine's counter cells."""

    packets: np.ndarray
    bytes: np.ndarray

    def __init__(self, schema: st.CounterSchema, cells: tuple[np.ndarray, np.ndarray]):
        self.schema = schema
        self.packets, self.bytes = cells

    def read(self, index: int) -> tuple[int, int]:
        i = self._index(index)
        return int(self.packets[i]), int(self.bytes[i])

    def reset(self) -> None:
        self.packets[:] = 0
        self.bytes[:] = 0


class NativeValueSet(st.ValueSet):
    """A value set whose accepted writes also fill its cells in native memory (backends/c.py's value_set_cells)."""

    def __init__(self, schema: st.ValueSetSchema, cells: np.ndarray):
        super().__init__(schema)
        self.cells = cells

    def write(self, members: list[tuple[int, ...]]) -> None:
        super().write(members)
        flat = [w for m in sorted(self.members) for v, width in zip(m, self.schema.bitwidths) for w in _chunks(v, width)]
        self.cells[0] = 0  # no packet sees a half-written set (writes also hold the engine's lock)
        self.cells[1:1 + len(flat)] = flat
        self.cells[0] = len(self.members)


class NativeState(st.State):
    """State whose data-plane half is the engine's (see module docstring).

    `pump_events()` moves what the engine queued for Python (digests, log lines, PacketIns)
    to where the Python engine puts them: `digests`, `log`, and `on_packet_in(port, frame)`.
    """

    def __init__(self, schema: st.ProgramSchema, engine: Engine, cprog: CProgram):
        super().__init__(schema)
        self.engine = engine
        self.lock = EngineLock(engine)
        self._digests = cprog.digests
        self.on_packet_in: Callable[[int, bytes], None] | None = None
        with self.lock:
            member_handles, group_handles = Handles(), Handles()
            profiles = {n: NativeActionProfile(p, schema.actions, engine, cprog.actions, member_handles, group_handles)
                        for n, p in schema.action_profiles.items()}
            self.action_profiles = dict(profiles)  # State's type (dict is invariant); `profiles` keeps ours
            self.tables = {n: NativeTable(t, schema.actions, engine, cprog.tables[n], cprog.actions,
                                          profiles[t.implementation] if t.implementation else None)
                           for n, t in schema.tables.items()}
            registers = {n: NativeRegisterArray(r, engine.register(cprog.registers[n], r.size * _words(r.bitwidth)))
                         for n, r in schema.registers.items()}
            self.registers = dict(registers)
            self.counters = {n: NativeCounterArray(c, engine.counter(cprog.counters[n], c.size))
                             for n, c in schema.counters.items()}
            self.meters = {n: NativeMeterArray(m, engine, cprog.meters[n]) for n, m in schema.meters.items()}
            value_sets = {n: NativeValueSet(v, engine.register(cprog.value_sets[n], value_set_cells(v.size, v.bitwidths)))
                          for n, v in schema.value_sets.items()}
            self.value_sets = dict(value_sets)
        # the engine's register cells (a value set's members live in some too) by register id, for a Trace to watch
        self.cells = ([(cprog.registers[n], r.values) for n, r in registers.items()]
                      + [(cprog.value_sets[n], v.cells) for n, v in value_sets.items()])

    def mc_group_insert(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        with self.lock:
            super().mc_group_insert(group_id, replicas)
            self.engine.mc_set(group_id, self.multicast_groups[group_id])

    def mc_group_modify(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        with self.lock:
            super().mc_group_modify(group_id, replicas)
            self.engine.mc_set(group_id, self.multicast_groups[group_id])

    def mc_group_delete(self, group_id: int) -> None:
        with self.lock:
            super().mc_group_delete(group_id)
            self.engine.mc_set(group_id, None)

    def clone_session_insert(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        with self.lock:
            super().clone_session_insert(session_id, replicas, packet_length)
            self.engine.clone_set(session_id, self.clone_sessions[session_id].replicas, packet_length)

    def clone_session_modify(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        with self.lock:
            super().clone_session_modify(session_id, replicas, packet_length)
            self.engine.clone_set(session_id, self.clone_sessions[session_id].replicas, packet_length)

    def clone_session_delete(self, session_id: int) -> None:
        with self.lock:
            super().clone_session_delete(session_id)
            self.engine.clone_set(session_id, None)

    def reset(self) -> None:
        with self.lock:
            groups, sessions = list(self.multicast_groups), list(self.clone_sessions)
            super().reset()
            for g in groups:
                self.engine.mc_set(g, None)
            for s in sessions:
                self.engine.clone_set(s, None)
            self.engine.events()  # queued digests are forgotten too

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        self.pump_events()
        return super().drain_digests()

    def detach_entries(self) -> None:
        """Before the engine is freed: every stored entry a plain TableEntry again (see _detach)."""
        with self.lock:
            for table in self.tables.values():
                for entry in table.entries():
                    _detach(entry)

    def pump_events(self) -> None:
        for kind, arg, data in self.engine.events():
            if kind == EV_DIGEST:
                if len(self.digests) < MAX_DIGESTS_QUEUED:
                    name, widths = self._digests[arg]
                    words = iter(int(v) for v in np.frombuffer(data, dtype=np.uint64))
                    values = tuple(sum(next(words) << (WORD_BITS * i) for i in range(_words(w))) for w in widths)
                    self.digests.append((name, values))
            elif kind == EV_LOG:
                self.log.append(data.decode("utf-8", "replace"))
            elif kind == EV_PACKET_IN and self.on_packet_in is not None:
                self.on_packet_in(arg, data)
