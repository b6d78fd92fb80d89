"""Runtime state of one embedded switch: tables, action profiles, registers, counters, meters, PRE, digests.

The P4Runtime server, the STF runner and the packet pipeline all drive ONE `State`.
Everything is addressed by control-plane names (P4Info names such as
"MyIngress.ipv4_lpm", "hdr.ipv4.dstAddr") and plain Python ints; no P4Info IDs (action
profile member and group ids are numbers the control plane chooses, not P4Info's).

The state knows the program only through a `ProgramSchema` (tables, actions,
registers, counters): `p4target.pipeline` builds it from the IR, tests can build it
by hand. Every write is validated against the schema BEFORE anything changes, so a
failed write never alters state. Errors are `StateError` subclasses whose `code`
names the matching gRPC status (the P4Runtime server maps them 1:1).

Thread-safety: `State.lock` (an RLock) is taken by every mutating method here and by
`Pipeline` around each packet, so control-plane writes never interleave with a
packet in flight. Readers that need a consistent snapshot take it too.
"""
from __future__ import annotations

import bisect
import collections
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# ---------------------------------------------------------------------------
# Errors


class StateError(Exception):
    """A rejected control-plane operation. `code` is the gRPC status name."""

    code = "UNKNOWN"
    exit_code = 2


class InvalidArgument(StateError):
    """Unknown name, value too wide, bad prefix, wrong params, ..."""

    code = "INVALID_ARGUMENT"


class AlreadyExists(StateError):
    """Insert of an entry/group/session whose key is already present."""

    code = "ALREADY_EXISTS"


class NotFound(StateError):
    """Modify/delete/read of something that is not there."""

    code = "NOT_FOUND"


class ResourceExhausted(StateError):
    """Table full (its `size`)."""

    code = "RESOURCE_EXHAUSTED"


class OutOfRange(StateError):
    """Index past the end of a register, counter or meter array."""

    code = "OUT_OF_RANGE"


class FailedPrecondition(StateError):
    """The object is still in use (a member in a group or entry, a group in an entry) or unusable (empty group)."""

    code = "FAILED_PRECONDITION"


class PermissionDenied(StateError):
    """Write to something the program declared const (const entries, const default_action)."""

    code = "PERMISSION_DENIED"


# ---------------------------------------------------------------------------
# Match specs (one per key field of an entry; an absent field is a wildcard)


@dataclass(frozen=True)
class Exact:
    value: int


@dataclass(frozen=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True)
class Ternary:
    value: int
    mask: int


@dataclass(frozen=True)
class Range:
    low: int
    high: int


@dataclass(frozen=True)
class Optional:
    value: int


Match = Exact | Lpm | Ternary | Range | Optional

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional")
_SPEC_FOR_KIND = {"exact": Exact, "lpm": Lpm, "ternary": Ternary, "range": Range, "optional": Optional}
# Kinds for which P4Runtime requires a priority (and for which the highest priority wins).
_PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})


# ---------------------------------------------------------------------------
# Schema: what the program declares


@dataclass(frozen=True)
class KeyField:
    name: str  # control-plane name, e.g. "hdr.ipv4.dstAddr"
    bitwidth: int
    match_kind: str  # one of MATCH_KINDS


@dataclass(frozen=True)
class ActionSchema:
    name: str  # e.g. "MyIngress.set_nhop"
    params: tuple[tuple[str, int], ...] = ()  # (name, bitwidth) in declaration order


@dataclass
class TableSchema:
    name: str
    keys: tuple[KeyField, ...]
    actions: tuple[str, ...]  # action names usable by this table
    default_action: str = "NoAction"
    default_params: dict[str, int] = field(default_factory=dict)
    const_default: bool = False
    size: int = 1024
    entries: list[TableEntry] = field(default_factory=list)  # from the program's `entries`
    const_entries: bool = False
    direct_counter: str | None = None  # name of the direct counter attached, if any
    direct_meter: str | None = None  # name of the direct meter attached, if any
    default_only: frozenset[str] = frozenset()  # actions marked @defaultonly
    table_only: frozenset[str] = frozenset()  # actions marked @tableonly
    support_timeout: bool = False  # `support_timeout = true`: entries may have an idle timeout
    implementation: str | None = None  # action profile/selector name: entries point at members/groups


