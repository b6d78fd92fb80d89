"""The native engine's tables (the twins of p4target/state/tables.py): every accepted write mirrored into the
engine's table; an entry's direct-counter cells and last hit are the engine's (`NativeTableEntry`)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from p4target import state as st
from p4target.native.binding import Engine, TableBatch
from p4target.native.store.cells import NativeMeterCell
from p4target.native.store.profiles import NativeActionProfile
from p4target.native.store.words import WORD_BITS, arg_words, chunks, param_widths, words


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


def detach(entry: st.TableEntry) -> None:
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


def key_spec(key: st.KeyField, part: tuple | None) -> list[tuple[int, int, int, int]]:
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
    words = [(kind, *word) for word in zip(*(chunks(x, key.bitwidth) for x in (value, mask, high)))]
    if kind == 2:  # a range over several words: kind 3 on all but the most significant (engine/tables.c)
        words = [(3, *w[1:]) for w in words[:-1]] + words[-1:]
    return words


class _Run:
    """What NativeTable.write_many has done so far: the engine's batch, the entries it adds by id() (with their op's
    index), and how to undo each write in the model."""

    def __init__(self) -> None:
        self.batch = TableBatch()
        self.added: dict[int, tuple[int, st.TableEntry]] = {}
        self.undo: list[Callable[[], None]] = []

    def handle(self, stored: st.TableEntry) -> int:
        """The handle the batch names a stored entry by: the engine's, or -(j + 1) for the one its op j adds."""
        made = self.added.get(id(stored))
        return -(made[0] + 1) if made is not None else _native(stored)._handle


