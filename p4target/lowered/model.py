"""The lowered form: a v1model program as the engines see it, shaped after BMv2's JSON.

p4c's BMv2 back end lowers a program to parse states of parser operations, actions as
lists of primitive calls, pipelines of tables and conditionals, calculations and extern
instances (BMv2's `docs/JSON_format.md`). This module is that shape as typed Python
objects, so p4c's JSON (`p4target.lowered.bmv2_json`) and, later, our own front end enter
the engines the same way. Names and meanings follow the JSON; where the JSON spells a
thing as a `{"type": ..., "value": ...}` object, here it is one small class per type.

Values are unbounded integers, as in BMv2: arithmetic has infinite precision and a value
is truncated to a field's width when it is written into the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, TypeVar

# ---------------------------------------------------------------------------------------------
# Values: what BMv2 calls type-value objects (primitive arguments, expression operands, keys)


@dataclass(frozen=True)
class Field:
    """`header.field`; `field` may be `$valid$` (the header's validity bit, read-only)."""

    header: str
    field: str


@dataclass(frozen=True)
class Const:
    """A `hexstr` (possibly negative); `width` only where the JSON gives one (calculation inputs)."""

    value: int
    width: int | None = None


@dataclass(frozen=True)
class BoolConst:
    value: bool


@dataclass(frozen=True)
class HeaderRef:
    """A whole header instance (`header`)."""

    name: str


@dataclass(frozen=True)
class StackRef:
    """A header stack (`header_stack`)."""

    name: str


@dataclass(frozen=True)
class UnionRef:
    """A header union instance (`header_union`)."""

    name: str


@dataclass(frozen=True)
class UnionStackRef:
    """A header union stack (`header_union_stack`)."""

    name: str


@dataclass(frozen=True)
class ActionParam:
    """The action's runtime data (`runtime_data` in a primitive, `local` inside an expression)."""

    index: int


@dataclass(frozen=True)
class Named:
    """A named object: `kind` is calculation, register_array, counter_array, meter_array or extern."""

    kind: str
    name: str


@dataclass(frozen=True)
class String:
    value: str


@dataclass(frozen=True)
class Lookahead:
    """`lookahead` in a parser: `width` bits starting `offset` bits past the cursor."""

    offset: int
    width: int


@dataclass(frozen=True)
class RegisterCell:
    """`register`: one cell of a register array, read in an expression."""

    name: str
    index: Value


@dataclass(frozen=True)
class StackField:
    """`stack_field`: a field of the last valid header of a stack."""

    stack: str
    field: str


@dataclass(frozen=True)
class UnionStackField:
    """`union_stack_field`: a field of a member of the last valid union of a union stack."""

    stack: str
    member: str
    field: str


@dataclass(frozen=True)
class Payload:
    """`payload` in a calculation: the headers after the last input and the packet's payload."""


@dataclass(frozen=True)
class ValueList:
    """`parameters_vector` (log_msg's values)."""

    items: tuple[Value, ...]


@dataclass(frozen=True)
class Expr:
    """An `expression`: `op` applied to `left` (None for unary ops) and `right`; `cond` for `?`.

    For `access_field` and `access_union_header`, `right` is a Const holding the offset.
    """

    op: str
    left: Value | None
    right: Value | None
    cond: Value | None = None


Value = (Field | Const | BoolConst | HeaderRef | StackRef | UnionRef | UnionStackRef | ActionParam | Named
         | String | Lookahead | RegisterCell | StackField | UnionStackField | Payload | ValueList | Expr)

BINARY_OPS = frozenset({"+", "-", "*", "/", "%", "<<", ">>", "==", "!=", ">", ">=", "<", "<=", "and", "or",
                        "&", "|", "^", "two_comp_mod", "sat_cast", "usat_cast", "dereference_header_stack",
                        "access_field", "dereference_union_stack", "access_union_header", "?"})
UNARY_OPS = frozenset({"not", "~", "valid", "valid_union", "d2b", "b2d", "last_stack_index", "size_stack",
                       "-"})

# ---------------------------------------------------------------------------------------------
# Data layout


@dataclass
class FieldType:
    """One field of a header type: `width` in bits, None for the variable-length field."""

    name: str
    width: int | None
    signed: bool = False


@dataclass
class HeaderType:
    name: str
    id: int
    fields: list[FieldType]
    max_length: int | None = None  # bytes, when a field is variable-length

    def field(self, name: str) -> FieldType | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass
class Header:
    """A header instance; `metadata` ones are never parsed or emitted and are always valid."""

    name: str
    id: int
    header_type: str
    metadata: bool


@dataclass
class HeaderStack:
    name: str
    id: int
    header_type: str
    header_ids: list[int]


@dataclass
class HeaderUnionType:
    name: str
    id: int
    headers: list[tuple[str, str]]  # (member name, header type name)


@dataclass
class HeaderUnion:
    name: str
    id: int
    union_type: str
    header_ids: list[int]


@dataclass
class HeaderUnionStack:
    name: str
    id: int
    union_type: str
    header_union_ids: list[int]


@dataclass
class FieldList:
    """Fields preserved across resubmit/recirculate/clone (v1model's @field_list index)."""

    id: int
    name: str
    elements: list[Field]


# ---------------------------------------------------------------------------------------------
# Parsers and deparsers


@dataclass
class Primitive:
    """A primitive call: in an action, a parser state (`primitive` op) or a deparser. `source`: where in the
    P4 source it came from, `FILE:LINE:COL` (BMv2's `source_info`; empty where unknown)."""

    op: str
    parameters: list[Value]
    source: str = ""


@dataclass
class ParserOp:
    """`extract`, `extract_VL`, `set`, `verify`, `shift`, `advance` or `primitive`.

    For extract ops the first parameter is a HeaderRef (`regular`), a StackRef (`stack`: the
    stack's next element) or a UnionStackField-like pair (`union_stack`: UnionStackRef plus the
    member name as a String).
    """

    op: str
    parameters: list[Value]


@dataclass
class Transition:
    """`kind` is `hexstr` (value/mask), `parse_vset` (`vset` names the set) or `default`."""

    kind: str
    value: int | None
    mask: int | None
    next_state: str | None  # None: the parser accepts
    vset: str | None = None


@dataclass
class ParseState:
    name: str
    id: int
    parser_ops: list[ParserOp]
    transition_key: list[Value]
    transitions: list[Transition]


@dataclass
class Parser:
    name: str
    id: int
    init_state: str
    parse_states: list[ParseState]

    def state(self, name: str) -> ParseState | None:
        return next((s for s in self.parse_states if s.name == name), None)


@dataclass
class ParseVset:
    name: str
    id: int
    compressed_bitwidth: int
    max_size: int


@dataclass
class Deparser:
    name: str
    id: int
    order: list[str]  # header instance names, emitted in this order when valid
    primitives: list[Primitive] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Stateful objects


@dataclass
class CounterArray:
    name: str
    id: int
    size: int
    is_direct: bool
    binding: str | None  # the table of a direct counter
    # P4Info's unit (a lowered-form extension: BMv2's JSON lacks it, our lowering sets it and a P4Info given
    # with p4c's JSON fills it, p4target.load.keep_p4info_details)
    type: str = "packets_and_bytes"


@dataclass
class MeterArray:
    name: str
    id: int
    size: int
    type: str  # bytes | packets
    rate_count: int
    is_direct: bool
    binding: str | None
    result_target: Field | None  # where a direct meter writes its color


@dataclass
class RegisterArray:
    name: str
    id: int
    size: int
    bitwidth: int


@dataclass
class Calculation:
    """A hash over a list of inputs, named so checksums and hash primitives can use it."""

    name: str
    id: int
    algo: str
    input: list[Value]


@dataclass
class LearnList:
    """A digest: `elements` are the fields sent to the controller."""

    id: int
    name: str
    elements: list[Field]


@dataclass
class Checksum:
    """verify_checksum/update_checksum: `calculation` over the inputs into `target`."""

    name: str
    id: int
    target: Field
    type: str
    calculation: str
    verify: bool
    update: bool
    if_cond: Value | None


@dataclass
class ExternInstance:
    name: str
    id: int
    type: str
    attribute_values: dict[str, Value]


# ---------------------------------------------------------------------------------------------
# Actions and pipelines


@dataclass
class Action:
    name: str
    id: int
    runtime_data: list[tuple[str, int]]  # (parameter name, bitwidth)
    primitives: list[Primitive]


@dataclass
class ActionEntry:
    """An action with its data: a default entry or a const entry's action."""

    action_id: int
    action_data: list[int]


@dataclass
class KeyElement:
    match_type: str  # exact | lpm | ternary | range | optional | valid
    target: Field | HeaderRef
    mask: int | None
    name: str


@dataclass
class MatchValue:
    """One key element of a const entry; which attributes hold depends on the match type."""

    match_type: str
    key: int | bool | None = None
    mask: int | None = None
    prefix_length: int | None = None
    start: int | None = None
    end: int | None = None


@dataclass
class TableEntry:
    match_key: list[MatchValue]
    action_entry: ActionEntry
    priority: int


@dataclass
class DefaultEntry:
    action_id: int
    action_const: bool
    action_data: list[int]
    action_entry_const: bool


@dataclass
class Table:
    name: str
    id: int
    match_type: str
    type: str  # simple | indirect | indirect_ws
    max_size: int
    with_counters: bool
    support_timeout: bool
    key: list[KeyElement]
    action_ids: list[int]
    actions: list[str]
    next_tables: dict[str, str | None]  # action name (or __HIT__/__MISS__) -> next node
    base_default_next: str | None
    default_entry: DefaultEntry | None
    entries: list[TableEntry]
    action_profile: str | None = None
    direct_meters: str | None = None
    # P4Info's action scopes (@defaultonly / @tableonly): BMv2's JSON lacks them, our lowering sets them and a
    # P4Info given with p4c's JSON fills them (p4target.load.keep_p4info_details)
    default_only: frozenset[str] = frozenset()
    table_only: frozenset[str] = frozenset()


@dataclass
class Conditional:
    name: str
    id: int
    expression: Value
    true_next: str | None
    false_next: str | None


@dataclass
class Selector:
    algo: str
    input: list[Value]


@dataclass
class ActionProfile:
    name: str
    id: int
    max_size: int
    selector: Selector | None
    max_group_size: int = 0  # a selector's @max_group_size (0: no limit); set as CounterArray.type is


@dataclass
class Pipeline:
    """A control as a graph: `init_table` names the first node (table or conditional)."""

    name: str
    id: int
    init_table: str | None
    tables: list[Table]
    conditionals: list[Conditional]
    action_profiles: list[ActionProfile]


# ---------------------------------------------------------------------------------------------
# The program


class _HasName(Protocol):
    name: str


_Named = TypeVar("_Named", bound=_HasName)


@dataclass
class Program:
    """Everything an engine runs; `source` names where it came from (for messages)."""

    source: str
    header_types: list[HeaderType] = field(default_factory=list)
    headers: list[Header] = field(default_factory=list)
    header_stacks: list[HeaderStack] = field(default_factory=list)
    header_union_types: list[HeaderUnionType] = field(default_factory=list)
    header_unions: list[HeaderUnion] = field(default_factory=list)
    header_union_stacks: list[HeaderUnionStack] = field(default_factory=list)
    field_lists: list[FieldList] = field(default_factory=list)
    errors: list[tuple[str, int]] = field(default_factory=list)
    enums: dict[str, dict[str, int]] = field(default_factory=dict)
    parsers: list[Parser] = field(default_factory=list)
    parse_vsets: list[ParseVset] = field(default_factory=list)
    deparsers: list[Deparser] = field(default_factory=list)
    meter_arrays: list[MeterArray] = field(default_factory=list)
    counter_arrays: list[CounterArray] = field(default_factory=list)
    register_arrays: list[RegisterArray] = field(default_factory=list)
    calculations: list[Calculation] = field(default_factory=list)
    learn_lists: list[LearnList] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    pipelines: list[Pipeline] = field(default_factory=list)
    checksums: list[Checksum] = field(default_factory=list)
    extern_instances: list[ExternInstance] = field(default_factory=list)
    field_aliases: dict[str, Field] = field(default_factory=dict)

    def header_type(self, name: str) -> HeaderType:
        return self._by_name(self.header_types, name)

    def header(self, name: str) -> Header:
        return self._by_name(self.headers, name)

    def action(self, action_id: int) -> Action:
        return next(a for a in self.actions if a.id == action_id)

    def pipeline(self, name: str) -> Pipeline:
        return self._by_name(self.pipelines, name)

    @staticmethod
    def _by_name(items: list[_Named], name: str) -> _Named:
        return next(x for x in items if x.name == name)


def field_reads(node: object) -> dict[Field, int]:
    """How often each field may be read in `node` (any part of a program), so a back end can tell which
    values nothing reads: every naming of a field counts except as the destination of an assignment or a
    register read; a header named whole (HeaderRef) counts as a read of its `*` field."""
    reads: dict[Field, int] = {}
    todo = [node]
    while todo:
        x = todo.pop()
        if isinstance(x, Field):
            reads[x] = reads.get(x, 0) + 1
        elif isinstance(x, HeaderRef):
            key = Field(x.name, "*")
            reads[key] = reads.get(key, 0) + 1
        elif isinstance(x, Primitive) and x.op in _WRITES_FIRST and x.parameters and isinstance(x.parameters[0], Field):
            todo.extend(x.parameters[1:])
        elif isinstance(x, (list, tuple)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
        elif hasattr(x, "__dataclass_fields__"):
            todo.extend(getattr(x, name) for name in x.__dataclass_fields__)
    return reads


_WRITES_FIRST = frozenset({"assign", "modify_field", "register_read"})  # primitives whose parameter 0 is written
