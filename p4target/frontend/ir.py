"""Typed IR of a P4_16 v1model program, as produced by `p4target.frontend.load_program`.

Everything here is a plain dataclass. The front end has already resolved every name and
checked every type, so consumers (the interpreter, the P4Info generator, the STF runner)
never look anything up by string except where noted.

The checker (checker/) builds this IR; the passes (passes/) then LOWER it, and
load_program returns the lowered program: what p4target.lowered.from_ir lowers into the
lowered form both engines run; section
"After lowering" below says exactly what it may contain.

How to walk a Program
---------------------
`Program` holds:
  - `types`: every named type (HeaderType, StructType, EnumType, ...) by name, core.p4 and
    v1model.p4 ones included (`standard_metadata_t`, `CounterType`, ...). Typedefs are already
    replaced by what they name; `typedefs` keeps the name -> Type map for reference.
  - `errors` (the `error` members, core ones first) and `match_kinds` (exact, ternary, lpm,
    range, optional, selector).
  - `constants`: top-level `const` values (already folded into every expression using them).
  - `actions`: top-level actions (NoAction from core.p4 and any the program declares).
  - `externs` (extern object declarations by name) and `extern_functions` (name -> list of
    overloads, e.g. mark_to_drop() and mark_to_drop(inout standard_metadata_t)).
  - `parsers` / `controls`: the parser/control blocks by name (after lowering: only those
    `main` runs).
  - `main`: the `V1SwitchInstance` saying which Parser/Control is bound to each v1model stage:
    parser, verify_checksum, ingress, egress, compute_checksum, deparser.

A `Parser` has `params` (directional; e.g. `packet_in packet`, `out headers hdr`),
`locals` (VarDecl / ExternInstance declared before the states) and `states`
(name -> ParserState, in source order; `start` always present; `accept` / `reject` are NOT
in the dict, transitions just name them). Each `ParserState` has `body` (statements,
mostly `MethodCallStmt(ExternMethodCall(packet, "extract", ...))`, assignments, `verify`
as an ExternFunctionCall) and a `transition`: either `DirectTransition(next)` or
`SelectTransition(keys, cases)` where every `SelectCase` lists one KeySet per key
(`KsDefault`, `KsValue`, `KsMask`, `KsRange`) and the next state's name. A case list with
no matching case means reject with error.NoMatch.

A `Control` has `params`, `locals` in declaration order: `Action`, `Table`, `ExternInstance`
(register<T>(N), counter(N, CounterType.x), direct_counter(CounterType.x), meter(N, MeterType.x),
direct_meter<T>(MeterType.x)) and `VarDecl` (control-level variables, reset per packet);
`actions`, `tables`, `instances` index those by their local name. `body` is the apply block.

Statements: Block, Assign, MethodCallStmt (wraps any call expression), If, Switch, Exit,
Return, VarDeclStmt; in action bodies also Loop and LoopJump (a for loop whose trip count is
not known at compile time; the checker unrolls the others). `Switch.subject` is either `ActionRun(table)` (labels are Action
objects) or an expression of bit/int/enum type (labels are Expr constants); a label of
`None` is `default`. A case with `body=None` falls through to the next case's body.

Expressions (every one has `.type` and `.loc`):
  Constant (int, typed bits/int/InfInt), BoolLiteral, StringLiteral, VarRef (local var or
  parameter: `.decl` is the Param/VarDecl object, compare by identity), Member (header/struct
  field; for stacks also `next`, `last`, `lastIndex`), ArrayIndex (stack element),
  Slice (`e[hi:lo]`), Unary, Binary, Mux (`c ? a : b`), Cast, ListExpr (`{a, b}`),
  StructExpr (`{f = a, ...}` typed by context), EnumMember, ErrorMember, InstanceRef
  (extern instance), and the calls:
    ExternMethodCall(target, method, args, type_args): packet.extract/emit/lookahead/advance,
        register.read/write, counter.count, meter.execute_meter, direct_counter.count, ...
    ExternFunctionCall(name, args, type_args): type_args are the bound type parameters
        (explicit `digest<my_digest_t>(...)` or inferred), e.g. digest's T; mark_to_drop, hash, clone,
        clone_preserving_field_list, verify, verify_checksum, update_checksum, digest, random,
        log_msg, assert, assume, truncate, resubmit..., recirculate...
    ActionCall(action, args): a direct call of an action from a control body/action.
    HeaderMethodCall(header, method): isValid (bool), setValid/setInvalid (void);
        also push_front/pop_front(count) on stacks.
    TableApply(table): `t.apply()` as a statement; `TableHitMiss(table, "hit"|"miss")`
        is `t.apply().hit` / `.miss` (applies the table and yields bool).
  Call arguments are positional, in declaration order (named arguments are reordered);
  `ExternFunctionCall.decl` / `ExternMethodCall.decl` / `ActionCall.action` give the callee
  params with their directions (out/inout arguments are l-values the callee writes).
  In a ListExpr given to hash/checksum/digest/log_msg the element types are kept as written.

Types: BitsType(w), IntType(w), BoolType, VarbitType(max), InfIntType (untyped literal; only
left where P4 allows it: array indexes, slice bounds, constructor args of InfInt params),
StringType, VoidType, ErrorType, MatchKindType, HeaderType / StructType / HeaderUnionType
(fields in order; compare by identity), StackType(element, size), EnumType (members; a
serializable enum has `underlying` and `values`), TupleType (ListExpr), ExternType (the type
of an extern instance or packet_in/packet_out param), ActionRunType/TableResultType internal.

After lowering
--------------
What the checker accepts but no back end sees (each removed by the pass named):
  - FunctionCall and Function (passes/functions.py: inlined; `Program.functions` is empty);
  - BlockInstance and ApplyCall (passes/blocks.py: sub-parsers and sub-controls inlined;
    their tables/actions/externs/variables are locals of the v1model block, keyed
    `inst.name` + "." + local name in `Control.tables` etc., named for P4Info by the
    checker: `MyIngress.sub.t`);
  - ActionRef.args (passes/action_args.py: a table that binds directional arguments gets
    its own copy of the action, same name, only directionless parameters);
  - NewType (passes/new_types.py: every type is the underlying one);
  - Cast to InfIntType of a run-time value, `(int)x`, and arithmetic on it (passes/int_values.py: 0, as
    p4c's BMv2 back end computes it, folded into what uses it; passes/unroll.py reads it first);
  - Binary `/` and `%` (passes/strength.py: powers of two became `>>` and `&`;
    bmv2_limits.py refuses the rest, as p4c's BMv2 back end does);
  - control-level VarDecl initializers (passes/initializers.py: the first statements of
    the apply block); `Program.instances` (top-level externs: a local of the first block
    using them, global name kept).
What remains, and how to read it:
  - `Program.parsers` / `controls`: exactly the blocks `main` runs (nothing else).
  - Control.locals: Action, Table, ExternInstance, VarDecl (no initializer; reset to zero
    / invalid each time the control runs). Parser.locals: VarDecl (an initializer, if any,
    is a constant expression evaluated when parsing starts), ExternInstance and ValueSet
    (a select case of KsValueSet matches all the select's keys against it).
  - Statements: Block, Assign, MethodCallStmt, If, Switch, Exit, VarDeclStmt, and Return
    only directly in a v1model control's body or an action (it leaves that control or
    action; inlined code has none left).
  - A MethodCallStmt calls ExternMethodCall, ExternFunctionCall, ActionCall,
    HeaderMethodCall, TableApply or TableHitMiss.
  - ActionCall (a control calling an action directly): in/inout arguments are copied in,
    out/inout ones copied out after the body, also when the body executes `exit`.
  - Expressions are free of side effects except TableHitMiss (applies its table; evaluate
    operands left to right, `&&`/`||`/`?:` short-circuit) and ActionRun (only a Switch
    subject). `packet.lookahead<T>()` of a header or struct T appears only as the whole
    right side of an Assign (fields from the next bits; a header comes out valid) or as a
    statement (then only the PacketTooShort check matters); of bit/int/bool anywhere in a
    parser.
  - Slices are never nested (x[a:b][c:d] is x[b+c:b+d]); a Slice may be an l-value: the
    left side of an Assign or an out/inout argument.
  - Header unions: setValid/extract/assignment of a member are already followed by
    statements invalidating its siblings (passes/header_unions.py): a back end can store a
    union like a struct of headers; `isValid()` of the union is "any member valid".
  - Header stacks: Member `next`/`last` only in a parser (`extract(s.next)`,
    `extract(union_stack.next.member)`), `lastIndex` only in a parser; ArrayIndex with a
    run-time bit<W>/int<W> index anywhere; push_front/pop_front with a constant count.
    `==` on stacks compares their headers (not the next index).
  - varbit<W> fields (headers only): `packet.extract(h, bits)` (ExternMethodCall with two
    args) checks as BMv2 does: (fixed + bits) % 8 != 0 -> ParserInvalidArgument,
    bits > W -> HeaderTooShort, then PacketTooShort; emit writes the current length; copies
    and `==` include the length; in hash/checksum data a varbit contributes its current bits.
  - A header field may be a struct of fixed-width fields (laid out in place on the wire).
  - TupleType only types ListExpr arguments of hash/digest/checksum/log_msg (tuple
    variables are StructTypes with fields f0, f1, ...).
  - `TableEntry.priority` follows P4Runtime (largest wins); @priority annotations (BMv2:
    smallest wins) were converted by the checker.
  - BMv2's limits hold (passes/bmv2_limits.py): widths <= 2048, constant shift amounts
    <= 256, headers of whole bytes, each table applied at most once per path.

Control-plane naming (P4Info): `Table.control_plane_name`, `Action.control_plane_name`,
`ExternInstance.control_plane_name` apply the p4c rule: an `@name("x")` annotation wins
(a leading '.' means a global name: the dot is stripped, no prefix), otherwise the local name;
objects declared inside a control are prefixed with that control's name
(`MyIngress.ipv4_lpm`). Top-level actions are not prefixed (`NoAction`). `@id(N)` is
`annotations.get_int("id")`.

Annotations: `Annotations` is a list of `Annotation(name, args)`; args are the evaluated
values (str for string literals, int for numbers, str for other tokens as written).
Examples: @name("x") -> ["x"], @id(5) -> [5], @field_list(1) -> [1], @hidden -> [],
@controller_header("packet_in") -> ["packet_in"], @defaultonly, @tableonly, @priority.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from p4target.errors import P4Error

# --------------------------------------------------------------------------- locations


@dataclass(frozen=True)
class Loc:
    """Where a node came from, in the ORIGINAL file (before includes/macros)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOWHERE = Loc("<builtin>", 0, 0)


