"""What the program declares, as the control plane addresses it (ProgramSchema), and the entries written
against it: the match of each key field, a table entry, a default action.

The state knows the program only through a `ProgramSchema` (tables, actions, registers, counters, ...):
p4target.lowered.schema builds it from the lowered form, tests can build it by hand. Everything is
addressed by control-plane names (P4Info names such as "MyIngress.ipv4_lpm", "hdr.ipv4.dstAddr") and plain
Python ints; no P4Info IDs."""
from __future__ import annotations

from dataclasses import dataclass, field

from p4target.state.cells import (
    CounterSchema,
    DirectCounterSchema,
    DirectMeterSchema,
    MeterCell,
    MeterSchema,
    RegisterSchema,
    ValueSetSchema,
)
from p4target.state.errors import InvalidArgument, check_width

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
class ActionProfileSchema:
    """An action profile (members) or, `with_selector`, an action selector (members and groups)."""

    name: str
    size: int  # members it holds
    actions: tuple[str, ...]  # actions its members may run (its tables' actions)
    with_selector: bool = False
    max_group_size: int = 0  # sum of a group's member weights; 0: no limit


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


def check_args(action: ActionSchema, params: dict[str, int], where: str) -> tuple[int, ...]:
    """Validate action params; returns them in declaration order."""
    if len(params) == len(action.params):  # the usual case: every parameter once, nothing else
        try:
            values = tuple(params[n] for n, _ in action.params)
        except KeyError:
            pass
        else:
            for (name, width), value in zip(action.params, values):
                if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >> width:
                    check_width(f"{where}: action {action.name} param {name}", value, width)
            return values
    declared = {n for n, _ in action.params}
    extra = sorted(set(params) - declared)
    if extra:
        raise InvalidArgument(f"{where}: action {action.name} has no parameter {extra[0]!r}")
    missing = [n for n, _ in action.params if n not in params]
    if missing:
        raise InvalidArgument(f"{where}: action {action.name} is missing parameter {missing[0]!r}")
    for name, width in action.params:
        check_width(f"{where}: action {action.name} param {name}", params[name], width)
    return tuple(params[n] for n, _ in action.params)
