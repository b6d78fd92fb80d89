"""Match-action tables: their entries, default action and the lookup index a packet's key is matched in."""
from __future__ import annotations

import bisect
import time
from collections.abc import Iterable

from p4target.state.cells import MeterCell
from p4target.state.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    StateError,
    check_width,
)
from p4target.state.profiles import ActionProfile
from p4target.state.schema import (
    ActionSchema,
    DefaultAction,
    Exact,
    KeyField,
    Lpm,
    Match,
    Optional,
    Range,
    TableEntry,
    TableSchema,
    Ternary,
    check_args,
)

_SPEC_FOR_KIND = {"exact": Exact, "lpm": Lpm, "ternary": Ternary, "range": Range, "optional": Optional}
# Kinds for which P4Runtime requires a priority (and for which the highest priority wins).
_PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})


def _prefix_mask(prefix_len: int, bitwidth: int) -> int:
    return ((1 << prefix_len) - 1) << (bitwidth - prefix_len)


# ---------------------------------------------------------------------------
# Lookup indexes: one per table, updated in place by every insert/delete.
#
# `lookup(key_tuple) -> TableEntry | None` runs per packet, so each index keeps a
# structure its lookup closure reads directly; writes touch only the part that changes
# (O(1) for exact and lpm, O(log n) search + one list insert for priority tables).
# `add`/`remove` take the table's canonical key ((field parts...), priority) and are only
# called after validation, so they cannot fail half-way.


class _ExactIndex:
    """All keys exact: one dict keyed by the tuple of key values."""

    def __init__(self) -> None:
        self._by_values: dict[tuple, TableEntry] = {}
        self.lookup = self._by_values.get

    def add(self, key: tuple, entry: TableEntry) -> None:
        self._by_values[tuple(p[1] for p in key[0])] = entry

    def remove(self, key: tuple) -> None:
        del self._by_values[tuple(p[1] for p in key[0])]


class _LpmIndex:
    """Exact keys plus one lpm key: one dict per prefix length, probed longest first."""

    def __init__(self, keys: tuple[KeyField, ...], lpm_index: int) -> None:
        self._li = lpm_index
        self._width = keys[lpm_index].bitwidth
        self._single = len(keys) == 1
        self._levels: dict[int, dict] = {}  # prefix length -> {masked key: entry}
        self._order: list[tuple[int, dict]] = []  # (mask, level), longest first; changed in place
        self.lookup = self._single_lookup() if self._single else self._multi_lookup()

    def _slot(self, parts: tuple) -> tuple[int, object]:
        """(prefix length, dict key) of an entry: the value alone for a single-key table."""
        lp = parts[self._li]
        plen = 0 if lp is None else lp[2]
        if self._single:
            return plen, 0 if lp is None else lp[1]
        return plen, tuple((0 if p is None else p[1]) for p in parts)

    def add(self, key: tuple, entry: TableEntry) -> None:
        plen, k = self._slot(key[0])
        level = self._levels.get(plen)
        if level is None:
            level = self._levels[plen] = {}
            self._reorder()
        level[k] = entry

    def remove(self, key: tuple) -> None:
        plen, k = self._slot(key[0])
        level = self._levels[plen]
        del level[k]
        if not level:
            del self._levels[plen]
            self._reorder()

    def _reorder(self) -> None:
        """Only when a prefix length appears or disappears (at most width + 1 levels)."""
        self._order[:] = [(_prefix_mask(p, self._width), self._levels[p]) for p in sorted(self._levels, reverse=True)]

    def _single_lookup(self):
        order = self._order

        def lookup(key: tuple) -> TableEntry | None:
            v = key[0]
            for mask, d in order:
                e = d.get(v & mask)
                if e is not None:
                    return e
            return None
        return lookup

    def _multi_lookup(self):
        order, li = self._order, self._li

        def lookup(key: tuple) -> TableEntry | None:
            for mask, d in order:
                k = list(key)
                k[li] &= mask
                e = d.get(tuple(k))
                if e is not None:
                    return e
            return None
        return lookup