# --------------------------------------------------------------------------- annotations


@dataclass
class Annotation:
    """`@name(args)`; args evaluated to Python values (str / int), none for a free-form body. `body`:
    the body's tokens joined by spaces (how P4Info spells it), None without one. `structured`:
    `@name[...]`, whose args are values or (key, value) pairs."""

    name: str
    args: list = field(default_factory=list)
    loc: Loc = NOWHERE
    body: str | None = None
    structured: bool = False


class Annotations(list):
    """A list of Annotation with lookups by name."""

    def get(self, name: str) -> Annotation | None:
        """The last annotation called `name`, or None."""
        found = None
        for a in self:
            if a.name == name:
                found = a
        return found

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    def get_str(self, name: str) -> str | None:
        """First argument of @name(...) as a string, e.g. @name("x") -> "x"."""
        a = self.get(name)
        return str(a.args[0]) if a is not None and a.args else None

    def get_int(self, name: str) -> int | None:
        """First argument of @name(...) as an int, e.g. @id(5) -> 5."""
        a = self.get(name)
        if a is None or not a.args or not isinstance(a.args[0], int):
            return None
        return a.args[0]


# --------------------------------------------------------------------------- types


class Type:
    """Base of every P4 type."""

    def __str__(self) -> str:  # p4c-style spelling, used in error messages
        return type(self).__name__


