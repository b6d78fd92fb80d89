"""Compile a v1model program's IR into Python source, ONCE; packets then run plain Python.

Every P4 value lives at a fixed slot of one list per packet (see layout.py), so the
generated code is straight-line list indexing and int arithmetic: no AST walk, no
per-field dicts. The output is one module with these functions:

    parse(F, data) -> int        parser; returns the offset of the unparsed payload
    verify(F), ingress(F), egress(F), compute(F)
    deparse(F) -> list[bytes]    emitted headers (the caller appends the payload)

Values: bit<W> are ints in [0, 2**W), int<W> are signed ints in range, bool is a
Python bool, enums and errors are ints. A stored bit<W> wider than WIDE_BITS lives in
32-bit chunks (layout.WideLayout): a slice within one chunk is one slot, whole values
are joined/split with a struct of N big-endian uint32 (`_W<N>`). Registers and table keys hold unsigned bit
patterns; int<W> values are converted at those boundaries.

Unrolled per-lane statement runs (P4 has no loops) are compiled to numpy code over all lanes
by vectorize.py, behind a bounds check that falls back to the scalar code.

Control flow: `exit` raises _Exit (caught by each control's wrapper); a parser reject
raises _Reject(code, offset) (caught by `parse`, which sets parser_error as v1model
does and lets the packet continue).
"""
from __future__ import annotations

import random
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p4target import state as st
from p4target.constants import DROP_PORT
from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.interp import hashes
from p4target.interp.layout import (
    CHUNK_BITS,
    WIDE_BITS,
    Frame,
    HeaderLayout,
    Layout,
    Local,
    StackLayout,
    StructLayout,
    VarbitLayout,
    WideLayout,
    span,
)
from p4target.interp.schema import digest_name, match_keys, table_actions
from p4target.interp.vectorize import Vectorizer

MAX_PARSER_STATES = 1000  # per packet; more means a parser loop that never ends (ParserTimeout)
MAX_DIGESTS_QUEUED = 65536


class _Exit(Exception):
    """`exit;` in a control or action."""


class _Reject(Exception):
    """The parser went to reject; `code` is the error index (None: keep parser_error)."""

    def __init__(self, code: int | None, offset: int):
        super().__init__(code, offset)
        self.code = code
        self.offset = offset


class PacketError(Exception):
    """A packet the program cannot process (failed assert/assume, division by zero, ...)."""


def _lookahead(data: bytes, o: int, nbytes: int, shift: int, too_short: int) -> int:
    end = o + nbytes
    if end > len(data):
        raise _Reject(too_short, o)
    return int.from_bytes(data[o:end], "big") >> shift


def _log_format(msg: str, values: tuple) -> str:
    """log_msg: each `{}` in msg takes the next value (other braces are literal)."""
    parts = msg.split("{}")
    out = [parts[0]]
    for i, rest in enumerate(parts[1:]):
        out.append(str(values[i]) if i < len(values) else "{}")
        out.append(rest)
    return "".join(out)