class _PriorityIndex:
    """Ternary/range/optional (or several lpm) keys: entries scanned by priority, largest first.

    Rows are kept sorted by (-priority, insertion number), so equal priorities match in
    insertion order; a write bisects to its row.
    """

    def __init__(self, keys: tuple[KeyField, ...]) -> None:
        self._keys = keys
        self._ranks: list[tuple[int, int]] = []  # (-priority, insertion number), ascending
        self._rows: list[tuple] = []  # (masks, ranges, entry), same order as _ranks
        self._rank_of: dict[tuple, tuple[int, int]] = {}
        self._inserted = 0
        rows = self._rows

        def lookup(key: tuple) -> TableEntry | None:
            for masks, ranges, e in rows:
                for i, m, v in masks:
                    if key[i] & m != v:
                        break
                else:
                    for i, lo, hi in ranges:
                        if not lo <= key[i] <= hi:
                            break
                    else:
                        return e
            return None
        self.lookup = lookup

    def add(self, key: tuple, entry: TableEntry) -> None:
        rank = (-key[1], self._inserted)
        self._inserted += 1
        at = bisect.bisect_right(self._ranks, rank)
        self._ranks.insert(at, rank)
        self._rows.insert(at, self._row(key[0], entry))
        self._rank_of[key] = rank

    def remove(self, key: tuple) -> None:
        at = bisect.bisect_left(self._ranks, self._rank_of.pop(key))
        del self._ranks[at]
        del self._rows[at]

    def _row(self, parts: tuple, entry: TableEntry) -> tuple:
        """(masks, ranges, entry): what the lookup tests, wildcards left out."""
        masks, ranges = [], []
        for i, (key, p) in enumerate(zip(self._keys, parts)):
            if p is None:
                continue
            if p[0] == "v":
                masks.append((i, (1 << key.bitwidth) - 1, p[1]))
            elif p[0] == "l":
                masks.append((i, _prefix_mask(p[2], key.bitwidth), p[1]))
            elif p[0] == "t":
                masks.append((i, p[2], p[1]))
            else:
                ranges.append((i, p[1], p[2]))
        return tuple(masks), tuple(ranges), entry


