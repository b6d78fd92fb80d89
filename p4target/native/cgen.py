"""Compile a checked v1model program's IR into C, for the native engine (native/engine/).

The same IR the Python engine compiles (interp/codegen.py), the same frame layout
(interp/layout.py: one slot per scalar, fixed at compile time), but slots are `u64` and
hold every value as its unsigned bit pattern: bit<W> and int<W> alike (signedness only
matters to the operations that read it: compares, shifts right, saturation, widening
casts, which sign-extend with `sx`). A bit<W> wider than 64 bits lives in 32-bit chunks
(layout.WideLayout); the engine supports moving such fields (extract, emit, copy,
compare) and slices of at most 64 bits, nothing else.

The output defines, for the engine library it is linked with (the contract is engine/program.h):

    g_parse(p) -> payload offset (or PARSE_DROP), g_verify/g_ingress/g_egress/g_compute(p),
    g_deparse(p, out) -> bytes written, and the constants the engine needs (slots of
    standard metadata and hidden bookkeeping, the initial frame, field lists, sizes), and
    gathers them into the descriptor `aggnet_prog` (DEFINE_PROGRAM).

Control flow: `exit` sets p->rc = RC_EXIT, an error (division by zero, failed assert)
RC_ERR; every call site returns when p->rc is set, as the Python engine unwinds with
exceptions. Everything the generated code indexes at run time is bounds-checked
(packet bytes, stack indexes, register and counter indexes).

A construct the engine lacks raises `Unsupported` naming it; the caller then runs the
program on the Python engine.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.interp.layout import CHUNK_BITS, Frame, HeaderLayout, Layout, Local, StackLayout, StructLayout, WideLayout, span
from p4target.interp.schema import digest_name, match_keys, table_actions
from p4target.p4info import supports_timeout

MAX_BITS = 64  # widest scalar the engine computes with
MAX_PARSER_STATES = 1000
HASH_ALGOS = ("crc16", "crc16_custom", "crc32", "crc32_custom", "csum16", "xor16", "identity", "random")


class Unsupported(Exception):
    """A construct the native engine does not implement (the program runs on the Python engine)."""

    def __init__(self, construct: str, loc: ir.Loc = ir.NOWHERE):
        super().__init__(f"{construct} ({loc})" if loc is not ir.NOWHERE else construct)
        self.construct = construct


def _mask(w: int) -> int:
    return (1 << w) - 1


def _lit(v: int) -> str:
    return f"{v & _mask(64):#x}ULL"


def _scalar(t: ir.Type) -> bool:
    return isinstance(t, (ir.BitsType, ir.IntType, ir.BoolType, ir.EnumType, ir.ErrorType, ir.InfIntType))


def _base(t: ir.Type) -> ir.Type:
    return t.underlying if isinstance(t, ir.EnumType) and t.underlying is not None else t


def _signed(t: ir.Type) -> bool:
    return isinstance(_base(t), ir.IntType)


def width(t: ir.Type, loc: ir.Loc = ir.NOWHERE) -> int:
    """Bits of a scalar value as the engine holds it (enums and errors are 32-bit indexes)."""
    t = _base(t)
    if isinstance(t, (ir.BitsType, ir.IntType)):
        if t.width > MAX_BITS:
            raise Unsupported(f"operations on {t} values (wider than {MAX_BITS} bits)", loc)
        return t.width
    if isinstance(t, ir.BoolType):
        return 1
    if isinstance(t, (ir.EnumType, ir.ErrorType, ir.InfIntType)):
        return 32 if not isinstance(t, ir.InfIntType) else 64
    raise Unsupported(f"values of type {t}", loc)


def value_set_cells(size: int, widths: Sequence[int]) -> int:
    """u64 cells of a value set in native memory: the member count, then each member's values of
    `widths` bits (one word each; a value wider than 64 bits one per 64-bit chunk, least significant first)."""
    return 1 + size * sum(max(1, -(-w // 64)) for w in widths)


@dataclass
class CProgram:
    """The generated C and what the Python side needs to address the engine's state."""

    source: str
    tables: dict[str, int] = field(default_factory=dict)  # control-plane name -> id
    actions: dict[str, int] = field(default_factory=dict)
    registers: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    meters: dict[str, int] = field(default_factory=dict)
    digests: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # (name, field widths) by id: a field
    # wider than 64 bits comes as one word per 64-bit chunk, least significant first
    value_sets: dict[str, int] = field(default_factory=dict)  # -> register id (see value_set_cells)