def _packbits(parts: tuple) -> bytes:
    """(value, width) pairs concatenated MSB first, zero-padded to a whole byte."""
    v = n = 0
    for value, width in parts:
        v = (v << width) | value
        n += width
    pad = -n % 8
    return (v << pad).to_bytes((n + pad) // 8, "big")


def _shl(value: int, amount: int, width: int) -> int:
    """value << amount in `width` bits, without building huge ints for huge shifts."""
    return (value << amount) & ((1 << width) - 1) if amount < width else 0


def _compared(lay: Layout) -> tuple[int, int]:
    """The slots `==` compares: all of a value's, except a stack's next index (BMv2 compares
    the headers only)."""
    if isinstance(lay, StackLayout):
        return (lay.elements[0].first, lay.end) if lay.elements else (lay.end, lay.end)
    return span(lay)


def _field_slots(t: ir.Type, lay: Layout, loc: ir.Loc) -> list[tuple[ir.Type, Layout, int]]:
    """(type, storage, width) of each field of a header/struct in wire order, the fields of
    a struct inside a header in place (a varbit counts its maximum width)."""
    if isinstance(lay, (HeaderLayout, StructLayout)):
        return [x for f in t.fields for x in _field_slots(f.type, lay.fields[f.name], f.loc)]
    if isinstance(lay, StackLayout):
        raise _fail(f"a header stack cannot be read as bits here ({t})", loc)
    return [(t, lay, _width(t, loc))]


def _headers_in(lay: Layout) -> list[HeaderLayout]:
    if isinstance(lay, HeaderLayout):
        return [lay]
    if isinstance(lay, StructLayout):
        return [h for sub in lay.fields.values() for h in _headers_in(sub)]
    return []


def _next_member(e: ir.Expr) -> ir.Member | None:
    """The `stack.next` inside an l-value path, if any."""
    while isinstance(e, (ir.Member, ir.ArrayIndex, ir.Slice)):
        if isinstance(e, ir.Member) and e.member == "next":
            return e
        e = e.expr
    return None


def _fail(msg: str, loc: ir.Loc) -> P4Error:
    return P4Error(msg, loc.file, loc.line, loc.col)


def _mask(w: int) -> int:
    return (1 << w) - 1


def _scalar(t: ir.Type) -> bool:
    return isinstance(t, (ir.BitsType, ir.IntType, ir.BoolType, ir.EnumType, ir.ErrorType, ir.InfIntType))


def _width(t: ir.Type, loc: ir.Loc) -> int:
    try:
        return ir.width_of(t)
    except TypeError:
        raise _fail(f"type {t} has no fixed width here", loc) from None


@dataclass
class Compiled:
    """What the pipeline needs from the compiler."""

    source: str
    namespace: dict
    frame: list  # template every packet's frame starts from
    sm: dict[str, int]  # standard_metadata field -> slot
    hidden: dict[str, int]  # per-packet bookkeeping slots (clone, resubmit, ...)
    field_lists: dict[int, list[int]]  # @field_list index -> user metadata slots to preserve
    meta_range: tuple[int, int]  # slots of user metadata (reset on clone/resubmit/recirculate)
    empty: set[str] = field(default_factory=set)  # stages with nothing to do

    def fn(self, name: str) -> Callable:
        return self.namespace[name]


class Compiler:
    """IR -> Python source for one program bound to one State (tables, registers).

    `vectorize`: compile unrolled lane runs into numpy code (interp/vectorize.py); off only to
    compare against the plain scalar code (tests, benchmarks).
    """

    def __init__(self, program: ir.Program, state: st.State, rng: random.Random, vectorize: bool = True):
        if program.main is None:
            raise P4Error("program has no `V1Switch(...) main;` instantiation", program.source)
        self.p = program
        self.state = state
        self.frame = Frame()
        self.layouts: dict[int, Layout] = {}  # id(Param/VarDecl) -> storage
        self.pynames: dict[int, str] = {}  # id(Param) -> python name (action data params)
        self.errors = {name: i for i, name in enumerate(program.errors)}
        self.ns: dict = {
            "_Exit": _Exit, "_Reject": _Reject, "_PacketError": PacketError, "_look": _lookahead,
            "_shl": _shl, "_packbits": _packbits, "_logf": _log_format, "_rng": rng, "_S": state, "_DG": state.digests, "_LOG": state.log,
            "_hash": hashes.v1model_hash, "_INIT": self.frame.initial,
            "_now": time.monotonic,
        }
        for name, fn in hashes.ALGORITHMS.items():
            self.ns["_h_" + name] = fn
        self.lines: list[str] = []
        self._bound: dict[tuple[str, int], str] = {}
        self._tmp = 0
        self._locals = 0
        self._tables: dict[int, str] = {}  # id(ir.Table) -> function name
        self._meter_color: dict[int, int] = {}  # id(direct_meter instance) -> slot of this packet's color
        self._actions: dict[int, str] = {}  # id(ir.Action) -> function name
        self._pending: list = []  # (kind, obj) still to emit as functions
        self._functions: list[str] = []  # source of action and table functions
        self._action_maps: list[tuple[str, dict[str, str]]] = []  # (global name, action name -> function)
        self.in_parser = False
        self._next_index: dict[int, str] = {}  # id(`s.next` in an extract) -> variable holding its index
        self.digests: set[str] = set()
        self.vectorizer = Vectorizer(self) if vectorize else None
        self._setup_storage()

    # ------------------------------------------------------------------ storage

    def _setup_storage(self) -> None:
        m = self.p.main
        pp = m.parser.params
        if len(pp) != 4:
            raise _fail("the v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)", m.parser.loc)
        self.hdr = self.frame.alloc(pp[1].type, pp[1].loc)
        self.meta = self.frame.alloc(pp[2].type, pp[2].loc)
        self.meta_range = span(self.meta)
        sm = self.frame.alloc(pp[3].type, pp[3].loc)
        if not isinstance(sm, StructLayout):
            raise _fail("standard_metadata must be a struct", pp[3].loc)
        self.sm = {name: slot for name, slot in sm.fields.items() if isinstance(slot, int)}
        roots = [self.hdr, self.meta, sm]
        bindings = [
            (m.parser.params[1:], roots),
            (m.verify_checksum.params, roots[:2]),
            (m.ingress.params, roots),
            (m.egress.params, roots),
            (m.compute_checksum.params, roots[:2]),
            (m.deparser.params[1:], roots[:1]),
        ]
        for params, layouts in bindings:
            for p, lay in zip(params, layouts):
                self.layouts[id(p)] = lay
        self.hidden = {name: self.frame.slot(None) for name in
                       ("clone_session", "clone_type", "clone_fl", "resubmit", "recirculate", "truncate", "payload")}
        self.field_lists = self._field_lists(pp[2].type, self.meta)
        for block in [m.parser, m.verify_checksum, m.ingress, m.egress, m.compute_checksum, m.deparser]:
            for d in block.locals:
                if isinstance(d, ir.VarDecl):
                    self.layouts[id(d)] = self.frame.alloc(d.type, d.loc)

    def _field_lists(self, t: ir.Type, lay: Layout) -> dict[int, list[int]]:
        """@field_list(i, ...) annotated user-metadata fields, by list index."""
        out: dict[int, list[int]] = {}
        if not isinstance(t, ir.StructType) or not isinstance(lay, StructLayout):
            return out
        for f in t.fields:
            sub = lay.fields[f.name]
            a = f.annotations.get("field_list")
            if a is not None:
                a0, a1 = span(sub)
                for idx in a.args:
                    if isinstance(idx, int):
                        out.setdefault(idx, []).extend(range(a0, a1))
            for idx, slots in self._field_lists(f.type, sub).items():
                out.setdefault(idx, []).extend(slots)
        return out

    def storage(self, decl: object, loc: ir.Loc) -> Layout:
        lay = self.layouts.get(id(decl))
        if lay is None:
            t = getattr(decl, "type", None)
            if t is None:
                raise _fail("unresolved variable", loc)
            lay = self.layouts[id(decl)] = self.frame.alloc(t, loc)
        return lay

    def tmp(self) -> str:
        self._tmp += 1
        return f"_t{self._tmp}"

    def bind(self, prefix: str, obj: object) -> str:
        """Make `obj` a global of the generated module (once per object); returns its name."""
        key = (prefix, id(obj))
        name = self._bound.get(key)
        if name is None or obj is None:
            name = self._bound[key] = f"{prefix}{len(self.ns)}"
            self.ns[name] = obj
        return name

    # ------------------------------------------------------------------ l-values

    def lv(self, e: ir.Expr) -> tuple[Layout, str]:
        """Storage of an l-value expression: (layout, dynamic offset code or '')."""
        if isinstance(e, ir.VarRef):
            if id(e.decl) in self.pynames:
                raise _fail(f"action parameter {e.name} cannot be used as an l-value here", e.loc)
            return self.storage(e.decl, e.loc), ""
        if isinstance(e, ir.Member):
            base, off = self.lv(e.expr)
            if isinstance(base, (StructLayout, HeaderLayout)):
                if e.member not in base.fields:
                    raise _fail(f"no field {e.member}", e.loc)
                return base.fields[e.member], off
            if isinstance(base, StackLayout):
                if e.member == "next":
                    index = self._next_index.get(id(e), f"F[{base.next_index}{off}]")
                    return base.elements[0], f"{off} + {index} * {base.stride}"
                if e.member == "last":
                    return base.elements[0], f"{off} + (F[{base.next_index}{off}] - 1) * {base.stride}"
            raise _fail(f"cannot use .{e.member} as storage", e.loc)
        if isinstance(e, ir.ArrayIndex):
            base, off = self.lv(e.expr)
            if not isinstance(base, StackLayout):
                raise _fail("indexing something that is not a header stack", e.loc)
            if isinstance(e.index, ir.Constant):
                i = e.index.value
                if not 0 <= i < len(base.elements):
                    raise _fail(f"stack index {i} out of bounds", e.loc)
                return base.elements[i], off
            return base.elements[0], f"{off} + ({self.expr(e.index)}) * {base.stride}"
        raise _fail(f"{type(e).__name__} is not an l-value", e.loc)

    @staticmethod
    def slot(lay: Layout, off: str) -> str:
        return lay if isinstance(lay, Local) else f"F[{lay}{off}]"

    def chunks_struct(self, n: int) -> str:
        """Global name of a struct.Struct packing n big-endian 32-bit chunks."""
        name = f"_W{n}"
        if name not in self.ns:
            self.ns[name] = struct.Struct(f">{n}I")
        return name

    def join(self, a: int, b: int, off: str) -> str:
        """The int held by chunk slots [a, b) (most significant first)."""
        if b - a == 1:
            return f"F[{a}{off}]"
        return f"int.from_bytes({self.chunks_struct(b - a)}.pack(*F[{a}{off}:{b}{off}]), 'big')"

    def split(self, a: int, b: int, off: str, code: str) -> str:
        """A statement storing the int `code` (< 2**(32 * (b - a))) into chunk slots [a, b)."""
        n = b - a
        return f"F[{a}{off}:{b}{off}] = {self.chunks_struct(n)}.unpack(({code}).to_bytes({n * 4}, 'big'))"

    def read(self, lay: Layout, off: str) -> str:
        """Source for the value held by scalar storage (one slot or a wide field's chunks)."""
        if isinstance(lay, WideLayout):
            return self.join(lay.first, lay.end, off)
        return self.slot(lay, off)

    def write(self, lay: Layout, off: str, code: str) -> str:
        """A statement storing the value `code` into scalar storage (one slot or chunks)."""
        if isinstance(lay, WideLayout):
            return self.split(lay.first, lay.end, off, code)
        return f"{self.slot(lay, off)} = {code}"

    def wide_lv(self, e: ir.Expr) -> tuple[WideLayout, str] | None:
        """The chunk storage of `e` if it names a stored wide bit<W> value, else None."""
        t = e.type
        if (isinstance(t, ir.BitsType) and t.width > WIDE_BITS and isinstance(e, (ir.VarRef, ir.Member, ir.ArrayIndex))
                and id(getattr(e, "decl", None)) not in self.pynames):
            lay, off = self.lv(e)
            if isinstance(lay, WideLayout):
                return lay, off
        return None

    # ------------------------------------------------------------------ expressions

    def expr(self, e: ir.Expr) -> str:
        """Python source computing `e` (already in its type's canonical range)."""
        method = getattr(self, "x_" + type(e).__name__, None)
        if method is None:
            raise _fail(f"{type(e).__name__} expressions are not supported by the embedded interpreter", e.loc)
        return method(e)

    def wrap(self, t: ir.Type, code: str) -> str:
        if isinstance(t, ir.BitsType):
            return f"(({code}) & {_mask(t.width)})"
        if isinstance(t, ir.IntType):
            half = 1 << (t.width - 1)
            return f"(((({code}) + {half}) & {_mask(t.width)}) - {half})"
        return f"({code})"

    def unsigned(self, t: ir.Type, code: str) -> str:
        """The bit pattern of a value (int<W> -> its two's complement as bit<W>)."""
        if isinstance(t, ir.IntType):
            return f"(({code}) & {_mask(t.width)})"
        if isinstance(t, ir.BoolType):
            return f"int({code})"
        return code

    @staticmethod
    def signed(t: ir.Type, code: str) -> str:
        """Bit pattern -> value of type t (inverse of `unsigned`)."""
        if isinstance(t, ir.IntType):
            half = 1 << (t.width - 1)
            return f"((({code}) ^ {half}) - {half})"
        if isinstance(t, ir.BoolType):
            return f"bool({code})"
        return code

    def x_Constant(self, e: ir.Constant) -> str:
        return str(e.value)

    def x_BoolLiteral(self, e: ir.BoolLiteral) -> str:
        return "True" if e.value else "False"

    def x_StringLiteral(self, e: ir.StringLiteral) -> str:
        return repr(e.value)

    def x_EnumMember(self, e: ir.EnumMember) -> str:
        if e.value is not None:
            return str(e.value)
        t = e.type
        if isinstance(t, ir.EnumType) and e.member in t.members:
            return str(t.members.index(e.member))
        raise _fail(f"unknown enum member {e.member}", e.loc)

    def x_ErrorMember(self, e: ir.ErrorMember) -> str:
        return str(self.errors[e.member])

    def x_VarRef(self, e: ir.VarRef) -> str:
        name = self.pynames.get(id(e.decl))
        if name is not None:
            return name
        lay, off = self.lv(e)
        if not isinstance(lay, (int, Local, WideLayout)):
            raise _fail(f"{e.name} is not a scalar value", e.loc)
        return self.read(lay, off)

    def x_Member(self, e: ir.Member) -> str:
        if getattr(e, "member", None) == "lastIndex":
            base, off = self.lv(e.expr)
            return f"((F[{base.next_index}{off}] - 1) & 0xFFFFFFFF)"
        lay, off = self.lv(e)
        if not isinstance(lay, (int, Local, WideLayout)):
            raise _fail(f"{e.member} is not a scalar value", e.loc)
        return self.read(lay, off)

    x_ArrayIndex = x_Member

    def x_Slice(self, e: ir.Slice) -> str:
        wide = self.wide_lv(e.expr)
        if wide is None:
            return f"(({self.expr(e.expr)} >> {e.lo}) & {_mask(e.hi - e.lo + 1)})"
        lay, off = wide
        a, b = lay.chunk_slot(e.hi), lay.chunk_slot(e.lo) + 1  # only the chunks the slice touches
        base = e.lo - e.lo % CHUNK_BITS
        top = min(base + (b - a) * CHUNK_BITS, lay.width) - 1  # highest bit of those chunks
        code = self.join(a, b, off)
        if e.lo > base:
            code = f"({code} >> {e.lo - base})"
        if e.hi < top:
            code = f"({code} & {_mask(e.hi - e.lo + 1)})"
        return code

    def x_Unary(self, e: ir.Unary) -> str:
        a = self.expr(e.expr)
        t = e.type
        if e.op == "!":
            return f"(not {a})"
        if e.op == "-":
            return self.wrap(t, f"-{a}")
        if e.op == "~":
            if isinstance(t, ir.BitsType):
                return f"({a} ^ {_mask(t.width)})"
            return f"(~{a})"
        raise _fail(f"unsupported operator {e.op}", e.loc)

    def x_Binary(self, e: ir.Binary) -> str:
        op, t = e.op, e.type
        if op in ("==", "!=") and not _scalar(e.left.type):
            (la, lo), (ra, ro) = self.lv(e.left), self.lv(e.right)
            (a0, a1), (b0, b1) = _compared(la), _compared(ra)
            if lo or ro:  # run-time stack indexes: compare slot by slot
                left = ", ".join(f"F[{i}{lo}]" for i in range(a0, a1))
                right = ", ".join(f"F[{i}{ro}]" for i in range(b0, b1))
                return f"(({left},) {op} ({right},))"
            return f"(F[{a0}:{a1}] {op} F[{b0}:{b1}])"
        a, b = self.expr(e.left), self.expr(e.right)
        if op == "&&":
            return f"({a} and {b})"
        if op == "||":
            return f"({a} or {b})"
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return f"({a} {op} {b})"
        if op == "++":
            rw = _width(e.right.type, e.right.loc)
            code = f"(({self.unsigned(e.left.type, a)} << {rw}) | {self.unsigned(e.right.type, b)})"
            return self.signed(t, code) if isinstance(t, ir.IntType) else code
        if op in ("+", "-") and isinstance(e.right, ir.Constant) and e.right.value == 0 and e.left.type == t:
            return a  # x + 0 is x, already in range (lane loops index `base + 0`)
        if op in ("+", "-", "*"):
            return self.wrap(t, f"{a} {op} {b}")
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("/", "%"):
            return f"({a} {'//' if op == '/' else '%'} {b})"
        if op in ("|+|", "|-|"):  # clamped with compares on a temporary: no min()/max() calls
            raw, r = f"{a} {op[1]} {b}", self.tmp()
            if isinstance(t, ir.BitsType):
                if op == "|+|":
                    return f"({_mask(t.width)} if ({r} := {raw}) > {_mask(t.width)} else {r})"
                return f"(0 if ({r} := {raw}) < 0 else {r})"
            if isinstance(t, ir.IntType):
                hi = (1 << (t.width - 1)) - 1
                return f"({hi} if ({r} := {raw}) > {hi} else {-hi - 1} if {r} < {-hi - 1} else {r})"
            return f"({raw})"
        if op == ">>":
            return f"({a} >> {b})"
        if op == "<<":
            if not isinstance(t, (ir.BitsType, ir.IntType)):
                return f"({a} << {b})"
            if isinstance(e.right, ir.Constant):
                return "0" if e.right.value >= t.width else self.wrap(t, f"{a} << {b}")
            if isinstance(t, ir.BitsType):
                return f"_shl({a}, {b}, {t.width})"
            return self.signed(t, f"_shl({self.unsigned(t, a)}, {b}, {t.width})")
        raise _fail(f"unsupported operator {op}", e.loc)

    def x_Mux(self, e: ir.Mux) -> str:
        return f"({self.expr(e.then)} if {self.expr(e.cond)} else {self.expr(e.else_)})"

    def x_Cast(self, e: ir.Cast) -> str:
        src, dst = e.expr.type, e.type
        a = self.expr(e.expr)
        if isinstance(src, ir.EnumType) and src.underlying is not None:
            src = src.underlying
        if isinstance(dst, ir.EnumType) and dst.underlying is not None:
            dst = dst.underlying
        if src == dst:
            return a
        if isinstance(dst, ir.BoolType):
            return f"({a} != 0)"
        if isinstance(src, ir.BoolType):
            a = f"(1 if {a} else 0)"
        if isinstance(dst, ir.BitsType):
            if isinstance(src, ir.BitsType) and src.width <= dst.width or isinstance(src, ir.BoolType):
                return a
            return f"({a} & {_mask(dst.width)})"
        if isinstance(dst, ir.IntType):
            if isinstance(src, ir.BitsType) and src.width == dst.width:
                return self.signed(dst, a)  # same bits, read as two's complement
            return self.wrap(dst, a)
        raise _fail(f"cast from {src} to {dst} is not supported", e.loc)

    def x_HeaderMethodCall(self, e: ir.HeaderMethodCall) -> str:
        if e.method != "isValid":
            raise _fail(f"{e.method}() does not produce a value", e.loc)
        lay, off = self.lv(e.header)
        if isinstance(lay, HeaderLayout):
            return f"F[{lay.valid}{off}]"
        if isinstance(lay, StructLayout):  # header union: valid if any member is
            return "(" + " or ".join(f"F[{m.valid}{off}]" for m in lay.fields.values()) + ")"
        raise _fail("isValid() on something that is not a header", e.loc)

    def x_TableHitMiss(self, e: ir.TableHitMiss) -> str:
        call = f"{self.table_fn(e.table)}(F)[0]"
        return call if e.which == "hit" else f"(not {call})"

    def x_ExternMethodCall(self, e: ir.ExternMethodCall) -> str:
        tname = getattr(e.target.type, "name", "")
        if tname == "packet_in" and e.method == "lookahead":
            if not self.in_parser:
                raise _fail("lookahead outside a parser", e.loc)
            t = e.type
            if not isinstance(t, (ir.BitsType, ir.IntType, ir.BoolType)):
                raise _fail(f"lookahead<{t}> is not supported (only bit/int/bool)", e.loc)
            w = _width(t, e.loc)
            nb = (w + 7) // 8
            return self.signed(t, f"_look(data, o, {nb}, {nb * 8 - w}, {self.errors['PacketTooShort']})")
        if tname == "packet_in" and e.method == "length":
            return "len(data)"
        raise _fail(f"{tname}.{e.method}() cannot be used as a value", e.loc)

    # ------------------------------------------------------------------ flattening (hash, digest, emit)

    def flat(self, e: ir.Expr) -> list[tuple[str, int]]:
        """(unsigned value code, width) of every scalar in e, in order (lists, structs, headers)."""
        if isinstance(e, ir.ListExpr):
            return [x for item in e.items for x in self.flat(item)]
        if isinstance(e, ir.StructExpr):
            return [x for item in e.fields.values() for x in self.flat(item)]
        if _scalar(e.type):
            if isinstance(e.type, ir.InfIntType):
                raise _fail("an untyped integer has no width here; cast it, e.g. (bit<8>)5", e.loc)
            return [(self.unsigned(e.type, self.expr(e)), _width(e.type, e.loc))]
        lay, off = self.lv(e)
        return self.flat_layout(e.type, lay, off, e.loc)

    def flat_layout(self, t: ir.Type, lay: Layout, off: str, loc: ir.Loc) -> list[tuple[str, int | str]]:
        """(value code, width) of every scalar in storage `lay`; a varbit's width is the
        code of its current length."""
        if isinstance(lay, (int, Local)):
            return [(self.unsigned(t, self.slot(lay, off)), _width(t, loc))]
        if isinstance(lay, WideLayout):
            return [(self.read(lay, off), lay.width)]
        if isinstance(lay, VarbitLayout):
            return [(f"F[{lay.first}{off}]", f"F[{lay.length}{off}]")]
        if isinstance(lay, StackLayout):
            return [x for el in lay.elements for x in self.flat_layout(t.element, el, off, loc)]
        out = []
        for f in t.fields:
            out.extend(self.flat_layout(f.type, lay.fields[f.name], off, loc))
        return out

    @staticmethod
    def pack(parts: list[tuple[str, int | str]]) -> str:
        """Source for the bytes of `parts` concatenated MSB first, zero-padded to a byte
        (at run time when a width is only known then: a varbit's)."""
        if any(isinstance(w, str) for _, w in parts):
            return f"_packbits(({''.join(f'({c}, {w}), ' for c, w in parts)}))"
        total = sum(w for _, w in parts)
        if total == 0:
            return "b''"
        pad = -total % 8
        shift = total + pad
        terms = []
        for code, w in parts:
            shift -= w
            terms.append(f"({code} << {shift})" if shift else code)
        return f"({' | '.join(terms)}).to_bytes({(total + pad) // 8}, 'big')"

    # ------------------------------------------------------------------ statements

    def emit(self, line: str, ind: int) -> None:
        self.lines.append("    " * ind + line)

    def block(self, stmts: list[ir.Stmt], ind: int) -> None:
        start = len(self.lines)
        if self.vectorizer is not None:
            self.vectorizer.block(stmts, ind)
        else:
            for s in stmts:
                self.stmt(s, ind)
        if len(self.lines) == start:
            self.emit("pass", ind)

    def stmt(self, s: ir.Stmt, ind: int) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise _fail(f"{type(s).__name__} statements are not supported by the embedded interpreter", s.loc)
        method(s, ind)

    def s_Block(self, s: ir.Block, ind: int) -> None:
        for x in s.stmts:
            self.stmt(x, ind)

    def s_Exit(self, s: ir.Exit, ind: int) -> None:
        self.emit("raise _Exit", ind)

    def s_Return(self, s: ir.Return, ind: int) -> None:
        if s.value is not None:
            raise _fail("return with a value is not supported", s.loc)
        self.emit("return", ind)

    def s_If(self, s: ir.If, ind: int) -> None:
        self.emit(f"if {self.expr(s.cond)}:", ind)
        self.block([s.then] if s.then else [], ind + 1)
        if s.else_ is not None:
            self.emit("else:", ind)
            self.block([s.else_], ind + 1)

    def s_VarDeclStmt(self, s: ir.VarDeclStmt, ind: int) -> None:
        d = s.decl
        if _scalar(d.type) and not (isinstance(d.type, ir.BitsType) and d.type.width > WIDE_BITS):
            self._locals += 1
            lay = self.layouts[id(d)] = Local(f"v{self._locals}_{d.name}")
            initial = "False" if isinstance(d.type, ir.BoolType) else "0"
            self.emit(f"{lay} = {self.expr(d.init) if d.init is not None else initial}", ind)
            return
        lay = self.storage(d, d.loc)
        if d.init is not None:
            self.assign(lay, "", d.type, d.init, ind)
        else:
            self.reset(lay, "", ind)

    def reset(self, lay: Layout, off: str, ind: int) -> None:
        """Give `lay` its initial (zero / invalid) contents."""
        a, b = span(lay)
        if off:
            for i in range(a, b):
                self.emit(f"F[{i}{off}] = _INIT[{i}]", ind)
        elif b - a == 1:
            self.emit(f"F[{a}] = {self.frame.initial[a]!r}", ind)
        else:
            self.emit(f"F[{a}:{b}] = _INIT[{a}:{b}]", ind)

    def s_Assign(self, s: ir.Assign, ind: int) -> None:
        lhs = s.lhs
        if isinstance(lhs, ir.Slice):
            width = lhs.hi - lhs.lo + 1
            in_range = isinstance(s.rhs.type, ir.BitsType) and s.rhs.type.width == width and not isinstance(s.rhs, ir.Constant)
            self.store_slice(lhs, self.expr(s.rhs), in_range, ind)
            return
        if isinstance(lhs, ir.DontCare):
            return
        lay, off = self.lv(lhs)
        self.assign(lay, off, lhs.type, s.rhs, ind)

    def store(self, target: ir.Expr, code: str, ind: int) -> None:
        """`target = code` for a scalar an extern or action writes: an l-value, a slice, or _."""
        if isinstance(target, ir.DontCare):
            return
        if isinstance(target, ir.Slice):
            self.store_slice(target, code, False, ind)
            return
        lay, off = self.lv(target)
        self.emit(self.write(lay, off, code), ind)

    def store_slice(self, lhs: ir.Slice, value: str, in_range: bool, ind: int) -> None:
        """`x[hi:lo] = value`; `in_range`: value already fits the slice (no masking needed)."""
        wide = self.wide_lv(lhs.expr)
        if wide is not None:
            self.assign_wide_slice(*wide, lhs, value, in_range, ind)
            return
        lay, off = self.lv(lhs.expr)
        t = lhs.expr.type
        w = _width(t, lhs.loc)
        m = _mask(lhs.hi - lhs.lo + 1) << lhs.lo
        cur = self.unsigned(t, self.slot(lay, off))
        new = f"(({cur} & {_mask(w) ^ m}) | (({value} << {lhs.lo}) & {m}))"
        self.emit(f"{self.slot(lay, off)} = {self.signed(t, new)}", ind)

    def assign_wide_slice(self, lay: WideLayout, off: str, lhs: ir.Slice, value: str, exact: bool, ind: int) -> None:
        """`wide[hi:lo] = value`: rewrite only the chunks the slice touches."""
        a, b = lay.chunk_slot(lhs.hi), lay.chunk_slot(lhs.lo) + 1
        base = lhs.lo - lhs.lo % CHUNK_BITS
        top = min(base + (b - a) * CHUNK_BITS, lay.width) - 1
        width = lhs.hi - lhs.lo + 1
        if lhs.lo == base and lhs.hi == top and exact:  # whole chunks, a value already in range
            new = value
        else:
            m = _mask(width) << (lhs.lo - base)
            new = f"(({self.join(a, b, off)} & {_mask(top - base + 1) ^ m}) | (({value} << {lhs.lo - base}) & {m}))"
        self.emit(f"F[{a}{off}] = {new}" if b - a == 1 else self.split(a, b, off, new), ind)

    def assign(self, lay: Layout, off: str, t: ir.Type, rhs: ir.Expr, ind: int) -> None:
        """Store the value of `rhs` into storage `lay` (scalars, headers, structs, stacks)."""
        if isinstance(rhs, ir.ExternMethodCall) and rhs.method == "lookahead" and isinstance(lay, (HeaderLayout, StructLayout)):
            self.lookahead_into(lay, off, t, rhs, ind)
            return
        if isinstance(lay, WideLayout):
            src = self.wide_lv(rhs)
            if src is not None and src[0].chunks == lay.chunks:  # chunk-wise copy
                (c, soff), (a, b) = (src[0].first, src[1]), (lay.first, lay.end)
                self.emit(f"F[{a}{off}:{b}{off}] = F[{c}{soff}:{c + b - a}{soff}]", ind)
            else:
                self.emit(self.write(lay, off, self.expr(rhs)), ind)
            return
        if isinstance(lay, (int, Local)):
            self.emit(f"{self.slot(lay, off)} = {self.expr(rhs)}", ind)
            return
        if isinstance(rhs, (ir.StructExpr, ir.ListExpr)):
            items = list(rhs.fields.values()) if isinstance(rhs, ir.StructExpr) else rhs.items
            names = list(rhs.fields) if isinstance(rhs, ir.StructExpr) else [f.name for f in t.fields]
            tmps = []
            for item in items:  # evaluate everything before storing (a = {a.y, a.x} must work)
                if _scalar(item.type):
                    name = self.tmp()
                    self.emit(f"{name} = {self.expr(item)}", ind)
                    tmps.append(name)
                else:
                    tmps.append(None)
            for name, item, tv in zip(names, items, tmps):
                sub = lay.fields[name]
                if tv is not None:
                    self.emit(self.write(sub, off, tv), ind)
                else:
                    self.assign(sub, off, t.field(name).type, item, ind)
            if isinstance(lay, HeaderLayout):
                self.emit(f"F[{lay.valid}{off}] = True", ind)
            return
        src, soff = self.lv(rhs)
        (a, b), (c, d) = span(lay), span(src)
        if b - a != d - c:
            raise _fail(f"cannot assign {rhs.type} to {t}", rhs.loc)
        if not off and not soff:
            self.emit(f"F[{a}:{b}] = F[{c}:{d}]", ind)
        else:
            for i in range(b - a):
                self.emit(f"F[{a + i}{off}] = F[{c + i}{soff}]", ind)

    def s_MethodCallStmt(self, s: ir.MethodCallStmt, ind: int) -> None:
        c = s.call
        if isinstance(c, ir.TableApply):
            self.emit(f"{self.table_fn(c.table)}(F)", ind)
        elif isinstance(c, ir.TableHitMiss):
            self.emit(f"{self.table_fn(c.table)}(F)", ind)
        elif isinstance(c, ir.ActionCall):
            self.action_call(c, ind)
        elif isinstance(c, ir.HeaderMethodCall):
            self.header_method(c, ind)
        elif isinstance(c, ir.ExternMethodCall):
            self.extern_method(c, ind)
        elif isinstance(c, ir.ExternFunctionCall):
            self.extern_function(c, ind)
        else:
            raise _fail(f"{type(c).__name__} cannot be used as a statement", s.loc)

    def s_Switch(self, s: ir.Switch, ind: int) -> None:
        subj = self.tmp()
        # BMv2: where a table with an action profile runs no action (a miss, an empty group), no case runs
        indirect = isinstance(s.subject, ir.ActionRun) and s.subject.table.implementation is not None
        if isinstance(s.subject, ir.ActionRun):
            self.emit(f"{subj} = {self.table_fn(s.subject.table)}(F)[1]", ind)
            label = lambda lab: repr(lab.control_plane_name)  # noqa: E731
        else:
            self.emit(f"{subj} = {self.expr(s.subject)}", ind)
            label = self.expr
        pending: list = []
        first = True
        for case in s.cases:
            pending.extend(case.labels)
            if case.body is None:
                continue
            if any(lab is None for lab in pending) and indirect:
                head = f"{'if' if first else 'elif'} {subj} is not None:"
            elif any(lab is None for lab in pending):
                head = "else:" if not first else "if True:"
            else:
                cond = " or ".join(f"{subj} == {label(lab)}" for lab in pending)
                head = f"{'if' if first else 'elif'} {cond}:"
            self.emit(head, ind)
            self.block(case.body.stmts, ind + 1)
            first = False
            if None in pending:
                break
            pending = []

    # ------------------------------------------------------------------ calls

    def header_method(self, c: ir.HeaderMethodCall, ind: int) -> None:
        lay, off = self.lv(c.header)
        if c.method == "setValid":
            self.emit(f"F[{lay.valid}{off}] = True", ind)
        elif c.method == "setInvalid":
            self.reset(lay, off, ind)  # fields read as 0 while invalid
        elif c.method in ("push_front", "pop_front"):
            if off or not isinstance(lay, StackLayout):
                raise _fail(f"{c.method} needs a header stack", c.loc)
            n = c.args[0].value if c.args and isinstance(c.args[0], ir.Constant) else None
            if n is None or n < 0:
                raise _fail(f"{c.method} needs a constant count", c.loc)
            size = len(lay.elements)
            n = min(n, size)
            e0, end, st_ = lay.elements[0].first if lay.elements else lay.end, lay.end, lay.stride
            cut = n * st_
            if c.method == "push_front":
                self.emit(f"F[{e0 + cut}:{end}] = F[{e0}:{end - cut}]", ind)
                self.emit(f"F[{e0}:{e0 + cut}] = _INIT[{e0}:{e0 + cut}]", ind)
                self.emit(f"F[{lay.next_index}] = min(F[{lay.next_index}] + {n}, {size})", ind)
            else:
                self.emit(f"F[{e0}:{end - cut}] = F[{e0 + cut}:{end}]", ind)
                self.emit(f"F[{end - cut}:{end}] = _INIT[{end - cut}:{end}]", ind)
                self.emit(f"F[{lay.next_index}] = max(F[{lay.next_index}] - {n}, 0)", ind)
        else:
            raise _fail(f"{c.method}() used as a statement", c.loc)

    def action_call(self, c: ir.ActionCall, ind: int) -> None:
        a = c.action
        fn = self.action_fn(a)
        data_args = []
        copy_out = []
        for p, arg in zip(a.params, c.args):
            if p.direction == "":
                data_args.append(self.expr(arg))
                continue
            plan = self.storage(p, p.loc)
            if p.direction in ("in", "inout"):
                self.assign(plan, "", p.type, arg, ind)
            if p.direction in ("out", "inout") and not isinstance(arg, ir.DontCare):
                copy_out.append((p, plan, arg))
        if not copy_out:
            self.emit(f"{fn}({', '.join(['F'] + data_args)})", ind)
            return
        self.emit("try:", ind)  # `exit` in the action still copies out (P4 spec, p4c)
        self.emit(f"{fn}({', '.join(['F'] + data_args)})", ind + 1)
        self.emit("finally:", ind)
        ind += 1
        for _param, plan, arg in copy_out:
            if isinstance(arg, ir.Slice):
                self.store_slice(arg, self.read(plan, ""), False, ind)
                continue
            lay, off = self.lv(arg)
            if isinstance(lay, Local):
                self.emit(f"{lay} = {self.read(plan, '')}", ind)
                continue
            a0, a1 = span(plan)
            (b0, b1) = span(lay)
            if off:
                for i in range(a1 - a0):
                    self.emit(f"F[{b0 + i}{off}] = F[{a0 + i}]", ind)
            else:
                self.emit(f"F[{b0}:{b1}] = F[{a0}:{a1}]", ind)

    def extern_method(self, c: ir.ExternMethodCall, ind: int) -> None:
        tname = getattr(c.target.type, "name", "")
        m = c.method
        if tname == "packet_in":
            if not self.in_parser:
                raise _fail(f"packet.{m} outside a parser", c.loc)
            if m == "extract" and len(c.args) == 1:
                self.extract(c.args[0], ind)
            elif m == "extract" and len(c.args) == 2:
                self.extract_varbit(c.args[0], c.args[1], ind)
            elif m == "advance":
                self.emit(f"o += ({self.expr(c.args[0])}) >> 3", ind)
                self.emit(f"if o > len(data): raise _Reject({self.errors['PacketTooShort']}, len(data))", ind)
            elif m == "lookahead":  # a statement: only the length check matters
                nbytes = (_width(c.type, c.loc) + 7) // 8
                self.emit(f"_look(data, o, {nbytes}, 0, {self.errors['PacketTooShort']})", ind)
            else:
                raise _fail(f"packet.{m} with these arguments is not supported", c.loc)
            return
        if tname == "packet_out" and m == "emit":
            lay, off = self.lv(c.args[0])
            self.emit_header(c.args[0].type, lay, off, ind)
            return
        inst = c.target.decl if isinstance(c.target, ir.InstanceRef) else None
        if inst is None:
            raise _fail(f"{tname}.{m}() on something that is not an extern instance", c.loc)
        if tname == "register":
            self.register_call(inst, c, ind)
        elif tname == "counter" and m == "count":
            cnt = self.state.counters[inst.control_plane_name]
            pk, by = self.bind("_CP", cnt.packets), self.bind("_CB", cnt.bytes)
            i = self.tmp()
            self.emit(f"{i} = {self.expr(c.args[0])}", ind)
            self.emit(f"if {i} < {cnt.schema.size}:", ind)
            self.emit(f"{pk}[{i}] += 1; {by}[{i}] += F[{self.sm['packet_length']}]", ind + 1)
        elif tname == "meter" and m == "execute_meter":
            meter = self.state.meters[inst.control_plane_name]
            cells = self.bind("_M", meter.cells)
            i = self.tmp()
            self.emit(f"{i} = {self.expr(c.args[0])}", ind)
            amount = self.meter_amount(meter.schema.type)
            self.store(c.args[1], f"({cells}[{i}].execute({amount}, _now()) if {i} < {meter.schema.size} else 0)", ind)
        elif tname == "direct_meter" and m == "read":
            self.store(c.args[0], f"F[{self.meter_color(inst)}]", ind)
        elif tname == "direct_counter" and m == "count":
            self.emit("pass  # direct counters count every hit of their table's entries", ind)
        else:
            raise _fail(f"{tname}.{m}() is not supported by the embedded target", c.loc)

    def meter_amount(self, kind: str) -> str:
        return "1" if kind == "packets" else f"F[{self.sm['packet_length']}]"

    def meter_color(self, inst: ir.ExternInstance) -> int:
        """Slot holding the color the direct meter gave this packet when its table hit."""
        slot = self._meter_color.get(id(inst))
        if slot is None:
            slot = self._meter_color[id(inst)] = self.frame.slot(0)
        return slot

    def register_call(self, inst: ir.ExternInstance, c: ir.ExternMethodCall, ind: int) -> None:
        reg = self.state.registers[inst.control_plane_name]
        name = self.bind("_R", reg.values)
        t = inst.type_args[0]
        size = reg.schema.size
        if c.method == "read":
            i = self.tmp()
            self.emit(f"{i} = {self.expr(c.args[1])}", ind)
            self.store(c.args[0], f"({self.signed(t, f'{name}[{i}]')} if {i} < {size} else 0)", ind)
        elif c.method == "write":
            i = self.tmp()
            self.emit(f"{i} = {self.expr(c.args[0])}", ind)
            self.emit(f"if {i} < {size}: {name}[{i}] = {self.unsigned(t, self.expr(c.args[1]))}", ind)
        else:
            raise _fail(f"register.{c.method}() is not supported", c.loc)

    def extract(self, arg: ir.Expr, ind: int) -> None:
        """packet.extract(hdr): bounds check, one int.from_bytes, a shift+mask per field;
        a wide field on a byte boundary is unpacked straight into its chunks."""
        too_short = self.errors["PacketTooShort"]
        lay, off, advance = self.extract_target(arg, ind)
        t = lay.type
        w = t.width()
        if w % 8:
            raise _fail(f"header {t.name} is {w} bits, not a whole number of bytes", t.loc)
        n = w // 8
        self.emit(f"_e = o + {n}", ind)
        self.emit(f"if _e > len(data): raise _Reject({too_short}, o)", ind)
        fields = _field_slots(t, lay, t.loc)
        unpacked = [self.chunk_aligned(fields, i) for i in range(len(fields))]
        if not all(unpacked):
            self.emit("_v = int.from_bytes(data[o:_e], 'big')", ind)
        shift = w
        for (ft, sub, fw), whole_chunks in zip(fields, unpacked):
            shift -= fw
            if whole_chunks:
                unpack = f"{self.chunks_struct(sub.chunks)}.unpack_from(data, o + {(w - shift - fw) // 8})"
                self.emit(f"F[{sub.first}{off}:{sub.end}{off}] = {unpack}", ind)
                continue
            v = f"_v >> {shift}" if shift else "_v"
            if shift + fw < w:
                v = f"({v}) & {_mask(fw)}"
            self.emit(self.write(sub, off, self.signed(ft, v)), ind)
        self.emit(f"F[{lay.valid}{off}] = True", ind)
        self.emit("o = _e", ind)
        if advance:
            self.emit(advance, ind)

    def extract_target(self, arg: ir.Expr, ind: int) -> tuple[HeaderLayout, str, str]:
        """Where extract(arg) writes: (header layout, offset code, statement advancing a stack's
        next index after it or ''); a stack's next element is bounds-checked first."""
        nxt = _next_member(arg)  # extract(stack.next) or extract(union_stack.next.member)
        advance = ""
        if nxt is not None:
            stack, soff = self.lv(nxt.expr)
            if soff:
                raise _fail("extract into a dynamically indexed stack is not supported", arg.loc)
            i = self.tmp()
            self.emit(f"{i} = F[{stack.next_index}]", ind)
            self.emit(f"if {i} >= {len(stack.elements)}: raise _Reject({self.errors['StackOutOfBounds']}, o)", ind)
            self._next_index[id(nxt)] = i
            advance = f"F[{stack.next_index}] = {i} + 1"
        lay, off = self.lv(arg)
        if not isinstance(lay, HeaderLayout):
            raise _fail("extract needs a header", arg.loc)
        return lay, off, advance

    def lookahead_into(self, lay: Layout, off: str, t: ir.Type, look: ir.ExternMethodCall, ind: int) -> None:
        """`x = packet.lookahead<H>()` for a header or struct H: its fields from the next bits
        (a header comes out valid)."""
        if not self.in_parser:
            raise _fail("lookahead outside a parser", look.loc)
        slots = _field_slots(t, lay, look.loc)
        if any(isinstance(sub, VarbitLayout) for _, sub, _ in slots):
            raise _fail(f"unsupported: lookahead of {t}, which has a varbit field", look.loc)
        w = sum(fw for _, _, fw in slots)
        nbytes = (w + 7) // 8
        self.emit(f"_v = _look(data, o, {nbytes}, {nbytes * 8 - w}, {self.errors['PacketTooShort']})", ind)
        shift = w
        for ftype, sub, fw in slots:
            shift -= fw
            self.emit(self.write(sub, off, self.signed(ftype, f"(_v >> {shift}) & {_mask(fw)}")), ind)
        for sub in _headers_in(lay):
            self.emit(f"F[{sub.valid}{off}] = True", ind)

    def extract_varbit(self, arg: ir.Expr, bits: ir.Expr, ind: int) -> None:
        """packet.extract(hdr, bits): `bits` is the length of hdr's varbit field, checked as
        BMv2 does (whole bytes: else ParserInvalidArgument; at most the maximum: else
        HeaderTooShort; then PacketTooShort), field positions computed at run time."""
        lay, off, advance = self.extract_target(arg, ind)
        t = lay.type
        varbits = [f for f in t.fields if isinstance(f.type, ir.VarbitType)]
        if len(varbits) != 1:
            raise _fail(f"extract with a length needs a header with one varbit field, not {t.name}", arg.loc)
        vb = lay.fields[varbits[0].name]
        fixed = sum(_width(f.type, f.loc) for f in t.fields if f is not varbits[0])
        err = self.errors
        self.emit(f"_l = {self.expr(bits)}", ind)
        self.emit(f"if ({fixed} + _l) % 8: raise _Reject({err['ParserInvalidArgument']}, o)", ind)
        self.emit(f"if _l > {vb.max_width}: raise _Reject({err['HeaderTooShort']}, o)", ind)
        self.emit(f"_e = o + ({fixed} + _l) // 8", ind)
        self.emit(f"if _e > len(data): raise _Reject({err['PacketTooShort']}, o)", ind)
        self.emit("_v = int.from_bytes(data[o:_e], 'big')", ind)
        after, dynamic = 0, False  # bits after the field being read (plus _l once past the varbit)
        for f in reversed(t.fields):
            sub = lay.fields[f.name]
            shift = f"{after} + _l" if dynamic else str(after)
            if sub is vb:
                self.emit(f"F[{vb.first}{off}] = (_v >> {shift}) & ((1 << _l) - 1); F[{vb.length}{off}] = _l", ind)
                dynamic = True
                continue
            fw = _width(f.type, f.loc)
            self.emit(self.write(sub, off, self.signed(f.type, f"(_v >> ({shift})) & {_mask(fw)}")), ind)
            after += fw
        self.emit(f"F[{lay.valid}{off}] = True", ind)
        self.emit("o = _e", ind)
        if advance:
            self.emit(advance, ind)

    @staticmethod
    def chunk_aligned(fields: list[tuple[ir.Type, Layout, int]], index: int) -> bool:
        """Whether header field number `index` is wide, whole chunks, and starts on a byte
        boundary, so its chunks are the header's bytes at that place read as big-endian uint32s."""
        pos = 0
        for _, sub, fw in fields[:index]:
            if isinstance(sub, VarbitLayout):
                return False  # positions after a varbit are only known at run time
            pos += fw
        _, sub, fw = fields[index]
        return isinstance(sub, WideLayout) and pos % 8 == 0 and fw % CHUNK_BITS == 0

    def pack_header(self, t: ir.HeaderType, lay: HeaderLayout, off: str) -> str:
        """Source for a header's bytes: its chunk-aligned wide fields packed chunk-wise,
        the runs of fields between them as ints (each run is whole bytes)."""
        fields = _field_slots(t, lay, t.loc)
        pieces: list[str] = []
        run: list[tuple[str, int | str]] = []
        for i, (ft, sub, _) in enumerate(fields):
            if self.chunk_aligned(fields, i):
                if run:
                    pieces.append(self.pack(run))
                    run = []
                pieces.append(f"{self.chunks_struct(sub.chunks)}.pack(*F[{sub.first}{off}:{sub.end}{off}])")
            else:
                run.extend(self.flat_layout(ft, sub, off, t.loc))
        if run or not pieces:
            pieces.append(self.pack(run))
        return " + ".join(pieces)

    def emit_header(self, t: ir.Type, lay: Layout, off: str, ind: int) -> None:
        """packet.emit: valid headers only, recursing into structs and stacks."""
        if isinstance(lay, HeaderLayout):
            w = t.width()
            if w % 8:
                raise _fail(f"header {t.name} is {w} bits, not a whole number of bytes", t.loc)
            self.emit(f"if F[{lay.valid}{off}]: _out.append({self.pack_header(t, lay, off)})", ind)
        elif isinstance(lay, StackLayout):
            for el in lay.elements:
                self.emit_header(t.element, el, off, ind)
        elif isinstance(lay, StructLayout):
            for f in t.fields:
                self.emit_header(f.type, lay.fields[f.name], off, ind)
        else:
            raise _fail("emit needs a header, a header stack or a struct of them", t.loc if hasattr(t, "loc") else ir.NOWHERE)

    def _algo(self, e: ir.Expr) -> str:
        if not isinstance(e, ir.EnumMember) or e.member not in hashes.ALGORITHMS and e.member != "random":
            raise _fail("unsupported: a run-time hash algorithm (the embedded target needs a HashAlgorithm constant)", e.loc)
        return e.member

    def extern_function(self, c: ir.ExternFunctionCall, ind: int) -> None:
        n, a = c.name, c.args
        sm = self.sm
        hid = self.hidden
        if n == "mark_to_drop":
            self.emit(f"F[{sm['egress_spec']}] = {DROP_PORT}; F[{sm['mcast_grp']}] = 0", ind)
        elif n == "verify":
            self.emit(f"if not {self.expr(a[0])}: raise _Reject({self.expr(a[1])}, o)", ind)
        elif n in ("verify_checksum", "verify_checksum_with_payload", "update_checksum",
                   "update_checksum_with_payload"):
            algo = self._algo(a[3])
            if algo == "random":
                raise _fail("random is not a checksum algorithm", a[3].loc)
            data = self.pack(self.flat(a[1]))
            if n.endswith("with_payload"):
                data = f"{data} + F[{hid['payload']}]"
            lay, off = self.lv(a[2])
            w = _width(a[2].type, a[2].loc)
            value = f"(_h_{algo}({data}) & {_mask(w)})"
            if n.startswith("verify"):
                self.emit(f"if {self.expr(a[0])} and {value} != {self.read(lay, off)}: F[{sm['checksum_error']}] = 1", ind)
            else:
                self.emit(f"if {self.expr(a[0])}: {self.write(lay, off, value)}", ind)
        elif n == "hash":
            w = _width(a[0].type, a[0].loc)
            call = f"_hash({self._algo(a[1])!r}, {self.expr(a[2])}, {self.pack(self.flat(a[3]))}, {self.expr(a[4])}, _rng)"
            self.store(a[0], self.signed(a[0].type, f"({call} & {_mask(w)})"), ind)
        elif n == "random":
            lo, hi = self.expr(a[1]), self.expr(a[2])
            self.store(a[0], f"_rng.randint({lo}, max({lo}, {hi}))", ind)
        elif n == "digest":
            t = c.type_args[0] if c.type_args else a[1].type
            name = digest_name(t)
            self.digests.add(name)
            values = ", ".join(code for code, _ in self.flat(a[1]))
            self.emit(f"if len(_DG) < {MAX_DIGESTS_QUEUED}: _DG.append(({name!r}, ({values},)))", ind)
        elif n == "log_msg":
            values = "".join(f"{code}, " for code, _ in self.flat(a[1])) if len(a) > 1 else ""
            self.emit(f"_LOG.append(_logf({self.expr(a[0])}, ({values})))", ind)
        elif n in ("assert", "assume"):
            where = f"{n} failed at {c.loc}"
            self.emit(f"if not {self.expr(a[0])}: raise _PacketError({where!r})", ind)
        elif n == "truncate":
            self.emit(f"F[{hid['truncate']}] = {self.expr(a[0])}", ind)
        elif n in ("clone", "clone3", "clone_preserving_field_list"):
            kind = a[0].member if isinstance(a[0], ir.EnumMember) else None
            if kind not in ("I2E", "E2E"):
                raise _fail("the clone type must be CloneType.I2E or CloneType.E2E", a[0].loc)
            fl = self.expr(a[2]) if n == "clone_preserving_field_list" else "None"
            self.emit(f"F[{hid['clone_session']}] = {self.expr(a[1])}; F[{hid['clone_type']}] = {kind!r}; "
                      f"F[{hid['clone_fl']}] = {fl}", ind)
        elif n in ("resubmit", "resubmit_preserving_field_list", "recirculate", "recirculate_preserving_field_list"):
            fl = self.expr(a[0]) if n.endswith("field_list") else "-1"
            self.emit(f"F[{hid[n.split('_')[0]]}] = {fl}", ind)
        else:
            raise _fail(f"extern {n}() is not supported by the embedded target", c.loc)

    # ------------------------------------------------------------------ actions and tables

    def action_fn(self, a: ir.Action) -> str:
        name = self._actions.get(id(a))
        if name is None:
            name = self._actions[id(a)] = f"a{len(self._actions)}_{a.name}"
            for i, p in enumerate(a.params):
                if p.direction == "":
                    self.pynames[id(p)] = f"p{i}_{p.name}"
                else:
                    self.storage(p, p.loc)
            self._pending.append(("action", a))
        return name

    def table_fn(self, t: ir.Table) -> str:
        name = self._tables.get(id(t))
        if name is None:
            name = self._tables[id(t)] = f"t{len(self._tables)}_{t.name}"
            self._pending.append(("table", t))
        return name

    def gen_action(self, a: ir.Action) -> None:
        params = ["F"] + [self.pynames[id(p)] for p in a.params if p.direction == ""]
        self.emit(f"def {self._actions[id(a)]}({', '.join(params)}):", 0)
        self.block(a.body.stmts, 1)
        self.emit("", 0)

    def gen_table(self, t: ir.Table) -> None:
        obj = self.state.tables[t.control_plane_name]
        tv = self.bind("_T", obj)
        acts = {}
        for a, _ in table_actions(self.p, t):
            if any(p.direction for p in a.params):
                raise _fail(f"action {a.name} has directional parameters; tables cannot call it", t.loc)
            acts[a.control_plane_name] = a
        fns = {cp: self.action_fn(a) for cp, a in acts.items()}
        av = self.bind("_A", None)
        self._action_maps.append((av, fns))
        self.emit(f"def {self._tables[id(t)]}(F):", 0)
        keys = match_keys(t)
        if keys:
            values = ", ".join(self.unsigned(k.expr.type, self.expr(k.expr)) for k in keys)
            self.emit(f"_e = {tv}.lookup(({values},))", 1)
            self.emit("if _e is not None:", 1)
            if obj.schema.support_timeout:
                self.emit("_e.last_hit = _now()", 2)
            if t.direct_counter is not None:
                self.emit(f"_e.packets += 1; _e.bytes += F[{self.sm['packet_length']}]", 2)
            if t.direct_meter is not None:
                amount = self.meter_amount(t.direct_meter.kind or "bytes")
                self.emit(f"F[{self.meter_color(t.direct_meter)}] = _e.meter.execute({amount}, _now())", 2)
            if obj.profile is None:
                self.emit(f"{av}[_e.action](F, *_e.args)", 2)
                self.emit("return True, _e.action", 2)
            else:
                self.indirect_hit(t, obj.profile, av)
        if obj.profile is None:
            self.emit(f"_d = {tv}.default", 1)
            self.emit(f"{av}[_d.action](F, *_d.args)", 1)
            self.emit("return False, _d.action", 1)
        else:
            self.emit("return False, None", 1)  # BMv2: no default action with an action profile
        self.emit("", 0)

    def indirect_hit(self, t: ir.Table, profile: st.ActionProfile, av: str) -> None:
        """Run the member an entry names, or the one its group picks by the selector hash (as BMv2 does)."""
        pv = self.bind("_P", profile)
        if profile.schema.with_selector:
            algo = self._algo(t.implementation.args[0])
            if algo not in hashes.ALGORITHMS:
                raise _fail(f"unsupported: action selector hash {algo}", t.implementation.loc)
            self.emit("if _e.group_id is not None:", 2)
            self.emit(f"_m = {pv}.pick(_e.group_id, _h_{algo}({self.pack(self.selector_parts(t))}))", 3)
            self.emit("if _m is None:", 3)
            self.emit("return True, None", 4)  # a group left empty: nothing to run
            self.emit("else:", 2)
            self.emit(f"_m = {pv}.members[_e.member_id]", 3)
        else:
            self.emit(f"_m = {pv}.members[_e.member_id]", 2)
        self.emit(f"{av}[_m.action](F, *_m.args)", 2)
        self.emit("return True, _m.action", 2)

    def selector_parts(self, t: ir.Table) -> list[tuple[str, int | str]]:
        """The parts a selector hashes: its `selector` keys, where a field of an invalid header adds nothing (BMv2)."""
        parts: list[tuple[str, int | str]] = []
        for k in t.keys:
            if k.match_kind != "selector":
                continue
            flat = self.flat(k.expr)
            if isinstance(k.expr, ir.Member) and isinstance(k.expr.expr.type, ir.HeaderType):
                lay, off = self.lv(k.expr.expr)
                valid = f"F[{lay.valid}{off}]"
                flat = [(f"({code} if {valid} else 0)", f"({w} if {valid} else 0)") for code, w in flat]
            parts += flat
        return parts

    def _drain_pending(self) -> None:
        while self._pending:
            kind, obj = self._pending.pop(0)
            saved, self.lines = self.lines, []
            (self.gen_action if kind == "action" else self.gen_table)(obj)
            self._functions.extend(self.lines)
            self.lines = saved

    # ------------------------------------------------------------------ parser and controls

    def gen_parser(self, p: ir.Parser) -> None:
        self.in_parser = True
        fnames = {name: f"ps_{name}" for name in p.states}
        for name, s in p.states.items():
            self.emit(f"def {fnames[name]}(F, data, o):", 0)
            for x in s.body:
                self.stmt(x, 1)
            self.transition(s.transition, fnames, 1)
            self.emit("", 0)
        self.in_parser = False
        init = []
        for d in p.locals:
            if isinstance(d, ir.VarDecl) and d.init is not None:
                init.append(d)
        self.emit("def parse(F, data):", 0)
        for d in init:
            self.assign(self.storage(d, d.loc), "", d.type, d.init, 1)
        self.emit("o = 0", 1)
        self.emit("s = ps_start", 1)
        self.emit("n = 0", 1)
        self.emit("try:", 1)
        self.emit("while s is not None:", 2)
        self.emit("s, o = s(F, data, o)", 3)
        self.emit("n += 1", 3)
        self.emit(f"if n > {MAX_PARSER_STATES}: raise _Reject({self.errors.get('ParserTimeout', 0)}, o)", 3)
        self.emit("except _Reject as r:", 1)
        self.emit(f"if r.code is not None: F[{self.sm['parser_error']}] = r.code", 2)
        self.emit("return r.offset", 2)
        self.emit("return o", 1)
        self.emit("", 0)

    def transition(self, tr: ir.Transition, fnames: dict[str, str], ind: int) -> None:
        def go(target: str) -> str:
            if target == "accept":
                return "return None, o"
            if target == "reject":
                return "raise _Reject(None, o)"
            return f"return {fnames[target]}, o"

        if isinstance(tr, ir.DirectTransition):
            self.emit(go(tr.next), ind)
            return
        keys = []
        for k in tr.keys:
            name = self.tmp()
            self.emit(f"{name} = {self.expr(k)}", ind)
            keys.append((name, k.type))
        for case in tr.cases:
            if isinstance(case.keysets[0], ir.KsValueSet):
                vs = self.bind("_VS", self.state.value_sets[case.keysets[0].value_set.control_plane_name].members)
                member = "".join(f"{self.unsigned(kt, kname)}, " for kname, kt in keys)
                self.emit(f"if ({member}) in {vs}: {go(case.next)}", ind)
                continue
            conds = []
            for (kname, kt), ks in zip(keys, case.keysets):
                if isinstance(ks, ir.KsDefault):
                    continue
                if isinstance(ks, ir.KsValue):
                    conds.append(f"{kname} == {self.expr(ks.value)}")
                elif isinstance(ks, ir.KsMask):
                    m = self.expr(ks.mask)
                    conds.append(f"{self.unsigned(kt, kname)} & {m} == {self.expr(ks.value)} & {m}")
                elif isinstance(ks, ir.KsRange):
                    conds.append(f"{self.expr(ks.lo)} <= {kname} <= {self.expr(ks.hi)}")
                else:
                    raise _fail("unsupported select keyset", case.loc)
            if not conds:
                self.emit(go(case.next), ind)
                return
            self.emit(f"if {' and '.join(conds)}: {go(case.next)}", ind)
        self.emit(f"raise _Reject({self.errors['NoMatch']}, o)", ind)

    def gen_control(self, fname: str, c: ir.Control, deparser: bool = False) -> bool:
        """Emit `fname(F)`; returns False when the control does nothing at all."""
        decls = [d for d in c.locals if isinstance(d, ir.VarDecl)]
        if not c.body.stmts and not deparser:
            self.emit(f"def {fname}(F):", 0)
            self.emit("pass", 1)
            self.emit("", 0)
            return False
        self.emit(f"def {fname}(F):", 0)
        if deparser:
            self.emit("_out = []", 1)
        self.emit("try:", 1)
        for d in decls:  # control-level variables start afresh every time the control runs
            if d.init is not None:
                self.assign(self.storage(d, d.loc), "", d.type, d.init, 2)
            else:
                self.reset(self.storage(d, d.loc), "", 2)
        self.block(c.body.stmts, 2)
        self.emit("except _Exit:", 1)
        self.emit("pass", 2)
        if deparser:
            self.emit("return _out", 1)
        self.emit("", 0)
        return True

    def compile(self) -> Compiled:
        m = self.p.main
        self.gen_parser(m.parser)
        empty = set()
        for fname, ctl in (("verify", m.verify_checksum), ("ingress", m.ingress), ("egress", m.egress),
                           ("compute", m.compute_checksum)):
            if not self.gen_control(fname, ctl):
                empty.add(fname)
        self.gen_control("deparse", m.deparser, deparser=True)
        self._drain_pending()
        source = "\n".join(self._functions + self.lines) + "\n"
        code = compile(source, f"<p4 {self.p.source}>", "exec")
        exec(code, self.ns)  # noqa: S102 - our own generated code
        for var, fns in self._action_maps:
            self.ns[var] = {cp: self.ns[fn] for cp, fn in fns.items()}
        self.state.schema.digests = tuple(sorted(self.digests))
        return Compiled(source, self.ns, self.frame.initial, self.sm, self.hidden, self.field_lists,
                        self.meta_range, empty)