@dataclass(frozen=True)
class BitsType(Type):
    """bit<width>: unsigned, arithmetic wraps modulo 2**width."""

    width: int

    def __str__(self) -> str:
        return f"bit<{self.width}>"


@dataclass(frozen=True)
class IntType(Type):
    """int<width>: two's complement signed, arithmetic wraps."""

    width: int

    def __str__(self) -> str:
        return f"int<{self.width}>"


@dataclass(frozen=True)
class VarbitType(Type):
    """varbit<max_width>."""

    max_width: int

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(frozen=True)
class BoolType(Type):
    def __str__(self) -> str:
        return "bool"


@dataclass(frozen=True)
class InfIntType(Type):
    """Arbitrary-precision integer of an untyped literal (`int` in p4c messages)."""

    def __str__(self) -> str:
        return "int"


@dataclass(frozen=True)
class StringType(Type):
    def __str__(self) -> str:
        return "string"


@dataclass(frozen=True)
class VoidType(Type):
    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True)
class ErrorType(Type):
    def __str__(self) -> str:
        return "error"


@dataclass(frozen=True)
class MatchKindType(Type):
    def __str__(self) -> str:
        return "match_kind"


@dataclass(frozen=True)
class DontCareType(Type):
    """Type of `_` in a select keyset or as an out argument."""

    def __str__(self) -> str:
        return "_"


@dataclass(eq=False)
class Field:
    """A header/struct field."""

    name: str
    type: Type
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class StructLikeType(Type):
    """Common shape of header, header_union and struct types. Compared by identity."""

    name: str
    fields: list[Field] = field(default_factory=list)
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    __hash__ = object.__hash__


@dataclass(eq=False)
class HeaderType(StructLikeType):
    """header: fields of bit/int/varbit types plus a hidden validity bit."""

    def width(self) -> int:
        """Total width in bits (varbit fields count their maximum)."""
        return sum(width_of(f.type) for f in self.fields)

    __hash__ = object.__hash__


