"""`State` with its data-plane half in native memory (the twin of p4target/state/state.py).

`State` stays the front door: it validates every write before anything changes and keeps the
control-plane model (entries, groups, sessions, meter configurations) that reads answer from. Each of its
parts here is the native twin (tables.py, profiles.py, cells.py, replication.py, events.py), mirroring each
accepted change into the engine, where packets see it. Registers and counters live only in native memory
(numpy views of it); a table entry's direct-counter cells too; meter buckets run in the engine. The lock is
the engine's mutex (plus a Python RLock for re-entry), so a write batch is atomic to packets.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from p4target import state as st
from p4target.backends.c_module import CProgram, value_set_cells
from p4target.extern_registry import keeper
from p4target.native.binding import Engine
from p4target.native.store.cells import NativeRegisterArray, NativeValueSet
from p4target.native.store.events import NativeEvents
from p4target.native.store.profiles import Handles, NativeActionProfile
from p4target.native.store.replication import NativeReplication
from p4target.native.store.tables import NativeTable, detach


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


class NativeState(st.State):
    """State whose data-plane half is the engine's (see module docstring).

    `pump_events()` moves what the engine queued for Python (digests, log lines, PacketIns)
    to where the Python engine puts them: `digests`, `log`, and `on_packet_in(port, frame)`.
    """

    events: NativeEvents

    def __init__(self, schema: st.ProgramSchema, engine: Engine, cprog: CProgram):
        self.engine, self.cprog = engine, cprog
        self._member_handles, self._group_handles = Handles(), Handles()
        self.on_packet_in: Callable[[int, bytes], None] | None = None
        super().__init__(schema)
        # the engine's register cells (a value set's members live in some too) by register id, for a Trace to watch
        self.cells = ([(cprog.registers[n], r.values) for n, r in self.registers.items() if isinstance(r, NativeRegisterArray)]
                      + [(cprog.value_sets[n], v.cells) for n, v in self.value_sets.items() if isinstance(v, NativeValueSet)])

    def new_lock(self) -> AbstractContextManager[Any]:
        return EngineLock(self.engine)

    def new_profile(self, schema: st.ActionProfileSchema) -> NativeActionProfile:
        return NativeActionProfile(schema, self.schema.actions, self.engine, self.cprog.actions, self._member_handles,
                                   self._group_handles)

    def new_table(self, schema: st.TableSchema, profile: st.ActionProfile | None) -> NativeTable:
        assert profile is None or isinstance(profile, NativeActionProfile)
        return NativeTable(schema, self.schema.actions, self.engine, self.cprog.tables[schema.name], self.cprog.actions,
                           profile)

    def new_cells(self, schema: Any) -> Any:
        return keeper(schema.extern).native_storage(schema, self.engine, self.cprog)

    def new_value_set(self, schema: st.ValueSetSchema) -> NativeValueSet:
        return NativeValueSet(schema, self.engine.register(self.cprog.value_sets[schema.name],
                                                           value_set_cells(schema.size, schema.bitwidths)))

    def new_replication(self) -> NativeReplication:
        return NativeReplication(self.engine)

    def new_events(self) -> NativeEvents:
        return NativeEvents(self.engine, self.cprog.digests)

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        self.pump_events()
        return super().drain_digests()

    def detach_entries(self) -> None:
        """Before the engine is freed: every stored entry a plain TableEntry again (see tables.detach)."""
        with self.lock:
            for table in self.tables.values():
                for entry in table.entries():
                    detach(entry)

    def pump_events(self) -> None:
        self.events.pump(self.on_packet_in)