class NativeTable(st.Table):
    """A Table whose accepted writes are mirrored into the engine's table `tid`."""

    def __init__(self, schema: st.TableSchema, actions: dict[str, st.ActionSchema], engine: Engine, tid: int,
                 action_ids: dict[str, int], profile: NativeActionProfile | None = None):
        self._engine, self._tid, self._action_ids = engine, tid, action_ids
        self._param_widths = param_widths(actions)
        kinds = [k.match_kind for k in schema.keys]
        lpm = [i for i, k in enumerate(kinds) if k == "lpm"]
        prio = bool(set(kinds) & {"ternary", "range", "optional"}) or len(lpm) > 1
        lpm_word = sum(words(k.bitwidth) for k in schema.keys[:lpm[0]]) if lpm else -1
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
        detach(entry)  # an entry object inserted before, into this engine or another (maybe freed since)
        parts, priority = super().insert(entry)
        keys = [word for k, p in zip(self._keys, parts) for word in key_spec(k, p)]
        indirect = isinstance(self.profile, NativeActionProfile)  # the entry names a member or group: no action
        action, args = (-1, ()) if indirect else (self._action_ids[entry.action], self._args(entry.action, entry.args))
        handle = self._engine.table_add(self._tid, keys, priority, action, args)
        if isinstance(self.profile, NativeActionProfile):
            self._engine.entry_names(handle, *self.profile.engine_handles(entry))
        self._attach(entry, handle)  # its counter cells and last hit now read the engine's (both fresh)
        return parts, priority

    def modify(self, entry: st.TableEntry) -> None:
        super().modify(entry)
        stored = _native(self._entries[self._canonical(entry)])
        if isinstance(self.profile, NativeActionProfile):
            self._engine.entry_names(stored._handle, *self.profile.engine_handles(stored))
        else:
            self._engine.table_modify(stored._handle, self._action_ids[stored.action],
                                      self._args(stored.action, stored.args))

    def write_many(self, writes: Iterable[tuple[str, st.TableEntry]]) -> list[st.StateError | None]:
        """Each write checked and applied to the model in turn, as Table.write_many; what they change in the engine
        in one call at the end (a table with an action profile: per entry). Without memory for it, the model is
        put back as it was and MemoryError raised, the engine unchanged."""
        if self.profile is not None:
            return super().write_many(writes)
        run = _Run()  # `writes` is best a generator making each entry as it is taken (see _batch_insert)
        out: list[st.StateError | None] = []
        for kind, entry in writes:
            try:
                run.undo.append(getattr(self, "_batch_" + kind)(entry, run))
                out.append(None)
            except st.StateError as exc:
                out.append(exc)
        if not run.batch.ops:
            return out
        try:
            handles = self._engine.table_batch(self._tid, run.batch)
        except MemoryError:
            for step in reversed(run.undo):
                step()
            raise
        for at, entry in run.added.values():
            self._attach(entry, handles[at])
        return out

    def _batch_insert(self, entry: st.TableEntry, run: _Run) -> Callable[[], None]:
        detach(entry)
        parts, priority = st.Table.insert(self, entry)
        # Every attribute the entry will have, set while it is new: CPython keeps an object's attributes in its
        # class's shared layout only if they are added before other objects are made; one added after the run's
        # engine call would give each entry a dict of its own (600 bytes more an entry, measured).
        entry._engine, entry._handle = self._engine, -1  # type: ignore[attr-defined]
        keys = [word for k, p in zip(self._keys, parts) for word in key_spec(k, p)]
        run.added[id(entry)] = (len(run.batch.ops), entry)
        run.batch.add(keys, priority, self._action_ids[entry.action], self._args(entry.action, entry.args))
        return lambda: st.Table.delete(self, entry)

    def _batch_modify(self, entry: st.TableEntry, run: _Run) -> Callable[[], None]:
        self._check_mutable()
        stored = self._entries.get(self._canonical(entry))
        before = (stored.action, stored.params, stored.args, stored.idle_timeout_ns) if stored is not None else None
        st.Table.modify(self, entry)  # raises if there is none
        assert stored is not None and before is not None
        run.batch.modify(run.handle(stored), self._action_ids[stored.action], self._args(stored.action, stored.args))

        def restore() -> None:
            stored.action, stored.params, stored.args, stored.idle_timeout_ns = before
        return restore

    def _batch_delete(self, entry: st.TableEntry, run: _Run) -> Callable[[], None]:
        self._check_mutable()
        key = self._canonical(entry)
        stored = self._entries.get(key)
        st.Table.delete(self, entry)  # raises if there is none
        assert stored is not None
        handle = run.handle(stored)
        run.batch.delete(handle)
        if handle < 0:  # added earlier in this run: never the engine's
            made = run.added.pop(id(stored))

            def forget() -> None:
                self._restore(key, stored)
                run.added[id(stored)] = made
            return forget
        detach(stored)  # its last counts, read before the engine frees its cells

        def restore() -> None:
            self._restore(key, stored)
            self._attach(stored, handle)
        return restore

    def _restore(self, key: tuple, entry: st.TableEntry) -> None:
        self._entries[key] = entry
        self._index.add(key, entry)

    def _attach(self, entry: st.TableEntry, handle: int) -> None:
        """`entry` (stored) is now the engine's entry `handle`: its counter cells and last hit read the engine's."""
        entry.__class__ = NativeTableEntry
        stored = _native(entry)
        stored._engine, stored._handle = self._engine, handle
        if entry.meter is not None:
            entry.meter = NativeMeterCell(lambda config: self._engine.direct_meter_set(handle, config))

    def _args(self, action: str, args: tuple[int, ...]) -> tuple[int, ...]:
        return arg_words(self._param_widths[action], args)

    def delete(self, entry: st.TableEntry) -> None:
        self._check_mutable()
        stored = self._entries.get(self._canonical(entry))
        super().delete(entry)  # raises if there is none
        native = _native(stored)
        handle = native._handle
        detach(native)  # a plain entry with its last counts: its views would outlive the engine's entry
        self._engine.table_delete(self._tid, handle)

    def clear(self) -> None:
        if not self._const:
            for entry in self._entries.values():
                handle = _native(entry)._handle
                detach(entry)
                self._engine.table_delete(self._tid, handle)
        super().clear()