class Table:
    """A match-action table: entries, default action, fast lookup.

    Lookup strategies, chosen from the key kinds:
    - all exact: one dict keyed by the tuple of key values;
    - exact + one lpm: one dict per prefix length, probed longest first;
    - anything with ternary/range/optional: entries sorted by priority (largest wins).
    `lookup(key_tuple) -> TableEntry | None` (key values in key order; None = miss) is
    the index's closure; inserts and deletes update the index in place.
    """

    def __init__(self, schema: TableSchema, actions: dict[str, ActionSchema], profile: ActionProfile | None = None):
        """`profile`: the action profile of a table with `implementation` (then there is no default action)."""
        self.schema = schema
        self.name = schema.name
        self._actions = actions
        self.profile = profile
        self._keys = schema.keys
        self._key_index = {k.name: i for i, k in enumerate(schema.keys)}
        kinds = {k.match_kind for k in schema.keys}
        self.needs_priority = bool(kinds & _PRIORITY_KINDS)
        self._entries: dict[tuple, TableEntry] = {}  # canonical key -> entry
        self._new_index()
        self._const = False
        # BMv2 has no default entry in a table with an action profile: a miss runs nothing.
        self.default: DefaultAction | None = None if profile else \
            self._make_default(schema.default_action, schema.default_params, initial=True)
        self._initial_default = self.default
        self._install_program_entries()
        self._const = schema.const_entries

    def _new_index(self) -> None:
        """An empty lookup index of the kind the key kinds call for; binds `lookup` to it."""
        lpm = [i for i, k in enumerate(self._keys) if k.match_kind == "lpm"]
        if self.needs_priority or len(lpm) > 1:
            self._index: _ExactIndex | _LpmIndex | _PriorityIndex = _PriorityIndex(self._keys)
        elif lpm:
            self._index = _LpmIndex(self._keys, lpm[0])
        else:
            self._index = _ExactIndex()
        self.lookup = self._index.lookup

    # -- program-time setup

    def _install_program_entries(self) -> None:
        """Program `entries`; for const ternary entries, earlier = higher priority (P4 spec)."""
        n = len(self.schema.entries)
        for i, entry in enumerate(self.schema.entries):
            prio = entry.priority or (n - i if self.needs_priority else 0)
            copy = TableEntry(dict(entry.match), entry.action, dict(entry.params), prio)
            self.insert(copy)

    def _make_default(self, action: str, params: dict[str, int], initial: bool = False) -> DefaultAction:
        where = f"table {self.name} default action"
        if action not in self.schema.actions:
            raise InvalidArgument(f"{where}: action {action!r} is not in the table's actions")
        if not initial and action in self.schema.table_only:
            raise InvalidArgument(f"{where}: action {action} is @tableonly")
        args = check_args(self._actions[action], params, where)
        return DefaultAction(action, dict(params), args)

    # -- canonical keys and validation

    def _canonical(self, entry: TableEntry) -> tuple:
        """Validate the match of `entry`; return its identity (match + priority)."""
        where = f"table {self.name}"
        for fname in entry.match:
            if fname not in self._key_index:
                raise InvalidArgument(f"{where}: no key field {fname!r}")
        parts = []
        for key in self._keys:
            spec = entry.match.get(key.name)
            parts.append(self._canonical_field(key, spec, where))
        if self.needs_priority:
            if not isinstance(entry.priority, int) or entry.priority <= 0:
                raise InvalidArgument(f"{where}: entries of a ternary/range/optional table need a priority > 0")
        elif entry.priority:
            raise InvalidArgument(f"{where}: priority must be 0 for a table without ternary/range/optional keys")
        return (tuple(parts), entry.priority)

    @staticmethod
    def _canonical_field(key: KeyField, spec: Match | None, where: str) -> tuple | None:
        """Normalised form of one field's match; None = wildcard."""
        what = f"{where} field {key.name}"
        w = key.bitwidth
        kind = key.match_kind
        if spec is None:
            if kind == "exact":
                raise InvalidArgument(f"{what}: exact match field cannot be omitted")
            return None
        expected = _SPEC_FOR_KIND[kind]
        if not isinstance(spec, expected):
            raise InvalidArgument(f"{what}: {kind} field given a {type(spec).__name__} match")
        if isinstance(spec, (Exact, Optional)):  # the class matches `kind` (checked above)
            check_width(what, spec.value, w)
            return ("v", spec.value)
        if isinstance(spec, Lpm):
            check_width(what, spec.value, w)
            if not isinstance(spec.prefix_len, int) or not 0 <= spec.prefix_len <= w:
                raise InvalidArgument(f"{what}: prefix length {spec.prefix_len} out of range 0..{w}")
            if spec.prefix_len == 0:
                return None
            mask = _prefix_mask(spec.prefix_len, w)
            if spec.value & ~mask:
                raise InvalidArgument(f"{what}: value {spec.value:#x} has bits set beyond /{spec.prefix_len}")
            return ("l", spec.value, spec.prefix_len)
        if isinstance(spec, Ternary):
            check_width(what, spec.value, w)
            check_width(what + " mask", spec.mask, w)
            if spec.mask == 0:
                return None
            if spec.value & ~spec.mask:
                raise InvalidArgument(f"{what}: value {spec.value:#x} has bits set outside mask {spec.mask:#x}")
            return ("t", spec.value, spec.mask)
        # range
        check_width(what + " low", spec.low, w)
        check_width(what + " high", spec.high, w)
        if spec.low > spec.high:
            raise InvalidArgument(f"{what}: range low {spec.low} > high {spec.high}")
        if spec.low == 0 and spec.high == (1 << w) - 1:
            return None
        return ("r", spec.low, spec.high)

    def _check_action(self, entry: TableEntry) -> tuple[int, ...]:
        where = f"table {self.name}"
        if self.profile is not None:
            self.profile.check_reference(entry, where)
            return ()
        if entry.member_id is not None or entry.group_id is not None:
            raise InvalidArgument(f"{where}: the table has no action profile; an entry names an action")
        if entry.action not in self.schema.actions:
            if entry.action in self._actions:
                raise InvalidArgument(f"{where}: action {entry.action} is not in the table's actions")
            raise InvalidArgument(f"{where}: unknown action {entry.action!r}")
        if entry.action in self.schema.default_only:
            raise InvalidArgument(f"{where}: action {entry.action} is @defaultonly")
        return check_args(self._actions[entry.action], entry.params, where)

    def _check_mutable(self) -> None:
        if self._const:
            raise PermissionDenied(f"table {self.name} has const entries")

    def _check_idle_timeout(self, entry: TableEntry) -> None:
        check_width(f"table {self.name} idle_timeout_ns", entry.idle_timeout_ns, 63)
        if entry.idle_timeout_ns and not self.schema.support_timeout:
            raise InvalidArgument(f"table {self.name} does not support idle timeouts (no `support_timeout = true`)")

    # -- writes

    def insert(self, entry: TableEntry) -> tuple:
        """Add `entry`; returns its canonical key ((field parts...), priority). AlreadyExists if an entry with
        the same match (and priority) is present."""
        self._check_mutable()
        key = self._canonical(entry)
        args = self._check_action(entry)
        self._check_idle_timeout(entry)
        if key in self._entries:
            raise AlreadyExists(f"table {self.name}: entry already exists")
        if len(self._entries) >= self.schema.size:
            raise ResourceExhausted(f"table {self.name} is full ({self.schema.size} entries)")
        entry.args = args
        entry.packets = entry.bytes = 0
        entry.meter = MeterCell() if self.schema.direct_meter else None
        entry.last_hit = time.monotonic()
        if self.profile is not None:
            self.profile.reference(entry)
        self._entries[key] = entry
        self._index.add(key, entry)
        return key

    def modify(self, entry: TableEntry) -> None:
        """Replace the action/params and idle timeout of the entry with the same match (counters kept)."""
        self._check_mutable()
        key = self._canonical(entry)
        args = self._check_action(entry)
        self._check_idle_timeout(entry)
        old = self._entries.get(key)
        if old is None:
            raise NotFound(f"table {self.name}: no such entry to modify")
        if self.profile is not None:
            self.profile.reference(old, -1)
            self.profile.reference(entry)
        old.action, old.params, old.args = entry.action, dict(entry.params), args
        old.member_id, old.group_id = entry.member_id, entry.group_id
        old.idle_timeout_ns = entry.idle_timeout_ns

    def delete(self, entry: TableEntry) -> None:
        """Remove the entry with the same match (action/params are ignored)."""
        self._check_mutable()
        key = self._canonical(entry)
        old = self._entries.pop(key, None)
        if old is None:
            raise NotFound(f"table {self.name}: no such entry to delete")
        if self.profile is not None:
            self.profile.reference(old, -1)
        self._index.remove(key)

    def write_many(self, writes: Iterable[tuple[str, TableEntry]]) -> list[StateError | None]:
        """("insert", "modify" or "delete", entry) each in turn: its error or None. The native twin hands the run's
        changes to its engine in one call."""
        out: list[StateError | None] = []
        for kind, entry in writes:
            try:
                getattr(self, kind)(entry)
                out.append(None)
            except StateError as exc:
                out.append(exc)
        return out

    def find(self, match: dict[str, Match], priority: int = 0) -> TableEntry:
        """The stored entry with exactly this match; NotFound otherwise."""
        key = self._canonical(TableEntry(match, "", {}, priority))
        try:
            return self._entries[key]
        except KeyError:
            raise NotFound(f"table {self.name}: no such entry") from None

    def clear(self) -> None:
        """Drop every non-const entry and restore the program's default action (a pipeline reset)."""
        self.default = self._initial_default
        if not self._const:
            if self.profile is not None:
                for entry in self._entries.values():
                    self.profile.reference(entry, -1)
            self._entries.clear()
            self._new_index()
            self._install_program_entries()

    def entries(self) -> list[TableEntry]:
        return list(self._entries.values())

    def idle_entries(self, now: float) -> list[TableEntry]:
        """Entries with an idle timeout that no packet has hit for at least that long."""
        return [e for e in self._entries.values()
                if e.idle_timeout_ns and (now - e.last_hit) * 1e9 >= e.idle_timeout_ns]

    def __len__(self) -> int:
        return len(self._entries)

    def set_default(self, action: str, params: dict[str, int] | None = None) -> None:
        self._check_default_writable()
        self.default = self._make_default(action, params or {})

    def reset_default(self) -> None:
        """Back to the program's default action."""
        if self.profile is not None:
            raise InvalidArgument(f"table {self.name} has an action profile: it has no default action to reset")
        self.default = self._initial_default

    def _check_default_writable(self) -> None:
        if self.profile is not None:
            raise InvalidArgument(f"table {self.name} has an action profile: it has no default action to set")
        if self.schema.const_default:
            raise PermissionDenied(f"table {self.name} has a const default_action")