@dataclass(frozen=True)
class RegisterSchema:
    name: str
    bitwidth: int
    size: int


COUNTER_TYPES = ("packets", "bytes", "packets_and_bytes")


@dataclass(frozen=True)
class CounterSchema:
    name: str
    size: int
    type: str = "packets_and_bytes"  # one of COUNTER_TYPES


@dataclass(frozen=True)
class DirectCounterSchema:
    name: str
    table: str
    type: str = "packets_and_bytes"


METER_TYPES = ("packets", "bytes")
GREEN, YELLOW, RED = 0, 1, 2  # v1model meter colors


@dataclass(frozen=True)
class MeterSchema:
    name: str
    size: int
    type: str = "bytes"  # one of METER_TYPES


@dataclass(frozen=True)
class DirectMeterSchema:
    name: str
    table: str
    type: str = "bytes"


@dataclass(frozen=True)
class ActionProfileSchema:
    """An action profile (members) or, `with_selector`, an action selector (members and groups)."""

    name: str
    size: int  # members it holds
    actions: tuple[str, ...]  # actions its members may run (its tables' actions)
    with_selector: bool = False
    max_group_size: int = 0  # sum of a group's member weights; 0: no limit


@dataclass(frozen=True)
class ValueSetSchema:
    """A parser value set: each member is one value per select key (of `bitwidths`), at most `size` members."""

    name: str
    bitwidths: tuple[int, ...]
    size: int


@dataclass
class ProgramSchema:
    """Everything the control plane may address, keyed by control-plane name."""

    actions: dict[str, ActionSchema] = field(default_factory=dict)
    tables: dict[str, TableSchema] = field(default_factory=dict)
    action_profiles: dict[str, ActionProfileSchema] = field(default_factory=dict)
    registers: dict[str, RegisterSchema] = field(default_factory=dict)
    counters: dict[str, CounterSchema] = field(default_factory=dict)
    direct_counters: dict[str, DirectCounterSchema] = field(default_factory=dict)
    meters: dict[str, MeterSchema] = field(default_factory=dict)
    direct_meters: dict[str, DirectMeterSchema] = field(default_factory=dict)
    value_sets: dict[str, ValueSetSchema] = field(default_factory=dict)
    digests: tuple[str, ...] = ()


# ---------------------------------------------------------------------------
# Meters


@dataclass(frozen=True)
class MeterConfig:
    """Two-rate three-color marker (RFC 2698, color-blind) as BMv2 meters run it.

    Rates are units per second and bursts units, the unit being bytes or packets
    (the meter's type), as in P4Runtime's MeterConfig.
    """

    cir: int
    cburst: int
    pir: int
    pburst: int


def check_meter_config(config: MeterConfig) -> None:
    """InvalidArgument unless the rates and bursts are unsigned 64-bit and pir >= cir."""
    for name in ("cir", "cburst", "pir", "pburst"):
        _check_width(f"meter config {name}", getattr(config, name), 64)
    if config.pir < config.cir:
        raise InvalidArgument("meter config: pir must be >= cir")


class MeterCell:
    """One meter instance: its config (None = unconfigured, always GREEN) and token buckets."""

    __slots__ = ("config", "committed", "peak", "last")

    def __init__(self) -> None:
        self.config: MeterConfig | None = None
        self.committed = self.peak = 0.0
        self.last = 0.0

    def configure(self, config: MeterConfig | None, now: float) -> None:
        if config is not None:
            check_meter_config(config)
        self.config = config
        if config is not None:  # buckets start full
            self.committed, self.peak, self.last = float(config.cburst), float(config.pburst), now

    def execute(self, amount: int, now: float) -> int:
        """Color of a packet of `amount` units arriving at time `now` (seconds)."""
        c = self.config
        if c is None:
            return GREEN
        elapsed = max(0.0, now - self.last)
        self.last = now
        self.peak = min(float(c.pburst), self.peak + elapsed * c.pir)
        self.committed = min(float(c.cburst), self.committed + elapsed * c.cir)
        if self.peak < amount:
            return RED
        self.peak -= amount
        if self.committed < amount:
            return YELLOW
        self.committed -= amount
        return GREEN