@dataclass(eq=False)
class HeaderUnionType(StructLikeType):
    __hash__ = object.__hash__


@dataclass(eq=False)
class StructType(StructLikeType):
    __hash__ = object.__hash__


@dataclass(frozen=True)
class StackType(Type):
    """H[size], a header stack."""

    element: Type
    size: int

    def __str__(self) -> str:
        return f"{self.element}[{self.size}]"


@dataclass(eq=False)
class EnumType(Type):
    """enum NAME {A, B} or, serializable, enum bit<8> NAME {A = 1, B = 2}."""

    name: str
    members: list[str] = field(default_factory=list)
    underlying: Type | None = None  # BitsType/IntType for serializable enums
    values: dict[str, int] = field(default_factory=dict)  # serializable enums only
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"EnumType({self.name!r})"

    __hash__ = object.__hash__


@dataclass(eq=False)
class NewType(Type):
    """`type bit<32> T;`: a type of its own with `underlying`'s values (only casts convert
    between them). Lowered away: back ends see `underlying`."""

    name: str
    underlying: Type
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE

    def __str__(self) -> str:
        return self.name

    __hash__ = object.__hash__


@dataclass(frozen=True)
class TupleType(Type):
    """Type of a list expression `{a, b}` (and tuple<...>)."""

    elements: tuple

    def __str__(self) -> str:
        return "tuple<" + ", ".join(str(e) for e in self.elements) + ">"


@dataclass(eq=False)
class ExternType(Type):
    """An extern object type, e.g. register<bit<32>>, counter, packet_in.

    `decl` is the ExternDecl; `type_args` the bound type arguments.
    """

    name: str
    type_args: tuple[Type, ...]
    decl: ExternDecl = field(repr=False)

    def __str__(self) -> str:
        if self.type_args:
            return f"{self.name}<" + ", ".join(str(t) for t in self.type_args) + ">"
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExternType) and other.name == self.name and other.type_args == self.type_args

    def __hash__(self) -> int:
        return hash((self.name, self.type_args))