class CGen:
    """IR -> C for one program; `generate()` returns a CProgram or raises Unsupported."""

    def __init__(self, program: ir.Program):
        if program.main is None:
            raise P4Error("program has no `V1Switch(...) main;` instantiation", program.source)
        self.p = program
        self.frame = Frame(wide_bits=MAX_BITS)
        self.layouts: dict[int, Layout] = {}
        self.params: dict[int, str] = {}  # id(action data Param) -> C expression
        self.errors = {name: i for i, name in enumerate(program.errors)}
        self.out: list[str] = []
        self.funcs: list[str] = []
        self._tmp = 0
        self._actions: dict[int, str] = {}
        self._tables: dict[int, str] = {}
        self._pending: list = []
        self.in_parser = False
        self.may_fail = False  # the statement being generated can set p->rc
        self.max_out = 0  # bytes the deparser can emit at most
        self.cp = CProgram("")
        for i, a in enumerate(program.all_actions()):
            self.cp.actions.setdefault(a.control_plane_name, i)
        for i, t in enumerate(program.all_tables()):
            self.cp.tables[t.control_plane_name] = i
        self.instances: dict[int, int] = {}
        for inst in program.all_instances():
            if inst.extern == "register":
                self.instances[id(inst)] = self.cp.registers.setdefault(inst.control_plane_name, len(self.cp.registers))
            elif inst.extern == "counter":
                self.instances[id(inst)] = self.cp.counters.setdefault(inst.control_plane_name, len(self.cp.counters))
            elif inst.extern == "meter":
                self.instances[id(inst)] = self.cp.meters.setdefault(inst.control_plane_name, len(self.cp.meters))
        for vs in program.value_sets():
            if any(ir.width_of(f.type) > 64 for f in vs.fields):
                raise Unsupported(f"value set {vs.name} with values wider than 64 bits", vs.loc)
            self.cp.value_sets[vs.control_plane_name] = self.cp.registers.setdefault(
                f"value_set {vs.control_plane_name}", len(self.cp.registers))
        self._meter_color: dict[int, int] = {}  # id(direct_meter instance) -> slot of this packet's color
        self._storage()

    # ------------------------------------------------------------------ storage

    def _storage(self) -> None:
        m = self.p.main
        pp = m.parser.params
        if len(pp) != 4:
            raise P4Error("the v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)",
                          m.parser.loc.file, m.parser.loc.line, m.parser.loc.col)
        hdr = self.frame.alloc(pp[1].type, pp[1].loc)
        meta = self.frame.alloc(pp[2].type, pp[2].loc)
        self.meta_range = span(meta)
        sm = self.frame.alloc(pp[3].type, pp[3].loc)
        self.sm = {name: slot for name, slot in sm.fields.items() if isinstance(slot, int)}
        roots = [hdr, meta, sm]
        for params, lays in ((m.parser.params[1:], roots), (m.verify_checksum.params, roots[:2]),
                             (m.ingress.params, roots), (m.egress.params, roots),
                             (m.compute_checksum.params, roots[:2]), (m.deparser.params[1:], roots[:1])):
            for p, lay in zip(params, lays):
                self.layouts[id(p)] = lay
        self.hidden = {name: self.frame.slot(None) for name in
                       ("clone_session", "clone_type", "clone_fl", "resubmit", "recirculate", "truncate")}
        self.field_lists: dict[int, list[int]] = {}
        self._field_lists(pp[2].type, meta)
        for block in [m.parser, m.verify_checksum, m.ingress, m.egress, m.compute_checksum, m.deparser]:
            for d in block.locals:
                if isinstance(d, ir.VarDecl):
                    self.layouts[id(d)] = self.frame.alloc(d.type, d.loc)

    def _field_lists(self, t: ir.Type, lay: Layout) -> None:
        if not isinstance(t, ir.StructType) or not isinstance(lay, StructLayout):
            return
        for f in t.fields:
            sub = lay.fields[f.name]
            a = f.annotations.get("field_list")
            if a is not None:
                for idx in a.args:
                    if isinstance(idx, int):
                        self.field_lists.setdefault(idx, []).extend(range(*span(sub)))
            self._field_lists(f.type, sub)

    def storage(self, decl: object, loc: ir.Loc) -> Layout:
        lay = self.layouts.get(id(decl))
        if lay is None:
            lay = self.layouts[id(decl)] = self.frame.alloc(decl.type, loc)
        return lay

    def tmp(self, prefix: str = "t") -> str:
        self._tmp += 1
        return f"{prefix}{self._tmp}"

    # ------------------------------------------------------------------ l-values

    def lv(self, e: ir.Expr) -> Layout:
        """Storage of an l-value (static slots only: dynamic stack indexes are unsupported)."""
        if isinstance(e, ir.VarRef):
            if id(e.decl) in self.params:
                raise Unsupported("an action parameter used as an l-value", e.loc)
            return self.storage(e.decl, e.loc)
        if isinstance(e, ir.Member):
            base = self.lv(e.expr)
            if isinstance(base, (StructLayout, HeaderLayout)) and e.member in base.fields:
                return base.fields[e.member]
            raise Unsupported(f"header stack .{e.member} outside extract", e.loc)
        if isinstance(e, ir.ArrayIndex):
            base = self.lv(e.expr)
            if isinstance(base, StackLayout) and isinstance(e.index, ir.Constant):
                if not 0 <= e.index.value < len(base.elements):
                    raise P4Error(f"stack index {e.index.value} out of bounds", e.loc.file, e.loc.line, e.loc.col)
                return base.elements[e.index.value]
            raise Unsupported("a header stack indexed by a run-time value", e.loc)
        raise Unsupported(f"{type(e).__name__} as an l-value", e.loc)

    @staticmethod
    def slot(lay: Layout) -> str:
        return str(lay) if isinstance(lay, Local) else f"F[{lay}]"

    def wide(self, e: ir.Expr) -> WideLayout | None:
        t = e.type
        if isinstance(t, ir.BitsType) and t.width > MAX_BITS and isinstance(e, (ir.VarRef, ir.Member, ir.ArrayIndex)):
            lay = self.lv(e)
            if isinstance(lay, WideLayout):
                return lay
        return None

    @staticmethod
    def chunk_widths(lay: WideLayout) -> list[int]:
        """Bits of each chunk slot, most significant first."""
        n = lay.chunks
        return [lay.width - CHUNK_BITS * (n - 1)] + [CHUNK_BITS] * (n - 1)

    # ------------------------------------------------------------------ expressions

    def x(self, e: ir.Expr) -> str:
        """C expression (u64, the value's bit pattern) computing `e`."""
        method = getattr(self, "x_" + type(e).__name__, None)
        if method is None:
            raise Unsupported(f"{type(e).__name__} expressions", e.loc)
        return method(e)

    def sx(self, t: ir.Type, code: str, loc: ir.Loc) -> str:
        """Signed reading of a value (int64_t) for int<W>, else the value itself."""
        return f"sx({code}, {width(t, loc)})" if _signed(t) else code

    def wrap(self, t: ir.Type, code: str, loc: ir.Loc) -> str:
        w = width(t, loc)
        return f"(({code}) & {_lit(_mask(w))})" if w < 64 else f"((u64)({code}))"

    def x_Constant(self, e: ir.Constant) -> str:
        if isinstance(e.type, ir.InfIntType):
            if not -(1 << 63) <= e.value < (1 << 64):
                raise Unsupported("an integer literal wider than 64 bits", e.loc)
            return _lit(e.value)
        return _lit(e.value & _mask(width(e.type, e.loc)))

    def x_BoolLiteral(self, e: ir.BoolLiteral) -> str:
        return "1ULL" if e.value else "0ULL"

    def x_EnumMember(self, e: ir.EnumMember) -> str:
        if e.value is not None:
            return _lit(e.value & _mask(width(e.type, e.loc)))
        t = e.type
        if isinstance(t, ir.EnumType) and e.member in t.members:
            return f"{t.members.index(e.member)}ULL"
        raise P4Error(f"unknown enum member {e.member}", e.loc.file, e.loc.line, e.loc.col)

    def x_ErrorMember(self, e: ir.ErrorMember) -> str:
        return f"{self.errors[e.member]}ULL"

    def x_VarRef(self, e: ir.VarRef) -> str:
        name = self.params.get(id(e.decl))
        if name is not None:
            return name
        return self.read(self.lv(e), e)

    def read(self, lay: Layout, e: ir.Expr) -> str:
        if isinstance(lay, (int, Local)):
            width(e.type, e.loc)
            return self.slot(lay)
        if isinstance(lay, WideLayout):
            raise Unsupported(f"operations on {e.type} values (wider than {MAX_BITS} bits)", e.loc)
        raise Unsupported("a header or struct used as a value", e.loc)

    def x_Member(self, e: ir.Member) -> str:
        if e.member == "lastIndex":
            base = self.lv(e.expr)
            return f"((F[{base.next_index}] - 1) & 0xffffffffULL)"
        return self.read(self.lv(e), e)

    x_ArrayIndex = x_Member

    def x_Slice(self, e: ir.Slice) -> str:
        w = e.hi - e.lo + 1
        lay = self.wide(e.expr)
        if lay is None:
            return f"(({self.x(e.expr)} >> {e.lo}) & {_lit(_mask(w))})"
        a, b = lay.chunk_slot(e.hi), lay.chunk_slot(e.lo) + 1
        base = e.lo - e.lo % CHUNK_BITS
        code = self.join(lay, a, b, e.loc)
        return f"(({code} >> {e.lo - base}) & {_lit(_mask(w))})"

    def join(self, lay: WideLayout, a: int, b: int, loc: ir.Loc) -> str:
        """The value of chunk slots [a, b) as one u64 (at most 64 bits of chunks)."""
        widths = dict(zip(range(lay.first, lay.end), self.chunk_widths(lay)))
        if sum(widths[s] for s in range(a, b)) > 64:
            raise Unsupported("a slice spanning more than 64 bits of a wide field", loc)
        code, shift = [], 0
        for s in reversed(range(a, b)):
            code.append(f"(F[{s}] << {shift})" if shift else f"F[{s}]")
            shift += widths[s]
        return "(" + " | ".join(code) + ")"

    def x_Unary(self, e: ir.Unary) -> str:
        a = self.x(e.expr)
        if e.op == "!":
            return f"((u64)!{a})"
        if e.op == "-":
            return self.wrap(e.type, f"-{a}", e.loc)
        if e.op == "~":
            return self.wrap(e.type, f"~{a}", e.loc)
        raise Unsupported(f"operator {e.op}", e.loc)

    def x_Binary(self, e: ir.Binary) -> str:
        op, t = e.op, e.type
        if op in ("==", "!=") and (not _scalar(e.left.type) or self.wide(e.left) is not None):
            (a0, a1), (b0, b1) = span(self.lv(e.left)), span(self.lv(e.right))
            if a1 - a0 != b1 - b0:
                raise Unsupported("comparing values of different layouts", e.loc)
            return f"((u64)(memcmp(&F[{a0}], &F[{b0}], {(a1 - a0) * 8}) {op} 0))"
        a, b = self.x(e.left), self.x(e.right)
        if op in ("&&", "||"):
            return f"((u64)({a} {op} {b}))"
        if op in ("==", "!="):
            return f"((u64)({a} {op} {b}))"
        if op in ("<", "<=", ">", ">="):
            lt = e.left.type
            return f"((u64)({self.sx(lt, a, e.loc)} {op} {self.sx(lt, b, e.loc)}))"
        w = width(t, e.loc)
        if op == "++":
            rw = width(e.right.type, e.right.loc)
            return f"(({a} << {rw}) | {b})"
        if op in ("+", "-", "*"):
            return self.wrap(t, f"{a} {op} {b}", e.loc)
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("/", "%"):
            if _signed(t):
                raise Unsupported(f"signed {op}", e.loc)
            self.may_fail = True
            return f"p4_{'div' if op == '/' else 'mod'}(p, {a}, {b})"
        if op in ("|+|", "|-|"):
            kind = "s" if _signed(t) else "u"
            return f"p4_sat_{'add' if op == '|+|' else 'sub'}_{kind}({a}, {b}, {w})"
        if op == "<<":
            return f"p4_shl({a}, {b}, {w})"
        if op == ">>":
            return f"p4_sar({a}, {b}, {w})" if _signed(t) else f"p4_shr({a}, {b})"
        raise Unsupported(f"operator {op}", e.loc)

    def x_Mux(self, e: ir.Mux) -> str:
        return f"({self.x(e.cond)} ? {self.x(e.then)} : {self.x(e.else_)})"

    def x_Cast(self, e: ir.Cast) -> str:
        src, dst = _base(e.expr.type), _base(e.type)
        a = self.x(e.expr)
        if src == dst:
            return a
        if isinstance(dst, ir.BoolType):
            return f"((u64)({a} != 0))"
        if not isinstance(dst, (ir.BitsType, ir.IntType)):
            raise Unsupported(f"cast from {src} to {dst}", e.loc)
        wd = width(dst, e.loc)
        if isinstance(src, ir.BoolType):
            return a
        ws = width(src, e.loc)
        if isinstance(src, ir.IntType) and ws < wd:
            return self.wrap(dst, f"(u64)sx({a}, {ws})", e.loc)
        return a if ws <= wd and not isinstance(src, ir.InfIntType) else self.wrap(dst, a, e.loc)

    def x_HeaderMethodCall(self, e: ir.HeaderMethodCall) -> str:
        if e.method != "isValid":
            raise Unsupported(f"{e.method}() as a value", e.loc)
        lay = self.lv(e.header)
        if isinstance(lay, HeaderLayout):
            return f"F[{lay.valid}]"
        if isinstance(lay, StructLayout):
            return "((u64)(" + " || ".join(f"F[{m.valid}]" for m in lay.fields.values()) + "))"
        raise Unsupported("isValid() on something that is not a header", e.loc)

    def x_TableHitMiss(self, e: ir.TableHitMiss) -> str:
        self.may_fail = True
        call = f"{self.table_fn(e.table)}(p)"
        return f"((u64){call})" if e.which == "hit" else f"((u64)!{call})"

    def x_ExternMethodCall(self, e: ir.ExternMethodCall) -> str:
        tname = getattr(e.target.type, "name", "")
        if tname == "packet_in" and e.method == "lookahead" and self.in_parser:
            w = width(e.type, e.loc)
            nb = (w + 7) // 8
            self.may_fail = True
            return f"p4_look(p, o, {nb}, {nb * 8 - w}, {self.errors['PacketTooShort']})"
        if tname == "packet_in" and e.method == "length":
            return "((u64)p->len)"
        raise Unsupported(f"{tname}.{e.method}() as a value", e.loc)

    # ------------------------------------------------------------------ flattening

    def flat(self, e: ir.Expr) -> list[tuple[str, int]]:
        """(value code, width) of every scalar (or wide-field chunk) in e, in order."""
        if isinstance(e, ir.ListExpr):
            return [x for item in e.items for x in self.flat(item)]
        if isinstance(e, ir.StructExpr):
            return [x for item in e.fields.values() for x in self.flat(item)]
        if _scalar(e.type):
            if isinstance(e.type, ir.InfIntType):
                raise P4Error("an untyped integer has no width here; cast it, e.g. (bit<8>)5",
                              e.loc.file, e.loc.line, e.loc.col)
            return [(self.x(e), width(e.type, e.loc))]
        return self.flat_layout(e.type, self.lv(e), e.loc)

    def flat_layout(self, t: ir.Type, lay: Layout, loc: ir.Loc) -> list[tuple[str, int]]:
        if isinstance(lay, (int, Local)):
            return [(self.slot(lay), width(t, loc))]
        if isinstance(lay, WideLayout):
            return [(f"F[{s}]", w) for s, w in zip(range(lay.first, lay.end), self.chunk_widths(lay))]
        if isinstance(lay, StackLayout):
            return [x for el in lay.elements for x in self.flat_layout(t.element, el, loc)]
        return [x for f in t.fields for x in self.flat_layout(f.type, lay.fields[f.name], loc)]

    def pack(self, parts: list[tuple[str, int]], ind: int) -> tuple[str, int]:
        """Emit a zeroed byte buffer holding `parts` MSB first; (its name, its length)."""
        total = sum(w for _, w in parts)
        nbytes = (total + 7) // 8
        name = self.tmp("b")
        self.emit(f"u8 {name}[{max(nbytes, 1)}] = {{0}};", ind)
        off = 0
        for code, w in parts:
            self.emit(f"putbits({name}, {off}, {code}, {w});", ind)
            off += w
        return name, nbytes

    # ------------------------------------------------------------------ statements

    def emit(self, line: str, ind: int) -> None:
        self.out.append("    " * ind + line)

    def block(self, stmts: list[ir.Stmt], ind: int) -> None:
        for s in stmts:
            self.stmt(s, ind)

    def stmt(self, s: ir.Stmt, ind: int) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise Unsupported(f"{type(s).__name__} statements", s.loc)
        self.may_fail = False
        start = len(self.out)
        method(s, ind)
        if self.may_fail and not isinstance(s, (ir.Block, ir.If, ir.Switch)):
            self.emit(self.fail_check(), ind)
        self.may_fail = False
        if len(self.out) == start:
            self.emit(";", ind)

    def fail_check(self) -> str:
        if self.in_parser:
            return "if (p->rc) { if (p->rc != RC_REJECT) return PARSE_DROP; rcode = p->rej; goto reject; }"
        return "if (p->rc) return;"

    def s_Block(self, s: ir.Block, ind: int) -> None:
        self.emit("{", ind)
        self.block(s.stmts, ind + 1)
        self.emit("}", ind)

    def s_Exit(self, s: ir.Exit, ind: int) -> None:
        self.emit("p->rc = RC_EXIT; return;", ind)

    def s_Return(self, s: ir.Return, ind: int) -> None:
        if s.value is not None:
            raise Unsupported("return with a value", s.loc)
        self.emit("return;", ind)

    def cond(self, e: ir.Expr, ind: int) -> str:
        """A condition's code; table applies in it run (and are checked) before the branch."""
        self.may_fail = False
        c = self.x(e)
        if self.may_fail:
            v = self.tmp("c")
            self.emit(f"u64 {v} = {c};", ind)
            self.emit(self.fail_check(), ind)
            c = v
        self.may_fail = False
        return c

    def s_If(self, s: ir.If, ind: int) -> None:
        self.emit("{", ind)
        self.emit(f"if ({self.cond(s.cond, ind + 1)}) {{", ind + 1)
        if s.then is not None:
            self.stmt(s.then, ind + 2)
        if s.else_ is not None:
            self.emit("} else {", ind + 1)
            self.stmt(s.else_, ind + 2)
        self.emit("}", ind + 1)
        self.emit("}", ind)

    def s_VarDeclStmt(self, s: ir.VarDeclStmt, ind: int) -> None:
        d = s.decl
        if _scalar(d.type) and width(d.type, d.loc) <= MAX_BITS:
            init = self.x(d.init) if d.init is not None else "0"
            lay = self.layouts[id(d)] = Local(self.tmp("v") + "_" + d.name)
            self.emit(f"u64 {lay} = {init};", ind)
            return
        lay = self.storage(d, d.loc)
        if d.init is not None:
            self.assign(lay, d.type, d.init, ind)
        else:
            self.reset(lay, ind)

    def reset(self, lay: Layout, ind: int) -> None:
        a, b = span(lay)
        self.emit(f"memcpy(&F[{a}], &INIT[{a}], {(b - a) * 8});", ind)

    def s_Assign(self, s: ir.Assign, ind: int) -> None:
        lhs = s.lhs
        if isinstance(lhs, ir.DontCare):
            return
        if isinstance(lhs, ir.Slice):
            lay = self.wide(lhs.expr)
            if lay is not None:
                a, b = lay.chunk_slot(lhs.hi), lay.chunk_slot(lhs.lo) + 1
                if b - a != 1:
                    raise Unsupported("assigning a slice that spans chunks of a wide field", lhs.loc)
                target, lo = f"F[{a}]", lhs.lo - (lhs.lo - lhs.lo % CHUNK_BITS)
            else:
                sub = self.lv(lhs.expr)
                width(lhs.expr.type, lhs.loc)
                target, lo = self.slot(sub), lhs.lo
            m = _mask(lhs.hi - lhs.lo + 1) << lo
            self.emit(f"{target} = ({target} & {_lit(~m)}) | (({self.x(s.rhs)} << {lo}) & {_lit(m)});", ind)
            return
        self.assign(self.lv(lhs), lhs.type, s.rhs, ind)

    def assign(self, lay: Layout, t: ir.Type, rhs: ir.Expr, ind: int) -> None:
        """Store the value of `rhs` into storage `lay` (scalars, wide fields, headers, structs)."""
        if isinstance(lay, WideLayout):
            if isinstance(rhs, ir.Constant):
                v = rhs.value & _mask(lay.width)
                for s in reversed(range(lay.first, lay.end)):
                    self.emit(f"F[{s}] = {_lit(v & _mask(CHUNK_BITS))};", ind)
                    v >>= CHUNK_BITS
                return
            src = self.wide(rhs)
            if src is None or src.chunks != lay.chunks:
                raise Unsupported(f"computing {t} values (wider than {MAX_BITS} bits)", rhs.loc)
            self.emit(f"memmove(&F[{lay.first}], &F[{src.first}], {lay.chunks * 8});", ind)
            return
        if isinstance(lay, (int, Local)):
            self.emit(f"{self.slot(lay)} = {self.x(rhs)};", ind)
            return
        if isinstance(rhs, (ir.StructExpr, ir.ListExpr)):
            items = list(rhs.fields.values()) if isinstance(rhs, ir.StructExpr) else rhs.items
            names = list(rhs.fields) if isinstance(rhs, ir.StructExpr) else [f.name for f in t.fields]
            tmps = []
            for item in items:  # evaluate everything before storing (a = {a.y, a.x} must work)
                if _scalar(item.type):
                    name = self.tmp()
                    self.emit(f"u64 {name} = {self.x(item)};", ind)
                    tmps.append(name)
                else:
                    tmps.append(None)
            for name, item, tv in zip(names, items, tmps):
                sub = lay.fields[name]
                if tv is not None:
                    if not isinstance(sub, int):
                        raise Unsupported(f"storing into {t}.{name}", rhs.loc)
                    self.emit(f"F[{sub}] = {tv};", ind)
                else:
                    self.assign(sub, t.field(name).type, item, ind)
            if isinstance(lay, HeaderLayout):
                self.emit(f"F[{lay.valid}] = 1;", ind)
            return
        (a, b), (c, d) = span(lay), span(self.lv(rhs))
        if b - a != d - c:
            raise Unsupported(f"assigning {rhs.type} to {t}", rhs.loc)
        self.emit(f"memmove(&F[{a}], &F[{c}], {(b - a) * 8});", ind)

    def s_MethodCallStmt(self, s: ir.MethodCallStmt, ind: int) -> None:
        c = s.call
        if isinstance(c, (ir.TableApply, ir.TableHitMiss)):
            self.may_fail = True
            self.emit(f"{self.table_fn(c.table)}(p);", ind)
        elif isinstance(c, ir.ActionCall):
            self.action_call(c, ind)
        elif isinstance(c, ir.HeaderMethodCall):
            self.header_method(c, ind)
        elif isinstance(c, ir.ExternMethodCall):
            self.extern_method(c, ind)
        elif isinstance(c, ir.ExternFunctionCall):
            self.extern_function(c, ind)
        else:
            raise Unsupported(f"{type(c).__name__} as a statement", s.loc)

    def s_Switch(self, s: ir.Switch, ind: int) -> None:
        subj = self.tmp("sw")
        indirect = isinstance(s.subject, ir.ActionRun) and s.subject.table.implementation is not None
        self.emit("{", ind)
        if isinstance(s.subject, ir.ActionRun):
            self.emit(f"{self.table_fn(s.subject.table)}(p);", ind + 1)
            self.emit(self.fail_check(), ind + 1)
            self.emit(f"u64 {subj} = (u64)p->act;", ind + 1)
            label = lambda lab: f"{self.cp.actions[lab.control_plane_name]}ULL"  # noqa: E731
        else:
            self.emit(f"u64 {subj} = {self.cond(s.subject, ind + 1)};", ind + 1)
            label = self.x
        pending: list = []
        first = True
        for case in s.cases:
            pending.extend(case.labels)
            if case.body is None:
                continue
            if any(lab is None for lab in pending) and indirect:  # as the Python engine: no action, no case
                head = f"{'if' if first else 'else if'} ({subj} != (u64)-1) {{"
            elif any(lab is None for lab in pending):
                head = "{" if first else "else {"
            else:
                cond = " || ".join(f"{subj} == {label(lab)}" for lab in pending)
                head = f"{'if' if first else 'else if'} ({cond}) {{"
            self.emit(head, ind + 1)
            self.block(case.body.stmts, ind + 2)
            self.emit("}", ind + 1)
            first = False
            if None in pending:
                break
            pending = []
        self.emit("}", ind)

    # ------------------------------------------------------------------ calls

    def header_method(self, c: ir.HeaderMethodCall, ind: int) -> None:
        lay = self.lv(c.header)
        if c.method == "setValid":
            self.emit(f"F[{lay.valid}] = 1;", ind)
        elif c.method == "setInvalid":
            self.reset(lay, ind)
        elif c.method in ("push_front", "pop_front") and isinstance(lay, StackLayout):
            n = c.args[0].value if c.args and isinstance(c.args[0], ir.Constant) else None
            if n is None or n < 0:
                raise P4Error(f"{c.method} needs a constant count", c.loc.file, c.loc.line, c.loc.col)
            size = len(lay.elements)
            n = min(n, size)
            e0, end, cut = (lay.elements[0].first if lay.elements else lay.end), lay.end, n * lay.stride
            if c.method == "push_front":
                self.emit(f"memmove(&F[{e0 + cut}], &F[{e0}], {(end - cut - e0) * 8});", ind)
                self.emit(f"memcpy(&F[{e0}], &INIT[{e0}], {cut * 8});", ind)
                nxt = f"F[{lay.next_index}]"
                self.emit(f"{nxt} = {nxt} + {n} < {size} ? {nxt} + {n} : {size};", ind)
            else:
                self.emit(f"memmove(&F[{e0}], &F[{e0 + cut}], {(end - cut - e0) * 8});", ind)
                self.emit(f"memcpy(&F[{end - cut}], &INIT[{end - cut}], {cut * 8});", ind)
                self.emit(f"F[{lay.next_index}] = F[{lay.next_index}] > {n} ? F[{lay.next_index}] - {n} : 0;", ind)
        else:
            raise Unsupported(f"{c.method}() as a statement", c.loc)

    def action_call(self, c: ir.ActionCall, ind: int) -> None:
        a = c.action
        fn = self.action_fn(a)
        data, copy_out = [], []
        self.emit("{", ind)
        for p, arg in zip(a.params, c.args):
            if p.direction == "":
                data.append(self.x(arg))
                continue
            plan = self.storage(p, p.loc)
            if p.direction in ("in", "inout"):
                self.assign(plan, p.type, arg, ind + 1)
            if p.direction in ("out", "inout") and not isinstance(arg, ir.DontCare):
                copy_out.append((plan, arg))
        args = "NULL"
        if data:
            args = self.tmp("A")
            self.emit(f"const u64 {args}[] = {{{', '.join(data)}}};", ind + 1)
        self.emit(f"{fn}(p, {args});", ind + 1)
        if copy_out:  # an action that exits still copies its out and inout arguments back (P4_16 exit)
            self.emit("if (p->rc && p->rc != RC_EXIT) return;", ind + 1)
        for plan, arg in copy_out:
            lay = self.lv(arg)
            if isinstance(lay, Local):
                self.emit(f"{lay} = F[{plan}];", ind + 1)
            else:
                (a0, a1), (b0, _) = span(plan), span(lay)
                self.emit(f"memmove(&F[{b0}], &F[{a0}], {(a1 - a0) * 8});", ind + 1)
        self.emit("if (p->rc) return;", ind + 1)
        self.emit("}", ind)

    def extern_method(self, c: ir.ExternMethodCall, ind: int) -> None:
        tname = getattr(c.target.type, "name", "")
        m = c.method
        if tname == "packet_in" and self.in_parser:
            if m == "extract" and len(c.args) == 1:
                self.extract(c.args[0], ind)
            elif m == "advance":
                too_short = self.errors["PacketTooShort"]
                self.emit(f"{{ u64 no = (u64)o + ({self.x(c.args[0])} >> 3);", ind)
                self.emit(f"if (no > p->len) {{ o = p->len; rcode = {too_short}; goto reject; }} o = (u32)no; }}", ind)
            elif m == "lookahead":
                self.emit(f"(void){self.x_ExternMethodCall(c)};", ind)
            else:
                raise Unsupported(f"packet.{m} with these arguments", c.loc)
            return
        if tname == "packet_out" and m == "emit":
            self.emit_header(c.args[0].type, self.lv(c.args[0]), ind)
            return
        inst = c.target.decl if isinstance(c.target, ir.InstanceRef) else None
        if inst is None:
            raise Unsupported(f"{tname}.{m}()", c.loc)
        if tname == "register" and m in ("read", "write"):
            rid = self.instances[id(inst)]
            size = inst.size or 0
            width(inst.type_args[0], inst.loc)
            i = self.tmp("i")
            if m == "read":
                self.emit(f"{{ u64 {i} = {self.x(c.args[1])};", ind)
                val = f"({i} < {size}ULL ? p->E->reg[{rid}][{i}] : 0)"
                self.store(c.args[0], val, ind + 1)
            else:
                self.emit(f"{{ u64 {i} = {self.x(c.args[0])};", ind)
                self.emit(f"if ({i} < {size}ULL) p->E->reg[{rid}][{i}] = {self.x(c.args[1])}; ", ind + 1)
            self.emit("}", ind)
        elif tname == "counter" and m == "count":
            cid = self.instances[id(inst)]
            i = self.tmp("i")
            self.emit(f"{{ u64 {i} = {self.x(c.args[0])};", ind)
            self.emit(f"if ({i} < {inst.size or 0}ULL) {{ p->E->cpk[{cid}][{i}]++; "
                      f"p->E->cby[{cid}][{i}] += F[{self.sm['packet_length']}]; }} }}", ind + 1)
        elif tname == "direct_counter" and m == "count":
            self.emit(";", ind)  # direct counters count every hit of their table's entries
        elif tname == "meter" and m == "execute_meter":
            mid = self.instances[id(inst)]
            i = self.tmp("i")
            self.emit(f"{{ u64 {i} = {self.x(c.args[0])};", ind)
            self.store(c.args[1], f"({i} < {inst.size or 0}ULL ? meter_exec(&p->E->meters[{mid}][{i}], "
                                  f"{self.meter_amount(inst)}) : 0)", ind + 1)
            self.emit("}", ind)
        elif tname == "direct_meter" and m == "read":
            self.store(c.args[0], f"F[{self.meter_color(inst)}]", ind)
        else:
            raise Unsupported(f"{tname}.{m}()", c.loc)

    def meter_amount(self, inst: ir.ExternInstance) -> str:
        """What one packet costs a meter: 1 (MeterType.packets) or its length (bytes)."""
        return "1.0" if inst.kind == "packets" else f"(double)F[{self.sm['packet_length']}]"

    def meter_color(self, inst: ir.ExternInstance) -> int:
        """Frame slot holding the color a direct meter gave this packet when its table hit."""
        slot = self._meter_color.get(id(inst))
        if slot is None:
            slot = self._meter_color[id(inst)] = self.frame.slot(0)
        return slot

    def store(self, target: ir.Expr, code: str, ind: int) -> None:
        """`target = code` for an out argument of an extern (scalar storage)."""
        if isinstance(target, ir.DontCare):
            self.emit(f"(void){code};", ind)
            return
        w = width(target.type, target.loc)
        lay = self.lv(target)
        if not isinstance(lay, (int, Local)):
            raise Unsupported("an extern writing a non-scalar", target.loc)
        self.emit(f"{self.slot(lay)} = ({code}) & {_lit(_mask(w))};", ind)

    def extract(self, arg: ir.Expr, ind: int) -> None:
        too_short = self.errors["PacketTooShort"]
        if isinstance(arg, ir.Member) and arg.member == "next":
            stack = self.lv(arg.expr)
            if not isinstance(stack, StackLayout):
                raise Unsupported("extract into .next of something that is not a stack", arg.loc)
            i = self.tmp("n")
            self.emit("{", ind)
            self.emit(f"u64 {i} = F[{stack.next_index}];", ind + 1)
            oob = self.errors["StackOutOfBounds"]
            self.emit(f"if ({i} >= {len(stack.elements)}) {{ rcode = {oob}; goto reject; }}", ind + 1)
            self.emit(f"u64 *G = F + {i} * {stack.stride};", ind + 1)
            self.extract_header(stack.elements[0], "G", too_short, ind + 1)
            self.emit(f"F[{stack.next_index}] = {i} + 1;", ind + 1)
            self.emit("}", ind)
            return
        lay = self.lv(arg)
        if not isinstance(lay, HeaderLayout):
            raise Unsupported("extract into something that is not a header", arg.loc)
        self.extract_header(lay, "F", too_short, ind)

    def header_fields(self, lay: HeaderLayout) -> list[tuple[int, int]]:
        """(slot, width) of every slot of a header's fields, in wire order."""
        out = []
        for f in lay.type.fields:
            sub = lay.fields[f.name]
            if isinstance(f.type, ir.VarbitType):
                raise Unsupported("varbit fields", f.loc)
            if isinstance(sub, WideLayout):
                out.extend(zip(range(sub.first, sub.end), self.chunk_widths(sub)))
            else:
                out.append((sub, width(f.type, f.loc)))
        return out

    def header_bytes(self, lay: HeaderLayout) -> int:
        w = lay.type.width()
        if w % 8:
            t = lay.type
            raise P4Error(f"header {t.name} is {w} bits, not a whole number of bytes",
                          t.loc.file, t.loc.line, t.loc.col)
        return w // 8

    def extract_header(self, lay: HeaderLayout, frame: str, too_short: int, ind: int) -> None:
        n = self.header_bytes(lay)
        self.emit(f"if (o + {n}ULL > p->len) {{ rcode = {too_short}; goto reject; }}", ind)
        off = 0
        for slot, w in self.header_fields(lay):
            self.emit(f"{frame}[{slot}] = getbits(p->data + o, {off}, {w});", ind)
            off += w
        self.emit(f"{frame}[{lay.valid}] = 1;", ind)
        self.emit(f"o += {n};", ind)

    def emit_header(self, t: ir.Type, lay: Layout, ind: int) -> None:
        if isinstance(lay, HeaderLayout):
            n = self.header_bytes(lay)
            self.emit(f"if (F[{lay.valid}]) {{", ind)
            self.emit(f"memset(out + ob, 0, {n});", ind + 1)
            off = 0
            for slot, w in self.header_fields(lay):
                self.emit(f"putbits(out + ob, {off}, F[{slot}], {w});", ind + 1)
                off += w
            self.emit(f"ob += {n};", ind + 1)
            self.emit("}", ind)
            self.max_out += n
        elif isinstance(lay, StackLayout):
            for el in lay.elements:
                self.emit_header(t.element, el, ind)
        elif isinstance(lay, StructLayout):
            for f in t.fields:
                self.emit_header(f.type, lay.fields[f.name], ind)
        else:
            raise Unsupported("emit of something that is not a header, stack or struct")

    def _algo(self, e: ir.Expr) -> str:
        if not isinstance(e, ir.EnumMember) or e.member not in HASH_ALGOS:
            raise Unsupported("a hash algorithm that is not a HashAlgorithm constant", e.loc)
        return e.member.replace("_custom", "")

    def extern_function(self, c: ir.ExternFunctionCall, ind: int) -> None:
        n, a = c.name, c.args
        sm, hid = self.sm, self.hidden
        if n == "mark_to_drop":
            self.emit(f"F[{sm['egress_spec']}] = DROP_PORT; F[{sm['mcast_grp']}] = 0;", ind)
        elif n == "verify" and self.in_parser:
            self.emit(f"if (!{self.x(a[0])}) {{ rcode = {self.x(a[1])}; goto reject; }}", ind)
        elif n in ("verify_checksum", "verify_checksum_with_payload", "update_checksum",
                   "update_checksum_with_payload"):
            algo = self._algo(a[3])
            if algo == "random":
                raise P4Error("random is not a checksum algorithm", a[3].loc.file, a[3].loc.line, a[3].loc.col)
            w = width(a[2].type, a[2].loc)
            self.emit(f"if ({self.x(a[0])}) {{", ind)
            buf, nb = self.pack(self.flat(a[1]), ind + 1)
            payload = "p->data + p->poff, p->len - p->poff" if n.endswith("with_payload") else "NULL, 0"
            value = f"(hash_{algo}({buf}, {nb}, {payload}) & {_lit(_mask(w))})"
            lay = self.lv(a[2])
            if n.startswith("verify"):
                self.emit(f"if ({value} != {self.slot(lay)}) F[{sm['checksum_error']}] = 1;", ind + 1)
            else:
                self.emit(f"{self.slot(lay)} = {value};", ind + 1)
            self.emit("}", ind)
        elif n == "hash":
            algo = self._algo(a[1])
            self.emit("{", ind)
            buf, nb = self.pack(self.flat(a[3]), ind + 1)
            h = "(u64)rng_u32(p->E)" if algo == "random" else f"hash_{algo}({buf}, {nb}, NULL, 0)"
            mx = self.tmp("m")
            self.emit(f"u64 {mx} = {self.x(a[4])};", ind + 1)
            self.store(a[0], f"{self.x(a[2])} + ({mx} ? {h} % {mx} : {h})", ind + 1)
            self.emit("}", ind)
        elif n == "random":
            lo, hi = self.tmp("lo"), self.tmp("hi")
            self.emit(f"{{ u64 {lo} = {self.x(a[1])}, {hi} = {self.x(a[2])};", ind)
            self.store(a[0], f"rng_range(p->E, {lo}, {hi})", ind + 1)
            self.emit("}", ind)
        elif n == "digest":
            t = c.type_args[0] if c.type_args else a[1].type
            name = digest_name(t)
            values = self.flat(a[1])
            if _has_wide(a[1].type):
                raise Unsupported("a digest with a field wider than 64 bits", c.loc)
            ids = [d for d, _ in self.cp.digests]
            if name not in ids:
                self.cp.digests.append((name, tuple(w for _, w in values)))
                ids.append(name)
            v = self.tmp("D")
            self.emit(f"{{ const u64 {v}[] = {{{', '.join(code for code, _ in values)}}};", ind)
            self.emit(f"push_digest(p->E, {ids.index(name)}, {v}, {len(values)}); }}", ind + 1)
        elif n == "log_msg":
            values = self.flat(a[1]) if len(a) > 1 else []
            if len(a) > 1 and _has_wide(a[1].type):
                raise Unsupported("log_msg of a field wider than 64 bits", c.loc)
            if not isinstance(a[0], ir.StringLiteral):
                raise Unsupported("log_msg with a format that is not a string literal", c.loc)
            v = self.tmp("L")
            self.emit(f"{{ const u64 {v}[] = {{{', '.join([code for code, _ in values] or ['0'])}}};", ind)
            self.emit(f"push_log(p->E, {_cstr(a[0].value)}, {v}, {len(values)}); }}", ind + 1)
        elif n in ("assert", "assume"):
            where = f"PacketError: {n} failed at {c.loc}"
            self.emit(f"if (!{self.x(a[0])}) {{ p->rc = RC_ERR; p->msg = {_cstr(where)}; return; }}", ind)
        elif n == "truncate":
            self.emit(f"F[{hid['truncate']}] = {self.x(a[0])};", ind)
        elif n in ("clone", "clone3", "clone_preserving_field_list"):
            kind = a[0].member if isinstance(a[0], ir.EnumMember) else None
            if kind not in ("I2E", "E2E"):
                raise P4Error("the clone type must be CloneType.I2E or CloneType.E2E", a[0].loc.file,
                              a[0].loc.line, a[0].loc.col)
            fl = self.x(a[2]) if n == "clone_preserving_field_list" else "NONE64"
            self.emit(f"F[{hid['clone_session']}] = {self.x(a[1])}; F[{hid['clone_type']}] = CLONE_{kind}; "
                      f"F[{hid['clone_fl']}] = {fl};", ind)
        elif n in ("resubmit", "resubmit_preserving_field_list", "recirculate", "recirculate_preserving_field_list"):
            fl = self.x(a[0]) if n.endswith("field_list") else "NO_FIELD_LIST"
            self.emit(f"F[{hid[n.split('_')[0]]}] = {fl};", ind)
        else:
            raise Unsupported(f"extern {n}()", c.loc)

    # ------------------------------------------------------------------ actions and tables

    def action_fn(self, a: ir.Action) -> str:
        name = self._actions.get(id(a))
        if name is None:
            name = self._actions[id(a)] = f"a{len(self._actions)}_{a.name}"
            k = 0
            for p in a.params:
                if p.direction == "":
                    width(p.type, p.loc)
                    self.params[id(p)] = f"A[{k}]"
                    k += 1
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
        self.emit(f"static void {self._actions[id(a)]}(pk_t *p, const u64 *A) {{", 0)
        self.emit("u64 *F = p->F; (void)F; (void)A;", 1)
        self.block(a.body.stmts, 1)
        self.emit("}", 0)

    def gen_table(self, t: ir.Table) -> None:
        tid = self.cp.tables[t.control_plane_name]
        acts = []
        for a, _ in table_actions(self.p, t):
            if any(p.direction for p in a.params):
                raise P4Error(f"action {a.name} has directional parameters; tables cannot call it",
                              t.loc.file, t.loc.line, t.loc.col)
            acts.append((self.cp.actions[a.control_plane_name], self.action_fn(a)))
        self.emit(f"static int {self._tables[id(t)]}(pk_t *p) {{", 0)
        for k in match_keys(t):
            width(k.expr.type, k.loc)
        keys = [self.x(k.expr) for k in match_keys(t)]
        for line in table_hit_c(tid, keys, supports_timeout(t),
                                self.sm["packet_length"] if t.direct_counter is not None else None):
            self.emit(line, 1)
        if t.direct_meter is not None:
            dm = t.direct_meter
            self.emit(f"F[{self.meter_color(dm)}] = meter_exec(&e->meter, {self.meter_amount(dm)});", 2)
        impl = t.implementation
        selector = impl is not None and impl.extern == "action_selector"
        emit_table_choice(self.emit, impl is not None, (lambda ind: self.selector_hash(t, ind)) if selector else None)
        self.emit("switch (act) {", 1)
        for aid, fn in acts:
            self.emit(f"case {aid}: {fn}(p, A); break;", 1)
        self.emit("default: break;", 1)
        self.emit("}", 1)
        self.emit("return e != NULL;", 1)
        self.emit("}", 0)

    def selector_hash(self, t: ir.Table, ind: int) -> str:
        """Emit the packing of a selector table's `selector` keys; the C of their hash (as the Python engine's)."""
        algo = self._algo(t.implementation.args[0])
        if algo == "random":
            raise Unsupported("an action selector hashing with random", t.implementation.loc)
        parts = []  # (code, width, validity slot of its header or None)
        for k in t.keys:
            if k.match_kind == "selector":
                header = k.expr.expr if isinstance(k.expr, ir.Member) else None
                valid = self.lv(header).valid if header is not None and isinstance(header.type, ir.HeaderType) else None
                parts += [(code, w, valid) for code, w in self.flat(k.expr)]
        buf, nb = self.tmp("b"), self.tmp("n")
        self.emit(f"u8 {buf}[{max(1, (sum(w for _, w, _ in parts) + 7) // 8)}] = {{0}}; u32 {nb} = 0;", ind)
        for code, w, valid in parts:  # a field of an invalid header adds nothing, as in BMv2
            put = f"putbits({buf}, {nb}, {code}, {w}); {nb} += {w};"
            self.emit(put if valid is None else f"if (F[{valid}]) {{ {put} }}", ind)
        return f"hash_{algo}({buf}, ({nb} + 7) / 8, NULL, 0)"

    def _drain_pending(self) -> None:
        while self._pending:
            kind, obj = self._pending.pop(0)
            saved, self.out = self.out, []
            (self.gen_action if kind == "action" else self.gen_table)(obj)
            self.funcs.append("\n".join(self.out))
            self.out = saved

    # ------------------------------------------------------------------ parser and controls

    def gen_parser(self, p: ir.Parser) -> None:
        self.in_parser = True
        self.emit("static u32 g_parse(pk_t *p) {", 0)
        self.emit("u64 *F = p->F; u32 o = 0; u64 rcode = NO_ERROR_CODE; int steps = 0; (void)F;", 1)
        for d in p.locals:
            if isinstance(d, ir.VarDecl) and d.init is not None:
                self.assign(self.storage(d, d.loc), d.type, d.init, 1)
        self.emit("goto s_start;", 1)
        timeout = self.errors.get("ParserTimeout", 0)
        for name, s in p.states.items():
            self.emit(f"s_{name}:", 0)
            self.emit(f"if (++steps > {MAX_PARSER_STATES}) {{ rcode = {timeout}; goto reject; }}", 1)
            self.emit("{", 1)
            for x in s.body:
                self.stmt(x, 2)
            self.transition(s.transition, 2)
            self.emit("}", 1)
        self.out += parser_end_c(self.sm["parser_error"])
        self.in_parser = False

    def transition(self, tr: ir.Transition, ind: int) -> None:
        def go(target: str) -> str:
            if target == "accept":
                return "goto accept;"
            if target == "reject":
                return "{ rcode = NO_ERROR_CODE; goto reject; }"
            return f"goto s_{target};"

        if isinstance(tr, ir.DirectTransition):
            self.emit(go(tr.next), ind)
            return
        keys = []
        for k in tr.keys:
            name = self.tmp("k")
            self.may_fail = False
            self.emit(f"u64 {name} = {self.x(k)};", ind)
            if self.may_fail:
                self.emit(self.fail_check(), ind)
            keys.append((name, k.type, k.loc))
        for case in tr.cases:
            if isinstance(case.keysets[0], ir.KsValueSet):
                rid, n = self.cp.value_sets[case.keysets[0].value_set.control_plane_name], len(keys)
                m = self.tmp("m")
                same = " && ".join(f"vs[1 + {m} * {n} + {j}] == ({kname} & {_lit(_mask(ir.width_of(kt)))})"
                                   for j, (kname, kt, _) in enumerate(keys))
                self.emit(f"{{ const u64 *vs = p->E->reg[{rid}]; for (u64 {m} = 0; {m} < vs[0]; {m}++) "
                          f"if ({same}) {go(case.next)} }}", ind)
                continue
            conds = []
            for (kname, kt, kloc), ks in zip(keys, case.keysets):
                if isinstance(ks, ir.KsDefault):
                    continue
                if isinstance(ks, ir.KsValue):
                    conds.append(f"{kname} == {self.x(ks.value)}")
                elif isinstance(ks, ir.KsMask):
                    m = self.x(ks.mask)
                    conds.append(f"({kname} & {m}) == ({self.x(ks.value)} & {m})")
                elif isinstance(ks, ir.KsRange):
                    k = self.sx(kt, kname, kloc)
                    lo, hi = self.sx(kt, self.x(ks.lo), kloc), self.sx(kt, self.x(ks.hi), kloc)
                    conds.append(f"{lo} <= {k} && {k} <= {hi}")
                else:
                    raise Unsupported("this select keyset", case.loc)
            if not conds:
                self.emit(go(case.next), ind)
                return
            self.emit(f"if ({' && '.join(conds)}) {go(case.next)}", ind)
        self.emit(f"rcode = {self.errors['NoMatch']}; goto reject;", ind)

    def gen_control(self, fname: str, c: ir.Control) -> None:
        self.emit(f"static void {fname}(pk_t *p) {{", 0)
        self.emit("u64 *F = p->F; (void)F;", 1)
        for d in c.locals:
            if isinstance(d, ir.VarDecl):  # control-level variables start afresh every time the control runs
                if d.init is not None:
                    self.assign(self.storage(d, d.loc), d.type, d.init, 1)
                else:
                    self.reset(self.storage(d, d.loc), 1)
        self.block(c.body.stmts, 1)
        self.emit("}", 0)

    def gen_deparser(self, c: ir.Control) -> None:
        self.max_out = 0
        self.emit("static u32 g_deparse(pk_t *p, u8 *out) {", 0)
        self.emit("u64 *F = p->F; u32 ob = 0; (void)F;", 1)
        for d in c.locals:
            if isinstance(d, ir.VarDecl):
                raise Unsupported("variables in the deparser", d.loc)
        saved = self.may_fail
        for s in c.body.stmts:
            if not (isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternMethodCall)
                    and s.call.method == "emit"):
                raise Unsupported("deparser statements other than emit", s.loc)
            self.stmt(s, 1)
        self.may_fail = saved
        self.emit("return ob;", 1)
        self.emit("}", 0)

    def generate(self) -> CProgram:
        m = self.p.main
        self.gen_parser(m.parser)
        for fname, ctl in (("g_verify", m.verify_checksum), ("g_ingress", m.ingress), ("g_egress", m.egress),
                           ("g_compute", m.compute_checksum)):
            self.gen_control(fname, ctl)
        self.gen_deparser(m.deparser)
        self._drain_pending()
        body = "\n".join(self.out)
        self.cp.source = "\n".join([self.prelude(), "\n".join(self.funcs), body, 'DEFINE_PROGRAM();', ""])
        return self.cp

    def prelude(self) -> str:
        """Constants for the engine (see DEFINE_PROGRAM in engine/program.h), the forward declarations, the initial
        frame."""
        sm, hid = self.sm, self.hidden
        init = []
        for v in self.frame.initial:
            init.append("NONE64" if v is None else str(int(v)) + "ULL")
        lines = ['#include "runtime.h"', f"#define NSLOTS {len(self.frame.initial)}",
                 f"#define HDR_MAX {self.max_out}", f"#define NTABLES {len(self.cp.tables)}",
                 f"#define NREGS {len(self.cp.registers)}", f"#define NCOUNTERS {len(self.cp.counters)}",
                 f"#define NMETERS {len(self.cp.meters)}",
                 f"#define NDIGESTS {len(self.cp.digests)}",
                 f"#define META_FIRST {self.meta_range[0]}", f"#define META_END {self.meta_range[1]}"]
        for name in ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
                     "enq_qdepth", "deq_qdepth", "ingress_global_timestamp", "egress_global_timestamp",
                     "mcast_grp", "egress_rid", "parser_error", "checksum_error"):
            lines.append(f"#define SM_{name.upper()} {sm.get(name, -1)}")
        for name, slot in hid.items():
            lines.append(f"#define H_{name.upper()} {slot}")
        lines.append("static const int SM_ALL[] = {" + ", ".join(str(s) for s in sm.values()) + "};")
        lines.append(f"#define SM_COUNT {len(sm)}")
        lines.append("static const u64 INIT[NSLOTS] = {" + ", ".join(init) + "};")
        lines.append("static const int FL_EMPTY[1] = {0};")
        for idx, slots in sorted(self.field_lists.items()):
            lines.append(f"static const int FL_{idx}[] = {{{', '.join(map(str, slots))}}};")
        lines.append("static const int *field_list(u64 idx, int *n) {")
        lines.append("    switch (idx) {")
        for idx, slots in sorted(self.field_lists.items()):
            lines.append(f"    case {idx}: *n = {len(slots)}; return FL_{idx};")
        lines.append("    default: *n = 0; return FL_EMPTY;")
        lines.append("    }")
        lines.append("}")
        sizes = {"register": [0] * len(self.cp.registers), "counter": [0] * len(self.cp.counters),
                 "meter": [0] * len(self.cp.meters)}
        ids = {"register": self.cp.registers, "counter": self.cp.counters, "meter": self.cp.meters}
        for inst in self.p.all_instances():
            if inst.extern in sizes:
                sizes[inst.extern][ids[inst.extern][inst.control_plane_name]] = inst.size or 0
        for vs in self.p.value_sets():
            widths = [width(f.type, vs.loc) for f in vs.fields]
            sizes["register"][self.cp.value_sets[vs.control_plane_name]] = value_set_cells(vs.size, widths)
        for kind, name in (("register", "REG_SIZE"), ("counter", "COUNTER_SIZE"), ("meter", "METER_SIZE")):
            lines.append(f"static const u64 {name}[] = {{" + ", ".join(map(str, sizes[kind] or [0])) + "};")
        nkeys = [0] * len(self.cp.tables)
        for t in self.p.all_tables():
            nkeys[self.cp.tables[t.control_plane_name]] = len(match_keys(t))
        lines.append("static const int TABLE_KEYS[] = {" + ", ".join(map(str, nkeys or [0])) + "};")
        lines.append("static u32 g_parse(pk_t *p);")
        lines.append("static u32 g_deparse(pk_t *p, u8 *out);")
        for fname in ("g_verify", "g_ingress", "g_egress", "g_compute"):
            lines.append(f"static void {fname}(pk_t *p);")
        for name in list(self._actions.values()):
            lines.append(f"static void {name}(pk_t *p, const u64 *A);")
        for name in list(self._tables.values()):
            lines.append(f"static int {name}(pk_t *p);")
        return "\n".join(lines)