# ---------------------------------------------------------------------------
# Entries


@dataclass
class TableEntry:
    """One table entry. `args` (params in declaration order) and counters are filled by the table.

    `packets`/`bytes` are the entry's direct-counter cells (0 when the table has none);
    `meter` its direct-meter cell (None when the table has no direct meter).
    `idle_timeout_ns` (0: never ages) applies in a `support_timeout` table; `last_hit` is the
    time.monotonic() of the insert or of the last packet that hit it.
    In a table with an action profile the entry has no action: it names a member
    (`member_id`) or, with a selector, a group (`group_id`) of the profile.
    """

    match: dict[str, Match]
    action: str
    params: dict[str, int] = field(default_factory=dict)
    priority: int = 0
    packets: int = 0
    bytes: int = 0
    args: tuple[int, ...] = ()
    meter: MeterCell | None = None
    idle_timeout_ns: int = 0
    last_hit: float = 0.0
    member_id: int | None = None
    group_id: int | None = None


@dataclass
class DefaultAction:
    action: str
    params: dict[str, int]
    args: tuple[int, ...]


@dataclass
class CloneSession:
    replicas: list[tuple[int, int]]  # (egress_port, instance)
    packet_length: int = 0  # truncate clones to this many bytes; 0 = whole packet


@dataclass
class PortStats:
    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0


# ---------------------------------------------------------------------------
# Validation helpers