@dataclass(eq=False)
class TypeVar(Type):
    """A type parameter of a generic extern declaration (T in register<T>)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TableResultType(Type):
    """Type of `t.apply()`: has .hit, .miss, .action_run."""

    table: str

    def __str__(self) -> str:
        return f"apply_result({self.table})"


@dataclass(frozen=True)
class ActionRunType(Type):
    """Type of `t.apply().action_run` (only usable as a switch subject)."""

    table: str

    def __str__(self) -> str:
        return f"action_list({self.table})"


@dataclass(eq=False)
class ParserOrControlType(Type):
    """Type of a parser/control declaration, used for V1Switch arguments."""

    name: str
    kind: str  # "parser" or "control"

    def __str__(self) -> str:
        return self.name


def _fixed_width(t: Type) -> int:
    if isinstance(t, (BitsType, IntType)):
        return t.width
    if isinstance(t, VarbitType):
        return t.max_width
    if isinstance(t, BoolType):
        return 1
    if isinstance(t, (EnumType, NewType)) and t.underlying is not None:
        return _fixed_width(t.underlying)
    raise TypeError(f"{t} has no fixed width")


def width_of(t: Type) -> int:
    """Bit width of a bit/int/bool/serializable-enum/header type (for extract, casts)."""
    if isinstance(t, HeaderType):
        return t.width()
    if isinstance(t, StructType):
        return sum(width_of(f.type) for f in t.fields)
    return _fixed_width(t)


# --------------------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr:
    """Base of expressions. `type` is the resolved type, `loc` the source location."""

    type: Type
    loc: Loc


@dataclass(eq=False)
class Constant(Expr):
    """An integer. For bit<w> 0 <= value < 2**w; for int<w> the signed value; InfInt any."""

    value: int = 0
    base: int = 10  # as written, for pretty-printing only


@dataclass(eq=False)
class BoolLiteral(Expr):
    value: bool = False


@dataclass(eq=False)
class StringLiteral(Expr):
    value: str = ""


@dataclass(eq=False)
class VarRef(Expr):
    """A local variable or a parameter. `decl` is the Param or VarDecl (compare by identity)."""

    name: str
    decl: Param | VarDecl

    @property
    def direction(self) -> str:
        """'in'/'out'/'inout'/'' for params, 'local' for variables."""
        return self.decl.direction if isinstance(self.decl, Param) else "local"


@dataclass(eq=False)
class InstanceRef(Expr):
    """An extern instance (register, counter, ...); type is ExternType."""

    name: str
    decl: ExternInstance


@dataclass(eq=False)
class Member(Expr):
    """`expr.member`: header/struct field; for stacks `next`, `last`, `lastIndex`."""

    expr: Expr
    member: str


@dataclass(eq=False)
class ArrayIndex(Expr):
    """`stack[index]`."""

    expr: Expr
    index: Expr


@dataclass(eq=False)
class Slice(Expr):
    """`expr[hi:lo]` with constant bounds; type bit<hi-lo+1>."""

    expr: Expr
    hi: int
    lo: int


@dataclass(eq=False)
class Unary(Expr):
    """op: '-' (negate), '~' (complement), '!' (not)."""

    op: str
    expr: Expr


@dataclass(eq=False)
class Binary(Expr):
    """op: + - * / % |+| |-| << >> & | ^ && || == != < <= > >= ++.

    Operands already have equal types where P4 requires it (untyped literals were given
    the other side's type); for << >> the right side may differ; ++ widths add up.
    """

    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class Mux(Expr):
    """`cond ? then : else_`."""

    cond: Expr
    then: Expr
    else_: Expr


@dataclass(eq=False)
class Cast(Expr):
    """`(type) expr`; the target type is `.type`."""

    expr: Expr


@dataclass(eq=False)
class ListExpr(Expr):
    """`{a, b, c}`; type TupleType (or the StructType it initializes, if known)."""

    items: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class StructExpr(Expr):
    """`{f1 = a, f2 = b}` or a ListExpr assigned to a struct/header; type is the struct type.

    `fields` maps field name -> expression, in the struct's field order.
    """

    fields: dict[str, Expr] = field(default_factory=dict)


@dataclass(eq=False)
class EnumMember(Expr):
    """`E.member`; type is the EnumType. `value` is set for serializable enums."""

    member: str = ""
    value: int | None = None


@dataclass(eq=False)
class ErrorMember(Expr):
    """`error.Name`."""

    member: str = ""


@dataclass(eq=False)
class DontCare(Expr):
    """`_` (as an out argument: the value is discarded)."""


@dataclass(eq=False)
class ExternMethodCall(Expr):
    """`target.method<type_args>(args)`: target's type is an ExternType."""

    target: Expr
    method: str
    args: list[Expr]
    type_args: list[Type]
    decl: ExternMethod


@dataclass(eq=False)
class ExternFunctionCall(Expr):
    """`name<type_args>(args)` of an extern function (mark_to_drop, hash, verify, ...)."""

    name: str
    args: list[Expr]
    type_args: list[Type]
    decl: ExternFunction


ExternCall = ExternFunctionCall | ExternMethodCall  # a call the extern registry finds the extern of


@dataclass(eq=False)
class ActionCall(Expr):
    """Direct call of an action: `a(x, y)` in a control body or another action."""

    action: Action
    args: list[Expr]


@dataclass(eq=False)
class HeaderMethodCall(Expr):
    """`hdr.isValid()` / `setValid()` / `setInvalid()`; stacks: `push_front(n)`/`pop_front(n)`."""

    header: Expr
    method: str
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class TableApply(Expr):
    """`t.apply()`; type TableResultType."""

    table: Table


@dataclass(eq=False)
class TableHitMiss(Expr):
    """`t.apply().hit` or `t.apply().miss`: applies the table, yields bool."""

    table: Table
    which: str = "hit"


@dataclass(eq=False)
class ActionRun(Expr):
    """`t.apply().action_run`: applies the table; only a Switch subject."""

    table: Table


@dataclass(eq=False)
class FunctionCall(Expr):
    """`f(args)` of a P4 function (lowered away: inlined)."""

    function: Function
    args: list[Expr]


@dataclass(eq=False)
class ApplyCall(Expr):
    """`inst.apply(args)` of a sub-parser or sub-control instance (lowered away: inlined)."""

    instance: BlockInstance
    args: list[Expr]


# --------------------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt:
    loc: Loc


@dataclass(eq=False)
class Block(Stmt):
    stmts: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class Assign(Stmt):
    """`lhs = rhs`; rhs already has lhs's type (literals typed, lists made StructExpr)."""

    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class MethodCallStmt(Stmt):
    """A call used as a statement (any call expression, incl. TableApply)."""

    call: Expr


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Stmt | None = None


@dataclass(eq=False)
class SwitchCase:
    """`labels: body`; a label is an Action (action_run switch), an Expr, or None (default).

    body None means fall through to the next case that has a body.
    """

    labels: list
    body: Block | None
    loc: Loc = NOWHERE


@dataclass(eq=False)
class Switch(Stmt):
    subject: Expr
    cases: list[SwitchCase] = field(default_factory=list)


@dataclass(eq=False)
class Exit(Stmt):
    pass


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None = None


@dataclass(eq=False)
class Loop(Stmt):
    """A `for` loop in an action whose trip count is not known at compile time (BMv2 runs it as backward jumps):
    `body` then `update` run again and again until a LoopJump `break` in `body` leaves; a `continue` goes on at
    `update`. The loop's condition is the body's first statement, `if (!cond) break;`; its initializers come before."""

    body: Block
    update: Block


@dataclass(eq=False)
class LoopJump(Stmt):
    """`break` or `continue` (`kind`) of the innermost enclosing loop."""

    kind: str = "break"


@dataclass(eq=False)
class VarDeclStmt(Stmt):
    """A local variable declaration inside a block; `decl.init` may be None."""

    decl: VarDecl


# --------------------------------------------------------------------------- declarations


@dataclass(eq=False)
class Param:
    """A parameter. direction: 'in' | 'out' | 'inout' | '' (directionless: action data
    from the control plane, or constructor parameters)."""

    def __repr__(self) -> str:
        return f"Param({self.name!r})"

    name: str
    direction: str
    type: Type
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE
    default: Expr | None = None  # optional parameter default value


@dataclass(eq=False)
class VarDecl:
    """`T name [= init];` in a parser/control/action body or at control/parser level."""

    def __repr__(self) -> str:
        return f"VarDecl({self.name!r})"

    name: str
    type: Type
    init: Expr | None = None
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class ConstDecl:
    """`const T name = value;` (value is a folded Constant/BoolLiteral/... )."""

    name: str
    type: Type
    value: Expr
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


def _qualify(local: str, annotations: Annotations, control: str | None) -> str:
    name = annotations.get_str("name")
    if name is not None:
        if name.startswith("."):
            return name[1:]
        local = name
    return f"{control}.{local}" if control else local


@dataclass(eq=False)
class Action:
    """An action. `params` directional ones first, then directionless (control-plane data).

    `control` is the enclosing control's name (None for top-level actions).
    """

    def __repr__(self) -> str:
        return f"Action({self.name!r})"

    name: str
    params: list[Param]
    body: Block
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE
    control: str | None = None

    @property
    def control_plane_name(self) -> str:
        return _qualify(self.name, self.annotations, self.control)

    @property
    def data_params(self) -> list[Param]:
        """The directionless params the control plane supplies."""
        return [p for p in self.params if p.direction == ""]


@dataclass(eq=False)
class KeyElement:
    """One table key: `expr : match_kind` (match_kind is 'exact', 'lpm', 'ternary', ...).

    `name` is the P4Info match-field name: @name if present, else the expression as
    written in p4c's style (`hdr.ipv4.dstAddr`, `meta.x[7:0]`, `hdr.ipv4.isValid()`).
    """

    expr: Expr
    match_kind: str
    name: str
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE

    @property
    def width(self) -> int:
        """The key's P4Info bit width (an `error` key has none, 0, as p4c gives it)."""
        return 0 if isinstance(self.expr.type, ErrorType) else width_of(self.expr.type)


@dataclass(eq=False)
class ActionRef:
    """An entry of a table's `actions = {...}` list (with @defaultonly/@tableonly).

    `args` are the arguments bound to the action's directional parameters in the list,
    `a(hdr.x)` (lowered away: the action is specialized, see passes/action_args.py).
    """

    action: Action
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class ActionBinding:
    """An action with its control-plane arguments bound: `a(1, 2)` in default_action/entries.

    `args` are typed constants (one per data param, in order); directional params, if any,
    are given as l-value expressions in `args` too, in declaration order.
    """

    action: Action
    args: list[Expr] = field(default_factory=list)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class KeySet:
    """Base of a keyset in select cases and const table entries."""


@dataclass(eq=False)
class KsDefault(KeySet):
    """`default` or `_`."""

    loc: Loc = NOWHERE


@dataclass(eq=False)
class KsValue(KeySet):
    value: Expr
    loc: Loc = NOWHERE


@dataclass(eq=False)
class KsMask(KeySet):
    """`value &&& mask`."""

    value: Expr
    mask: Expr
    loc: Loc = NOWHERE


@dataclass(eq=False)
class KsRange(KeySet):
    """`lo .. hi` (inclusive)."""

    lo: Expr
    hi: Expr
    loc: Loc = NOWHERE


@dataclass(eq=False)
class KsValueSet(KeySet):
    """A parser value set's name as a select case: the keys (all of them) are in the set."""

    value_set: ValueSet
    loc: Loc = NOWHERE


@dataclass(eq=False)
class ValueSet:
    """`value_set<T>(size) name;` in a parser: select-key values the control plane writes (P4Runtime
    ValueSetEntry). `fields` are what a member holds, one per select key: T's fields for a struct,
    one unnamed field for bit<W>."""

    def __repr__(self) -> str:
        return f"ValueSet({self.name!r})"

    name: str
    type: Type
    size: int
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE
    control: str | None = None

    @property
    def control_plane_name(self) -> str:
        return _qualify(self.name, self.annotations, self.control)

    @property
    def fields(self) -> list[Field]:
        return list(self.type.fields) if isinstance(self.type, StructType) else [Field("", self.type)]


@dataclass(eq=False)
class TableEntry:
    """A const entry: one KeySet per key, the action, optional `priority`.

    For lpm keys a KsMask holds the prefix as a mask. Without explicit priorities p4c gives
    earlier entries higher priority; `priority` is None then.
    """

    keys: list[KeySet]
    action: ActionBinding
    priority: int | None = None
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class Table:
    """A match-action table. `control` is the enclosing control's name."""

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    name: str
    keys: list[KeyElement] = field(default_factory=list)
    actions: list[ActionRef] = field(default_factory=list)
    default_action: ActionBinding | None = None  # None: NoAction
    default_action_const: bool = False
    entries: list[TableEntry] = field(default_factory=list)
    entries_const: bool = False  # True for `const entries`
    size: int | None = None
    direct_counter: ExternInstance | None = None  # `counters = my_direct_counter`
    direct_meter: ExternInstance | None = None  # `meters = my_direct_meter`
    implementation: ExternInstance | None = None  # action_profile/action_selector (`implementation = ...`)
    other_properties: dict[str, Expr] = field(default_factory=dict)
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE
    control: str | None = None

    @property
    def control_plane_name(self) -> str:
        return _qualify(self.name, self.annotations, self.control)


@dataclass(eq=False)
class ExternInstance:
    """An extern object instance, e.g. `register<bit<32>>(1024) lanes;`.

    `extern`: the extern type name ('register', 'counter', 'direct_counter', 'meter',
    'direct_meter', ...); `type_args` its type arguments ([bit<32>] for that register);
    `args` the constructor arguments as folded expressions, e.g. register: [Constant 1024];
    counter(N, CounterType.packets): [Constant N, EnumMember]; direct_counter(CounterType.bytes):
    [EnumMember]. Helpers: `size`, `kind` (the CounterType/MeterType member name).
    """

    def __repr__(self) -> str:
        return f"ExternInstance({self.name!r})"

    name: str
    extern: str
    type: ExternType
    type_args: list[Type] = field(default_factory=list)
    args: list[Expr] = field(default_factory=list)
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE
    control: str | None = None

    @property
    def control_plane_name(self) -> str:
        return _qualify(self.name, self.annotations, self.control)

    @property
    def size(self) -> int | None:
        """The first integer constructor argument (register/counter/meter size)."""
        for a in self.args:
            if isinstance(a, Constant):
                return a.value
        return None

    @property
    def kind(self) -> str | None:
        """CounterType/MeterType member ('packets', 'bytes', 'packets_and_bytes')."""
        for a in self.args:
            if isinstance(a, EnumMember):
                return a.member
        return None


@dataclass(eq=False)
class ExternMethod:
    """A method (or constructor, name == extern name) of an extern declaration."""

    name: str
    params: list[Param]
    return_type: Type
    type_params: list[str] = field(default_factory=list)
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class ExternDecl:
    """`extern NAME<T> { constructors; methods; }`."""

    name: str
    type_params: list[str] = field(default_factory=list)
    constructors: list[ExternMethod] = field(default_factory=list)
    methods: dict[str, list[ExternMethod]] = field(default_factory=dict)  # overloads by arity
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class ExternFunction:
    """`extern R name<T>(params);` (mark_to_drop, hash, ...)."""

    name: str
    params: list[Param]
    return_type: Type
    type_params: list[str] = field(default_factory=list)
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class Function:
    """`R name(params) { body }`: a P4 function (lowered away: inlined at every call)."""

    def __repr__(self) -> str:
        return f"Function({self.name!r})"

    name: str
    params: list[Param]
    return_type: Type
    body: Block
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class BlockInstance:
    """`C(args) name;`: an instance of a parser or control inside another (lowered away: inlined).

    `block` is the Parser/Control checked for this instance: constructor arguments bound,
    its objects named with the instance's control-plane prefix (`MyIngress.sub.t`).
    """

    def __repr__(self) -> str:
        return f"BlockInstance({self.name!r})"

    name: str
    block: Parser | Control
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class SelectCase:
    """One select case: a KeySet per select key (or one KsValueSet for all of them), and the next state's name."""

    keysets: list[KeySet]
    next: str
    loc: Loc = NOWHERE


@dataclass(eq=False)
class Transition:
    """Base of parser transitions."""


@dataclass(eq=False)
class DirectTransition(Transition):
    next: str
    loc: Loc = NOWHERE

    def targets(self) -> list[tuple[str, Loc]]:
        """The states it may go to, each with where it names it."""
        return [(self.next, self.loc)]


@dataclass(eq=False)
class SelectTransition(Transition):
    keys: list[Expr]
    cases: list[SelectCase]
    loc: Loc = NOWHERE

    def targets(self) -> list[tuple[str, Loc]]:
        """The states it may go to, each with where it names it (a case's)."""
        return [(c.next, c.loc) for c in self.cases]


@dataclass(eq=False)
class ParserState:
    name: str
    body: list[Stmt]
    transition: DirectTransition | SelectTransition
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class Parser:
    def __repr__(self) -> str:
        return f"Parser({self.name!r})"

    name: str
    params: list[Param]
    locals: list = field(default_factory=list)  # VarDecl / ExternInstance
    states: dict[str, ParserState] = field(default_factory=dict)
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class Control:
    def __repr__(self) -> str:
        return f"Control({self.name!r})"

    name: str
    params: list[Param]
    locals: list = field(default_factory=list)  # Action / Table / ExternInstance / VarDecl
    actions: dict[str, Action] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    instances: dict[str, ExternInstance] = field(default_factory=dict)
    body: Block = field(default_factory=lambda: Block(NOWHERE))
    annotations: Annotations = field(default_factory=Annotations)
    loc: Loc = NOWHERE


@dataclass(eq=False)
class V1SwitchInstance:
    """`V1Switch(p(), vr(), ig(), eg(), ck(), dep()) main;` resolved to the declarations."""

    name: str
    parser: Parser
    verify_checksum: Control
    ingress: Control
    egress: Control
    compute_checksum: Control
    deparser: Control
    loc: Loc = NOWHERE


@dataclass(eq=False)
class Program:
    """A whole checked program (see the module docstring for how to walk it)."""

    types: dict[str, Type] = field(default_factory=dict)
    typedefs: dict[str, Type] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    match_kinds: list[str] = field(default_factory=list)
    constants: dict[str, ConstDecl] = field(default_factory=dict)
    externs: dict[str, ExternDecl] = field(default_factory=dict)
    extern_functions: dict[str, list[ExternFunction]] = field(default_factory=dict)  # overloads
    actions: dict[str, Action] = field(default_factory=dict)
    parsers: dict[str, Parser] = field(default_factory=dict)
    controls: dict[str, Control] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    instances: list[ExternInstance] = field(default_factory=list)  # top-level extern instances
    main: V1SwitchInstance | None = None
    source: str = ""  # path of the top-level file
    warnings: list[str] = field(default_factory=list)  # `FILE:LINE:COL: warning: ...` lines, where p4c warns
    command_line: list[str] = field(default_factory=list)  # p4c options the source gives in `@command_line(...)`

    def all_tables(self) -> list[Table]:
        """Every table of every control, in declaration order."""
        return [t for c in self.controls.values() for t in c.tables.values()]

    def all_actions(self) -> list[Action]:
        """Top-level actions, then each control's actions, in declaration order."""
        return list(self.actions.values()) + [a for c in self.controls.values() for a in c.actions.values()]

    def value_sets(self) -> list[ValueSet]:
        """Every parser value set, in declaration order."""
        return [d for p in self.parsers.values() for d in p.locals if isinstance(d, ValueSet)]

    def all_instances(self) -> list[ExternInstance]:
        """Every extern instance declared in a control or parser."""
        out: list[ExternInstance] = []
        for block in list(self.parsers.values()) + list(self.controls.values()):
            out.extend(d for d in block.locals if isinstance(d, ExternInstance))
        return out


def constant_value(e: Expr) -> int:
    """The integer value of a folded constant argument (int, bool or serializable enum member)."""
    if isinstance(e, BoolLiteral):
        return int(e.value)
    if isinstance(e, EnumMember) and e.value is not None:
        return e.value
    if isinstance(e, Constant):
        return e.value
    raise P4Error("expected a compile-time constant", e.loc.file, e.loc.line, e.loc.col)


def supports_timeout(table: Table) -> bool:
    """The table's `support_timeout` property (false when absent); P4Error unless a bool constant."""
    value = table.other_properties.get("support_timeout")
    if value is None:
        return False
    if not isinstance(value, BoolLiteral):
        raise P4Error(f"table {table.name}: support_timeout must be true or false", value.loc.file,
                      value.loc.line, value.loc.col)
    return value.value