def parser_end_c(parser_error_slot: int) -> list[str]:
    """The end of g_parse: its `accept` and `reject` labels (a reject sets parser_error unless told not to)."""
    return ["accept: return o;", "reject:", f"    if (rcode != NO_ERROR_CODE) F[{parser_error_slot}] = rcode;",
            "    return o;", "}"]


def table_hit_c(tid: int, keys: list[str], timeout: bool, counter_slot: int | None) -> list[str]:
    """The start of a table's C function: look `keys` up in table `tid` and, inside `if (e) {`, touch the entry
    hit (its last-hit time, its direct counter by the bytes in slot `counter_slot`)."""
    lines = ["u64 *F = p->F; (void)F;", f"table_t *T = &p->E->tables[{tid}];"]
    if keys:
        lines += [f"const u64 K[] = {{{', '.join(keys)}}};", "entry_t *e = table_lookup(T, K);"]
    else:
        lines.append("entry_t *e = NULL;")
    lines += ["int act; const u64 *A;", "if (e) {"]
    if timeout:
        lines.append("    e->last_hit = mono();")
    if counter_slot is not None:
        lines.append(f"    e->packets++; e->bytes += F[{counter_slot}];")
    return lines


def emit_table_choice(emit: Callable[[str, int], None], profile: bool, selector_hash: Callable[[int], str] | None
                      ) -> None:
    """The rest of a table function's `if (e) {` (table_hit_c) up to `p->act = act;`: the action and arguments
    (`act`, `A`) of a hit or a miss. With an action profile, a hit runs the member its entry names or the one its
    group picks by `selector_hash(indent)` (the C of the hash, its input packed first), and a miss runs nothing
    (as BMv2 and the Python engine: such tables have no default action); act is -1 where nothing runs."""
    if not profile:
        emit("act = e->action; A = e->args;", 2)
        emit("} else { act = T->def_action; A = T->def_args; }", 1)
    else:
        emit("u64 h = 0;", 2)
        if selector_hash is not None:
            emit("if (e->group >= 0) {", 2)
            emit(f"h = {selector_hash(3)};", 3)
            emit("}", 2)
        emit("const member_t *M = profile_member(p->E, e, h);", 2)
        emit("act = M ? M->action : -1; A = M ? M->args : NULL;", 2)
        emit("} else { act = -1; A = NULL; }", 1)
    emit("p->act = act;", 1)


def _has_wide(t: ir.Type) -> bool:
    """Whether a value of type t holds a bit<W> wider than the engine's scalars."""
    if isinstance(t, ir.BitsType):
        return t.width > MAX_BITS
    if isinstance(t, ir.StructLikeType):
        return any(_has_wide(f.type) for f in t.fields)
    if isinstance(t, ir.StackType):
        return _has_wide(t.element)
    if isinstance(t, ir.TupleType):
        return any(_has_wide(e) for e in t.elements)
    return False


def _cstr(s: str) -> str:
    out = ['"']
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c in '"\\':
            out.append("\\" + c)
        elif 32 <= ch < 127 and c != "?":
            out.append(c)
        else:
            out.append(f"\\{ch:03o}")
    out.append('"')
    return "".join(out)


def generate_c(program: ir.Program) -> CProgram:
    """The C for `program` (raises Unsupported naming the first construct the engine lacks)."""
    return CGen(program).generate()