def _check_width(what: str, value: int, bitwidth: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{what}: value must be an integer, got {value!r}")
    if value < 0:
        raise InvalidArgument(f"{what}: value {value} is negative")
    if value >> bitwidth:
        raise InvalidArgument(f"{what}: value {value:#x} does not fit in {bitwidth} bits")


def _check_args(action: ActionSchema, params: dict[str, int], where: str) -> tuple[int, ...]:
    """Validate action params; returns them in declaration order."""
    if len(params) == len(action.params):  # the usual case: every parameter once, nothing else
        try:
            values = tuple(params[n] for n, _ in action.params)
        except KeyError:
            pass
        else:
            for (name, width), value in zip(action.params, values):
                if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >> width:
                    _check_width(f"{where}: action {action.name} param {name}", value, width)
            return values
    declared = {n for n, _ in action.params}
    extra = sorted(set(params) - declared)
    if extra:
        raise InvalidArgument(f"{where}: action {action.name} has no parameter {extra[0]!r}")
    missing = [n for n, _ in action.params if n not in params]
    if missing:
        raise InvalidArgument(f"{where}: action {action.name} is missing parameter {missing[0]!r}")
    for name, width in action.params:
        _check_width(f"{where}: action {action.name} param {name}", params[name], width)
    return tuple(params[n] for n, _ in action.params)


def counter_values(what: str, packets: int, nbytes: int) -> tuple[int, int]:
    """(packets, bytes) to write into a counter cell; InvalidArgument unless both fit its 64 unsigned bits."""
    _check_width(f"{what} packets", packets, 64)
    _check_width(f"{what} bytes", nbytes, 64)
    return packets, nbytes


def _check_index(what: str, index: int, size: int) -> int:
    """`index` if it addresses one of `size` cells; OutOfRange otherwise."""
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < size:
        raise OutOfRange(f"{what}: index {index} out of range 0..{size - 1}")
    return index


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


# ---------------------------------------------------------------------------
# Action profiles and selectors


@dataclass
class ProfileMember:
    """One member: an action with its arguments. `handle` orders members within groups (BMv2's handle)."""

    action: str
    params: dict[str, int]
    args: tuple[int, ...]
    handle: int


@dataclass
class ProfileGroup:
    """A selector group: member id -> weight (as written), its size limit, and the selection list."""

    members: dict[int, int]
    max_size: int = 0
    extra_handles: list[int] = field(default_factory=list)  # handles of weight copies beyond the first
    choices: tuple[ProfileMember, ...] = ()


class ActionProfile:
    """Members (and, with a selector, groups) that the entries of its tables point at.

    A packet that hits an entry pointing at a group runs `choices[hash % len(choices)]`, as
    BMv2 does: its group members ordered by their handle (the lowest free number when the
    member was created), each member `weight` times, the copies beyond the first taking new
    handles when the group is written (BMv2's P4Runtime server adds a member once per unit of
    weight). Members and groups in use (by a group or a table entry) cannot be deleted.
    """

    def __init__(self, schema: ActionProfileSchema, actions: dict[str, ActionSchema]):
        self.schema = schema
        self.name = schema.name
        self._actions = actions
        self.members: dict[int, ProfileMember] = {}
        self.groups: dict[int, ProfileGroup] = {}
        self._handles: set[int] = set()
        self._refs: collections.Counter = collections.Counter()  # ("member"|"group", id) -> users

    # -- members

    def _member_args(self, member_id: int, action: str, params: dict[str, int]) -> tuple[int, ...]:
        where = f"action profile {self.name} member {member_id}"
        _check_width(f"{where} id", member_id, 32)
        if action not in self.schema.actions:
            raise InvalidArgument(f"{where}: action {action!r} is not an action of the profile's tables")
        return _check_args(self._actions[action], params, where)

    def insert_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        args = self._member_args(member_id, action, params)
        if member_id in self.members:
            raise AlreadyExists(f"action profile {self.name}: member {member_id} already exists")
        if len(self.members) >= self.schema.size:
            raise ResourceExhausted(f"action profile {self.name} is full ({self.schema.size} members)")
        self.members[member_id] = ProfileMember(action, dict(params), args, self._take_handle())

    def modify_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        args = self._member_args(member_id, action, params)
        member = self._member(member_id)
        member.action, member.params, member.args = action, dict(params), args  # in place: groups keep it

    def delete_member(self, member_id: int) -> None:
        member = self._member(member_id)
        if self._refs[("member", member_id)]:
            raise FailedPrecondition(f"action profile {self.name}: member {member_id} is still used by a group or entry")
        del self.members[member_id]
        self._handles.discard(member.handle)

    def _member(self, member_id: int) -> ProfileMember:
        try:
            return self.members[member_id]
        except KeyError:
            raise NotFound(f"action profile {self.name}: no member {member_id}") from None

    def _take_handle(self) -> int:
        handle = 0
        while handle in self._handles:
            handle += 1
        self._handles.add(handle)
        return handle

    # -- groups

    def _check_group(self, group_id: int, members: dict[int, int], max_size: int) -> None:
        where = f"action profile {self.name} group {group_id}"
        if not self.schema.with_selector:
            raise InvalidArgument(f"action profile {self.name} has no selector: it has no groups")
        _check_width(f"{where} id", group_id, 32)
        _check_width(f"{where} max_size", max_size, 31)
        limit = self.schema.max_group_size
        if limit and max_size > limit:
            raise InvalidArgument(f"{where}: max_size {max_size} exceeds the profile's max_group_size {limit}")
        for member_id, weight in members.items():
            if not isinstance(weight, int) or weight <= 0 or weight >> 31:
                raise InvalidArgument(f"{where}: member {member_id} weight must be a positive 32-bit integer")
            if member_id not in self.members:
                raise NotFound(f"{where}: no member {member_id}")
        total = sum(members.values())
        for bound in (max_size, limit):
            if bound and total > bound:
                raise ResourceExhausted(f"{where}: member weights add up to {total}, more than {bound}")

    def insert_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        self._check_group(group_id, members, max_size)
        if group_id in self.groups:
            raise AlreadyExists(f"action profile {self.name}: group {group_id} already exists")
        group = self.groups[group_id] = ProfileGroup({}, max_size)
        self._set_group_members(group, members)

    def modify_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        self._check_group(group_id, members, max_size)
        group = self._group(group_id)
        group.max_size = max_size
        self._set_group_members(group, members)

    def delete_group(self, group_id: int) -> None:
        group = self._group(group_id)
        if self._refs[("group", group_id)]:
            raise FailedPrecondition(f"action profile {self.name}: group {group_id} is still used by a table entry")
        self._set_group_members(group, {})
        del self.groups[group_id]

    def _group(self, group_id: int) -> ProfileGroup:
        try:
            return self.groups[group_id]
        except KeyError:
            raise NotFound(f"action profile {self.name}: no group {group_id}") from None

    def _set_group_members(self, group: ProfileGroup, members: dict[int, int]) -> None:
        """Replace a group's members (validated), re-taking the handles of weight copies."""
        for member_id in group.members:
            self._refs[("member", member_id)] -= 1
        self._handles.difference_update(group.extra_handles)
        group.members, group.extra_handles = dict(members), []
        slots = []
        for member_id, weight in members.items():
            self._refs[("member", member_id)] += 1
            member = self.members[member_id]
            slots.append((member.handle, member))
            for _ in range(weight - 1):
                handle = self._take_handle()
                group.extra_handles.append(handle)
                slots.append((handle, member))
        group.choices = tuple(member for _, member in sorted(slots, key=lambda slot: slot[0]))

    # -- table entries pointing here

    def check_reference(self, entry: TableEntry, where: str) -> None:
        """InvalidArgument/FailedPrecondition unless `entry` names exactly one existing member or non-empty group."""
        if entry.action:
            raise InvalidArgument(f"{where}: entries of a table with action profile {self.name} name a member "
                                  "or group, not an action")
        if (entry.member_id is None) == (entry.group_id is None):
            raise InvalidArgument(f"{where}: an entry names either a member or a group of {self.name}")
        if entry.group_id is None:
            if entry.member_id not in self.members:
                raise InvalidArgument(f"{where}: action profile {self.name} has no member {entry.member_id}")
            return
        if not self.schema.with_selector:
            raise InvalidArgument(f"{where}: action profile {self.name} has no selector: entries name members")
        group = self.groups.get(entry.group_id)
        if group is None:
            raise InvalidArgument(f"{where}: action profile {self.name} has no group {entry.group_id}")
        if not group.members:
            raise FailedPrecondition(f"{where}: group {entry.group_id} of {self.name} is empty")

    def reference(self, entry: TableEntry, count: int = 1) -> None:
        """Count (or, with count=-1, uncount) `entry`'s use of its member or group."""
        if entry.member_id is not None:
            self._refs[("member", entry.member_id)] += count
        else:
            self._refs[("group", entry.group_id)] += count

    def pick(self, group_id: int, hash_value: int) -> ProfileMember | None:
        """The member a packet with this selector hash runs; None for an empty group."""
        choices = self.groups[group_id].choices
        return choices[hash_value % len(choices)] if choices else None

    def clear(self) -> None:
        self.members.clear()
        self.groups.clear()
        self._handles.clear()
        self._refs.clear()


# ---------------------------------------------------------------------------
# Tables


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
        args = _check_args(self._actions[action], params, where)
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
            _check_width(what, spec.value, w)
            return ("v", spec.value)
        if isinstance(spec, Lpm):
            _check_width(what, spec.value, w)
            if not isinstance(spec.prefix_len, int) or not 0 <= spec.prefix_len <= w:
                raise InvalidArgument(f"{what}: prefix length {spec.prefix_len} out of range 0..{w}")
            if spec.prefix_len == 0:
                return None
            mask = _prefix_mask(spec.prefix_len, w)
            if spec.value & ~mask:
                raise InvalidArgument(f"{what}: value {spec.value:#x} has bits set beyond /{spec.prefix_len}")
            return ("l", spec.value, spec.prefix_len)
        if isinstance(spec, Ternary):
            _check_width(what, spec.value, w)
            _check_width(what + " mask", spec.mask, w)
            if spec.mask == 0:
                return None
            if spec.value & ~spec.mask:
                raise InvalidArgument(f"{what}: value {spec.value:#x} has bits set outside mask {spec.mask:#x}")
            return ("t", spec.value, spec.mask)
        # range
        _check_width(what + " low", spec.low, w)
        _check_width(what + " high", spec.high, w)
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
        return _check_args(self._actions[entry.action], entry.params, where)

    def _check_mutable(self) -> None:
        if self._const:
            raise PermissionDenied(f"table {self.name} has const entries")

    def _check_idle_timeout(self, entry: TableEntry) -> None:
        _check_width(f"table {self.name} idle_timeout_ns", entry.idle_timeout_ns, 63)
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


# ---------------------------------------------------------------------------
# Stateful externs


class RegisterArray:
    """`values` is a plain list the pipeline indexes directly; it is never replaced."""

    def __init__(self, schema: RegisterSchema):
        self.schema = schema
        self.values: list[int] | np.ndarray = [0] * schema.size  # the native engine's: a view of its memory

    def _index(self, index: int) -> int:
        return _check_index(f"register {self.schema.name}", index, self.schema.size)

    def read(self, index: int) -> int:
        return self.values[self._index(index)]

    def write(self, index: int, value: int) -> None:
        i = self._index(index)
        _check_width(f"register {self.schema.name}[{i}]", value, self.schema.bitwidth)
        self.values[i] = value

    def reset(self) -> None:
        self.values[:] = [0] * self.schema.size


class ValueSet:
    """`members` is the set the parser tests select keys against (tuples, one value per key); never replaced."""

    def __init__(self, schema: ValueSetSchema):
        self.schema = schema
        self.members: set[tuple[int, ...]] = set()

    def write(self, members: list[tuple[int, ...]]) -> None:
        """Make the set exactly `members` (P4Runtime writes a value set whole)."""
        name = self.schema.name
        for m in members:
            if len(m) != len(self.schema.bitwidths):
                raise InvalidArgument(f"value set {name}: a member has {len(m)} values, expected {len(self.schema.bitwidths)}")
            for v, w in zip(m, self.schema.bitwidths):
                _check_width(f"value set {name} member", v, w)
        if len(set(members)) > self.schema.size:
            raise ResourceExhausted(f"value set {name}: {len(set(members))} members, it holds {self.schema.size}")
        self.members.clear()
        self.members.update(members)


class CounterArray:
    """Indirect counter: `packets[i]`, `bytes[i]` lists the pipeline updates in place."""

    def __init__(self, schema: CounterSchema):
        self.schema = schema
        self.packets: list[int] | np.ndarray = [0] * schema.size  # the native engine's: views of its memory
        self.bytes: list[int] | np.ndarray = [0] * schema.size

    def _index(self, index: int) -> int:
        return _check_index(f"counter {self.schema.name}", index, self.schema.size)

    def read(self, index: int) -> tuple[int, int]:
        """(packets, bytes) of cell `index`."""
        i = self._index(index)
        return self.packets[i], self.bytes[i]

    def write(self, index: int, packets: int = 0, nbytes: int = 0) -> None:
        i = self._index(index)
        self.packets[i], self.bytes[i] = counter_values(f"counter {self.schema.name}", packets, nbytes)

    def reset(self) -> None:
        self.packets[:] = [0] * self.schema.size
        self.bytes[:] = [0] * self.schema.size


class MeterArray:
    """Indirect meter: one MeterCell per index."""

    def __init__(self, schema: MeterSchema):
        self.schema = schema
        self.cells = [MeterCell() for _ in range(schema.size)]

    def cell(self, index: int) -> MeterCell:
        return self.cells[_check_index(f"meter {self.schema.name}", index, self.schema.size)]

    def reset(self) -> None:
        for c in self.cells:
            c.configure(None, 0.0)


# ---------------------------------------------------------------------------
# The state object


class State:
    """All mutable state of one switch pipeline; see the module docstring."""

    def __init__(self, schema: ProgramSchema):
        self.schema = schema
        self.lock: AbstractContextManager[Any] = threading.RLock()  # the native engine's holds its mutex too
        self._check_schema()
        self.action_profiles: dict[str, ActionProfile] = {
            n: ActionProfile(p, schema.actions) for n, p in schema.action_profiles.items()}
        self.tables: dict[str, Table] = {
            n: Table(t, schema.actions, self.action_profiles[t.implementation] if t.implementation else None)
            for n, t in schema.tables.items()}
        self.registers: dict[str, RegisterArray] = {n: RegisterArray(r) for n, r in schema.registers.items()}
        self.counters: dict[str, CounterArray] = {n: CounterArray(c) for n, c in schema.counters.items()}
        self.meters: dict[str, MeterArray] = {n: MeterArray(m) for n, m in schema.meters.items()}
        self.value_sets: dict[str, ValueSet] = {n: ValueSet(v) for n, v in schema.value_sets.items()}
        self.multicast_groups: dict[int, list[tuple[int, int]]] = {}
        self.clone_sessions: dict[int, CloneSession] = {}
        self.digests: list[tuple[str, tuple[int, ...]]] = []
        self.port_stats: dict[int, PortStats] = {}
        self.log: collections.deque[str] = collections.deque(maxlen=1000)  # log_msg output and packet errors

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

    @staticmethod
    def _check_replicas(what: str, replicas: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out = []
        for item in replicas:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise InvalidArgument(f"{what}: replica {item!r} is not (port, id)")
            port, rid = item
            _check_width(f"{what} port", port, 9)
            _check_width(f"{what} instance", rid, 16)
            out.append((port, rid))
        return out

    def mc_group_insert(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """Create multicast group `group_id` with (egress_port, rid) replicas."""
        with self.lock:
            _check_width("multicast group id", group_id, 16)
            if group_id == 0:
                raise InvalidArgument("multicast group id 0 is reserved (no multicast)")
            reps = self._check_replicas(f"multicast group {group_id}", replicas)
            if group_id in self.multicast_groups:
                raise AlreadyExists(f"multicast group {group_id} already exists")
            self.multicast_groups[group_id] = reps

    def mc_group_modify(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        with self.lock:
            reps = self._check_replicas(f"multicast group {group_id}", replicas)
            if group_id not in self.multicast_groups:
                raise NotFound(f"multicast group {group_id} does not exist")
            self.multicast_groups[group_id] = reps

    def mc_group_delete(self, group_id: int) -> None:
        with self.lock:
            if self.multicast_groups.pop(group_id, None) is None:
                raise NotFound(f"multicast group {group_id} does not exist")

    def clone_session_insert(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        """Create clone session `session_id`: (egress_port, instance) replicas, optional truncation."""
        with self.lock:
            _check_width("clone session id", session_id, 32)
            reps = self._check_replicas(f"clone session {session_id}", replicas)
            _check_width(f"clone session {session_id} packet_length", packet_length, 32)
            if session_id in self.clone_sessions:
                raise AlreadyExists(f"clone session {session_id} already exists")
            self.clone_sessions[session_id] = CloneSession(reps, packet_length)

    def clone_session_modify(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        with self.lock:
            reps = self._check_replicas(f"clone session {session_id}", replicas)
            _check_width(f"clone session {session_id} packet_length", packet_length, 32)
            if session_id not in self.clone_sessions:
                raise NotFound(f"clone session {session_id} does not exist")
            self.clone_sessions[session_id] = CloneSession(reps, packet_length)

    def clone_session_delete(self, session_id: int) -> None:
        with self.lock:
            if self.clone_sessions.pop(session_id, None) is None:
                raise NotFound(f"clone session {session_id} does not exist")

    # -- digests and stats

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        """Remove and return every queued (digest name, field values) in arrival order."""
        with self.lock:
            out = list(self.digests)
            self.digests.clear()  # in place: the pipeline holds a reference to this list
            return out

    def port(self, port: int) -> PortStats:
        """Stats record for `port`, created on first use."""
        stats = self.port_stats.get(port)
        if stats is None:
            stats = self.port_stats[port] = PortStats()
        return stats

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
            self.multicast_groups.clear()
            self.clone_sessions.clear()
            self.digests.clear()
