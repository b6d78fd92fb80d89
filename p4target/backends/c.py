"""The lowered form printed as C, for the native engine: p4c's BMv2 JSON with no Python per packet.

The twin of `p4target.backends.python` (the readable reference): the same slot layout
(`p4target.backends.layout`), the same v1model flow (the engine's, engine/flow.c), printed against
engine/program.h. Slots are u64 and hold each value's bit pattern masked to its width; an expression
is computed as an i128 (engine/lowered.h): BMv2's values have infinite precision and p4c masks every
result that could grow, so 128 bits hold every intermediate value of fields up to 64 bits wide, and
`>>`, `/`, `%`, comparisons, `two_comp_mod` and the saturating casts see the same numbers as BMv2.

Fields wider than 64 bits take one slot per 64-bit chunk, least significant first
(`Layout(chunk_bits=64)`): they are extracted, emitted, copied, hashed and moved between fields of
their width at any width, and computed with (an i128) up to 127 bits. An expression that reads a
value of 128 bits or more (a field, a constant, an action parameter wider than 64 bits) is computed
in the multi-word integers of engine/wide.h (`wint`, W_WORDS words: twice the widest field and a
sign word). Table keys (a range over its words as one number), action parameters, register cells,
digest fields and parser value-set values wider than 64 bits take one engine word per 64-bit chunk,
least significant first (p4target/native/store.py splits and joins the control plane's values the
same way; a value set's members live in engine cells, `value_set_cells`, which P4Runtime's
ValueSetEntry writes fill). A parser transition key of up to 128 bits is one u128; a wider one
(fields, lookaheads, a value set's key) is an array of 64-bit words, least significant first, each
case comparing it word by word under its mask. A lookahead wider than 127 bits is read as a wint,
one 64-bit chunk at a time; a parser operation checks the packet is long enough for its lookaheads
before it writes anything, as BMv2 does. A computed value (a hash, a checksum, a meter's colour, a
random number: at most 128 bits) written to a wider field fills its low words and sign-extends into
the rest. What does not run raises `Unsupported` naming the construct (the program then runs on the
Python engine); of what p4c writes for v1model, nothing is left: only JSON with other than one parser
and one deparser.

Control flow: `exit` sets p->rc = RC_EXIT, an error (division by zero, a stack index out of range, a
failed assert) RC_ERR, and every caller returns when p->rc is set. A pipeline is a loop over its
nodes (tables and conditionals), each giving the index of the next.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from p4target.backends.layout import ident
from p4target.backends.printer import LoweredPrinter
from p4target.externs.base import Extern
from p4target.externs.checksum import c_checksums
from p4target.lowered import model as m
from p4target.lowered.schema import value_set_widths

MAX_BITS = 64
MAX_PARSER_STATES = 1000
_ALGOS = {"crc16": "crc16", "crc16_custom": "crc16", "crc32": "crc32", "crc32_custom": "crc32", "csum16": "csum16",
          "xor16": "xor16", "identity": "identity"}
_SM_FIELDS = ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "enq_qdepth",
              "deq_qdepth", "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
              "parser_error", "checksum_error")
# how code leaves on an error, by where it is printed (the function's return type)
_LEAVE = {"parser": "L_PARSE_CHECK();", "action": "if (p->rc) return;", "node": "if (p->rc) return;",
          "table": "if (p->rc) return -1;", "deparser": "if (p->rc) return 0;"}
_HIDDEN_C = ("clone_session", "clone_type", "clone_fl", "resubmit", "recirculate", "truncate")


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


def _cstr(s: str) -> str:
    """`s` as a C string literal (octal escapes outside printable ASCII, and for `?`: no trigraphs)."""
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


def _lit(v: int) -> str:
    """An i128 constant."""
    if -(1 << 63) < v < (1 << 63):
        return f"((i128){v}LL)"
    if v < 0:
        return f"(-{_lit(-v)})"
    if v >> 128:
        raise ValueError(v)
    return f"((i128)(((u128){v >> 64:#x}ULL << 64) | {v & ((1 << 64) - 1):#x}ULL))"


def _u128(v: int) -> str:
    return f"(((u128){v >> 64:#x}ULL << 64) | {v & ((1 << 64) - 1):#x}ULL)"


def _lookaheads(values: list[m.Value]) -> list[m.Lookahead]:
    """The lookaheads in `values` and their operands."""
    found: list[m.Lookahead] = []

    def walk(v: m.Value | None) -> None:
        if isinstance(v, m.Lookahead):
            found.append(v)
        elif isinstance(v, m.Expr):
            for x in (v.left, v.right, v.cond):
                walk(x)

    for v in values:
        walk(v)
    return found


class _Printer(LoweredPrinter):
    """Lowered Program -> C source and the ids the control plane addresses it by."""

    OPS = {"d2b": "({b} != 0)", "b2d": "{b}", "not": "(!{b})", "~": "(~{b})", "neg": "l_sub(0, {b})",
           "?": "({c} ? {a} : {b})", "two_comp_mod": "l_sx({a}, {b})", "sat_cast": "l_sat({a}, {b})",
           "usat_cast": "l_usat({a}, {b})", "/": "l_div(p, {a}, {b})", "%": "l_mod(p, {a}, {b})",
           "and": "({a} && {b})", "or": "({a} || {b})", "+": "l_add({a}, {b})", "-": "l_sub({a}, {b})",
           "*": "l_mul({a}, {b})", "<<": "l_shl({a}, {b})", ">>": "l_shr({a}, {b})",
           **{op: f"({{a}} {op} {{b}})" for op in ("==", "!=", ">", ">=", "<", "<=", "&", "|", "^")}}
    # the same where every value of the expression fits in 63 bits (`narrow`): int64_t arithmetic, no overflow
    OPS64 = {**OPS, "neg": "(-{b})", "two_comp_mod": "l_sx64({a}, {b})", "sat_cast": "l_sat64({a}, {b})",
             "usat_cast": "l_usat64({a}, {b})", "/": "l_div64(p, {a}, {b})", "%": "l_mod64(p, {a}, {b})",
             "+": "({a} + {b})", "-": "({a} - {b})", "*": "({a} * {b})", "<<": "l_shl64({a}, {b})",
             ">>": "l_shr64({a}, {b})"}
    # the same in engine/wide.h's wint where an operand is 128 bits or wider (`wide`)
    OPSW = {"d2b": "w_bool(w_nz({b}))", "b2d": "{b}", "not": "w_bool(!w_nz({b}))", "~": "w_not({b})",
            "neg": "w_neg({b})", "?": "(w_nz({c}) ? {a} : {b})", "two_comp_mod": "w_sx({a}, {b})",
            "sat_cast": "w_sat({a}, {b})", "usat_cast": "w_usat({a}, {b})", "/": "w_div(p, {a}, {b})",
            "%": "w_mod(p, {a}, {b})", "and": "w_bool(w_nz({a}) && w_nz({b}))",
            "or": "w_bool(w_nz({a}) || w_nz({b}))", "+": "w_add({a}, {b})", "-": "w_sub({a}, {b})",
            "*": "w_mul({a}, {b})", "<<": "w_shl({a}, {b})", ">>": "w_shr({a}, {b})", "&": "w_and({a}, {b})",
            "|": "w_or({a}, {b})", "^": "w_xor({a}, {b})",
            **{op: f"w_bool(w_cmp({{a}}, {{b}}) {op} 0)" for op in ("==", "!=", ">", ">=", "<", "<=")}}
    STACK_OPS = {"last_stack_index": "((i128)F[{n}] - 1)", "size_stack": "((i128)F[{n}])"}
    VALID, OR, FALSE = "(F[{b}] != 0)", " || ", "0"
    CHUNK_BITS = MAX_BITS
    NOT_SET, NO_FIELD_LIST, CLONE = "NONE64", "NO_FIELD_LIST", {"I2E": "CLONE_I2E", "E2E": "CLONE_E2E"}

    def __init__(self, p: m.Program):
        super().__init__(p)
        self.ctx = "action"  # where code is printed: a key of _LEAVE
        self.labels: dict[str, str] = {}  # parse state -> its label
        self.key_words = 0  # the current transition key's u64 words when wider than 128 bits (set_key)
        self.reg_locals: set[int] = set()  # the registers the current action reads or writes (reg_cells)
        self.cp = CProgram("")
        for a in p.actions:
            self.cp.actions.setdefault(a.name, len(self.cp.actions))
        for pl in p.pipelines:
            for table in pl.tables:
                self.cp.tables[table.name] = len(self.cp.tables)
        self.reg_size = {r.name: r for r in p.register_arrays}
        for r in p.register_arrays:
            self.cp.registers[r.name] = len(self.cp.registers)
        self.vset_keys = {vs.name: value_set_widths(p, vs) for vs in p.parse_vsets}  # after the registers, as cells
        for vs in p.parse_vsets:
            self.cp.value_sets[vs.name] = self.cp.registers.setdefault(f"value_set {vs.name}", len(self.cp.registers))
        self.counter_size = {c.name: c.size for c in p.counter_arrays if not (c.is_direct and c.binding)}
        for name in self.counter_size:
            self.cp.counters[name] = len(self.cp.counters)
        self.meters = {mt.name: mt for mt in p.meter_arrays if not (mt.is_direct and mt.binding)}
        for name in self.meters:
            self.cp.meters[name] = len(self.cp.meters)
        self.cp.digests = [(ll.name, tuple(self.L.width(f) for f in ll.elements)) for ll in p.learn_lists]
        self.stack_arrays: dict[str, list[int]] = {}
        self.may_fail = False
        self.narrow = False  # printing an expression in int64_t (see OPS64)
        self.wide = False  # printing an expression in wint (see OPSW)
        self.param_widths: list[int] = []  # the current action's parameters
        self.param_offsets: list[int] = []  # ... and where each starts in its engine words A[]
        widths = [f.width or 0 for t in p.header_types for f in t.fields]
        widths += [width for a in p.actions for _, width in a.runtime_data]
        widths += [look.width for parser in p.parsers for s in parser.parse_states
                   for look in _lookaheads(s.transition_key + [x for op in s.parser_ops for x in op.parameters])]
        self.w_words = 2 * -(-max(widths + [MAX_BITS]) // MAX_BITS) + 1

    def check(self, ind: int) -> None:
        """After code that can set p->rc: leave the way the current context does."""
        if self.may_fail:
            self.emit(_LEAVE[self.ctx], ind)
        self.may_fail = False

    def stack(self, name: str, headers: list[int]) -> str:
        """The C array of a stack's (or a union's member's) header bases."""
        arr = f"STK_{ident(name)}"
        self.stack_arrays[arr] = headers
        return arr

    def header_stack(self, name: str) -> str:
        """The C array of a header stack's bases and, one past its end, its scratch header (every user of a
        stack's array writes the same one: the last write would otherwise decide its length)."""
        return self.stack(name, [self.L.base[h] for h in self.L.stacks[name]] + [self.L.scratch[name]])

    # -- values

    def rv(self, v: m.Value | None) -> str:
        """A C expression (i128; a wint inside a wide expression) for a value read as data or a boolean."""
        if not self.wide and self.touches_wide(v):
            return f"w_lo({self.wide_rv(v)})"
        if self.wide and isinstance(v, m.RegisterCell) and v.name in self.reg_size:
            wide_reg = self.reg_size[v.name]
            return f"w_reg(p, {self.cp.registers[v.name]}, {self.index(v.index)[2]}, {wide_reg.size}ULL, " \
                   f"{-(-wide_reg.bitwidth // MAX_BITS)}, {wide_reg.bitwidth})"
        if self.wide and not isinstance(v, (m.Expr, m.Field, m.Const, m.ActionParam, m.StackField, m.Lookahead)):
            return f"w_from_i128({self.plain(v)})"  # a narrow leaf (a register cell, a boolean)
        if isinstance(v, m.Field):
            slot, ftype = self.L.field_slot(v)
            return self.read(str(slot), ftype)
        if isinstance(v, m.Const):
            if self.wide:
                words = [(v.value >> (MAX_BITS * i)) & ((1 << MAX_BITS) - 1) for i in range(self.w_words)]
                return f"w_field((const u64[]){{{', '.join(f'{w:#x}ULL' for w in words)}}}, W_WORDS, W_BITS, 1)"
            if self.narrow:
                return f"((i64){v.value}LL)"
            try:
                return _lit(v.value)
            except ValueError:
                raise self.fail(f"constant {v.value:#x} wider than 128 bits") from None
        if isinstance(v, m.BoolConst):
            return "1" if v.value else "0"
        if isinstance(v, m.ActionParam):
            off = self.param_offsets[v.index]
            if self.wide:
                width = self.param_widths[v.index]
                return f"w_field(&A[{off}], {-(-width // MAX_BITS)}, {width}, 0)"
            return f"(({'i64' if self.narrow else 'i128'})A[{off}])"
        if isinstance(v, m.RegisterCell):
            reg = self.reg_size.get(v.name)
            if reg is None:
                raise self.fail(f"unknown register array {v.name}")
            code = f"l_reg({self.reg_cells(v.name)}, {self.index(v.index)[2]}, {reg.size}ULL)"
            return f"((i64){code})" if self.narrow else code
        if isinstance(v, m.StackField):
            b = self.header_base(m.Expr("dereference_header_stack", m.StackRef(v.stack),
                                        m.Expr("last_stack_index", None, m.StackRef(v.stack))))
            k, ftype = self.L.field_index(self.L.stack_type[v.stack], v.field)
            return self.read(f"{b} + {self.L.offsets[self.L.stack_type[v.stack]][k]}", ftype)
        if isinstance(v, m.Lookahead):
            self.may_fail = True
            if self.wide:
                return f"w_look(p, o, {v.offset}, {v.width}, {self.error_code('PacketTooShort')})"
            if v.width > MAX_BITS:
                return f"l_look_wide(p, o, {v.offset}, {v.width}, {self.error_code('PacketTooShort')})"
            return f"(({'i64' if self.narrow else 'i128'})l_look(p, o, {v.offset}, {v.width}, " \
                   f"{self.error_code('PacketTooShort')}))"
        if isinstance(v, m.Expr):
            return self.expr(v)
        raise self.fail(f"a {type(v).__name__} cannot be read as a value here")

    def in_mode(self, wide: bool, print_: Callable[..., str], *args) -> str:
        """`print_(*args)` printed as a wint (`wide`) or not."""
        saved, self.wide = self.wide, wide
        try:
            return print_(*args)
        finally:
            self.wide = saved

    def wide_rv(self, v: m.Value | None) -> str:
        """`v` as a wint."""
        return self.in_mode(True, self.rv, v)

    def plain(self, v: m.Value | None) -> str:
        """`v` as an i128 (an index, a narrow leaf), also inside a wide expression."""
        return self.in_mode(False, self.rv, v)

    def touches_wide(self, v: m.Value | None) -> bool:
        """Whether `v` reads a value of 128 bits or more, or an action parameter or register cell wider than 64 bits."""
        if isinstance(v, m.Field):
            return self.L.width(v) >= 2 * MAX_BITS
        if isinstance(v, m.Const):
            return v.value.bit_length() >= 2 * MAX_BITS - 1
        if isinstance(v, m.ActionParam):
            return v.index < len(self.param_widths) and self.param_widths[v.index] > MAX_BITS
        if isinstance(v, m.RegisterCell):
            return v.name in self.reg_size and self.reg_size[v.name].bitwidth > MAX_BITS
        if isinstance(v, m.StackField):
            return (self.L.field_index(self.L.stack_type[v.stack], v.field)[1].width or 0) >= 2 * MAX_BITS
        if isinstance(v, m.Lookahead):
            return v.width >= 2 * MAX_BITS
        if isinstance(v, m.Expr):
            if v.op == "access_field":
                fields = self.L.header_type_of(v.left).fields
                k = v.right.value if isinstance(v.right, m.Const) else -1
                return 0 <= k < len(fields) and (fields[k].width or 0) >= 2 * MAX_BITS
            return any(self.touches_wide(x) for x in (v.left, v.right, v.cond) if x is not None)
        return False

    def index(self, v: m.Value, name: str = "") -> tuple[str, str, str]:
        """(C type, `name`, expression) of an index into a register, counter or meter array: i64 where it fits."""
        if not self.fits64(v) or self.narrow:
            return "i128", name, self.plain(v)
        self.narrow = True
        try:
            return "i64", name, self.plain(v)
        finally:
            self.narrow = False

    def read(self, slot: str, ftype: m.FieldType | None) -> str:
        if self.wide:
            if ftype is None or ftype.width is None:
                return f"w_from_i128((i128)F[{slot}])"
            return f"w_field(&F[{slot}], {-(-ftype.width // MAX_BITS)}, {ftype.width}, {int(ftype.signed)})"
        if ftype is not None and ftype.width is not None and ftype.width > MAX_BITS:
            if ftype.width > 127:
                return f"w_lo({self.in_mode(True, self.read, slot, ftype)})"
            return f"l_wide(F[{slot}], F[{slot} + 1], {ftype.width}, {int(ftype.signed)})"
        if ftype is not None and ftype.signed and ftype.width:
            return f"sx(F[{slot}], {ftype.width})" if self.narrow else f"l_signed(F[{slot}], {ftype.width})"
        return f"((i64)F[{slot}])" if self.narrow else f"((i128)F[{slot}])"

    def templates(self) -> dict[str, str]:
        return self.OPSW if self.wide else self.OPS64 if self.narrow else self.OPS

    def expr(self, e: m.Expr) -> str:
        if e.op in ("/", "%"):
            self.may_fail = True
        if self.wide:
            if e.op in ("valid", "valid_union") or e.op in self.STACK_OPS:
                return f"w_from_i128({super().expr(e)})"
            return super().expr(e)
        if self.narrow or not self.fits64(e):
            return super().expr(e)
        self.narrow = True
        try:
            return f"((i128){super().expr(e)})"
        finally:
            self.narrow = False

    def fits64(self, v: m.Value | None) -> bool:
        """Whether every value of `v` and its operands fits in an int64_t (63 bits and a sign)."""
        bits = self.bits(v)
        if bits is None or bits > 63:
            return False
        if isinstance(v, m.Expr) and v.op in ("access_field", "valid", "valid_union"):
            return isinstance(v.left if v.op == "access_field" else v.right, (m.HeaderRef, m.UnionRef))
        if isinstance(v, m.Expr):
            return all(self.fits64(x) for x in (v.left, v.right, v.cond) if x is not None)
        return True

    def bits(self, v: m.Value | None) -> int | None:
        """Most bits (with a sign bit) a value can need; None when unknown."""
        if isinstance(v, m.Field):
            _, ftype = self.L.field_slot(v)
            return 2 if ftype is None else (ftype.width or 0) + (0 if ftype.signed else 1)
        if isinstance(v, m.Const):
            return v.value.bit_length() + 1
        if isinstance(v, m.BoolConst):
            return 2
        if isinstance(v, m.ActionParam):
            return self.param_widths[v.index] + 1 if v.index < len(self.param_widths) else None
        if isinstance(v, m.RegisterCell):
            reg = self.reg_size.get(v.name)
            return reg.bitwidth + 1 if reg is not None else None
        if isinstance(v, m.Lookahead):
            return v.width + 1
        if isinstance(v, m.Expr):
            return self.expr_bits(v)
        return None

    def expr_bits(self, e: m.Expr) -> int | None:
        op = e.op
        if op in ("==", "!=", ">", ">=", "<", "<=", "and", "or", "not", "d2b", "b2d", "valid", "valid_union"):
            return 2
        if op == "access_field":
            fields = self.L.header_type_of(e.left).fields
            k = e.right.value if isinstance(e.right, m.Const) else -1
            ftype = fields[k] if 0 <= k < len(fields) else None
            return None if ftype is None or ftype.width is None else ftype.width + (0 if ftype.signed else 1)
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            width = e.right.value if isinstance(e.right, m.Const) else None
            return None if width is None or width < 1 else width + (op == "usat_cast")
        a, b = self.bits(e.left), self.bits(e.right)
        if b is None or (a is None and e.left is not None):
            return None
        if e.left is None:  # ~ and unary minus
            return b + 1
        assert a is not None
        if op == "<<":
            return a + e.right.value if isinstance(e.right, m.Const) and e.right.value < 64 else None
        if op in ("+", "-"):
            return max(a, b) + 1
        if op == "*":
            return a + b
        if op == "?":
            c = self.bits(e.cond)
            return None if c is None else max(a, b)
        return max(a, b)  # & | ^ >> / %

    def union_stack_members(self, stack: str, index: m.Value | None) -> list[str]:
        unions = self.L.union_stacks[stack]
        self.may_fail = True
        u = f"l_at(p, {self.plain(index)}, {len(unions)})"
        return [f"{self.stack(f'{stack}__{k}', [self.L.base[self.L.unions[un][k]] for un in unions])}[{u}]"
                for k in range(len(self.L.union_stack_type[stack].headers))]

    def stack_element(self, stack: str, index: m.Value | None) -> str:
        return f"{self.header_stack(stack)}[l_idx({self.plain(index)}, {len(self.L.stacks[stack])})]"

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        """Write `code` into a field, truncated to its width (a signed field keeps its bit pattern)."""
        slot, _, width = self.target(dst)
        if width > MAX_BITS:  # the i128 value in the field's words, sign-extended past 128 bits, the top one masked
            v, words = self.tmp("v"), -(-width // MAX_BITS)
            parts = [f"(u64){v}", f"(u64)({v} >> 64)"] + [f"(u64)({v} >> 127)"] * (words - 2)
            top = width - MAX_BITS * (words - 1)
            parts[-1] += f" & {(1 << top) - 1:#x}ULL" if top < MAX_BITS else ""
            self.emit(f"{{ i128 {v} = {code}; {' '.join(f'F[{slot} + {k}] = {c};' for k, c in enumerate(parts))} }}",
                      ind)
        else:
            mask = f" & {(1 << width) - 1:#x}ULL" if width < 64 else ""
            self.emit(f"F[{slot}] = (u64)({code}){mask};", ind)
        self.check(ind)

    # -- primitives

    def primitive(self, prim: m.Primitive, ind: int) -> None:
        super().primitive(prim, ind)
        self.check(ind)

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        slot, _, width = self.target(dst)
        if width > MAX_BITS and (isinstance(src, m.Field) or isinstance(src, m.Expr) and src.op == "access_field"):
            s, stype = self.field_lv(src)
            if stype is not None and stype.width == width:  # a wide field moved: its chunks copied
                self.copy(slot, s, -(-width // MAX_BITS), ind)
                return
        if width > 2 * MAX_BITS:
            self.emit(f"w_store(&F[{slot}], {-(-width // MAX_BITS)}, {width}, {self.wide_rv(src)});", ind)
            self.check(ind)
            return
        self.store(dst, self.rv(src), ind)

    p_modify_field = p_assign

    def extern_primitive(self, ext: Extern, op: str, ps: list[m.Value], ind: int) -> None:
        ext.c(self, op, ps, ind)

    def bind(self, code: str, ind: int) -> str:
        name = self.tmp("b")
        self.emit(f"u64 {name} = {code};", ind)
        return name

    def log(self, msg: str, values: list[str], ind: int) -> None:
        v = self.tmp("L")
        self.emit(f"{{ const u64 {v}[] = {{{', '.join(f'(u64){x}' for x in values) or '0'}}};", ind)
        self.emit(f"push_log(p->E, {_cstr(msg)}, {v}, {len(values)}); }}", ind + 1)

    def copy(self, dst: str, src: str, n: int, ind: int) -> None:
        self.emit(f"memmove(&F[{dst}], &F[{src}], {n * 8});", ind)

    def invalidate_if_valid(self, base: str, others: list[int], ind: int) -> None:
        self.emit(f"if (F[{base}]) {{ " + " ".join(f"F[{o}] = 0;" for o in others) + " }", ind)

    def add_header(self, base: str, n: int, ind: int) -> str:
        b = self.bind(base, ind)
        self.check(ind)
        self.emit(f"if (!F[{b}]) {{ memset(&F[{b}], 0, {n * 8}); F[{b}] = 1; }}", ind)
        return b

    def _stack_shift(self, ps: list[m.Value], ind: int, sign: str) -> None:
        stack, count = ps
        assert isinstance(stack, m.StackRef)
        headers = self.L.stacks[stack.name]
        arr = self.header_stack(stack.name)
        self.emit(f"l_shift_stack(F, {arr}, {len(headers)}, {self.L.size[headers[0]]}, {sign}{self.rv(count)}, "
                  f"&F[{self.L.next_index[stack.name]}]);", ind)

    def p_push(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, "")

    def p_pop(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, "-")

    def p_exit(self, ps: list[m.Value], ind: int) -> None:
        self.emit("p->rc = RC_EXIT; return;", ind)

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        self.emit(f"if (!{cond}) {{ p->rc = RC_ERR; p->msg = {_cstr(what + ' failed' + self.where())}; }}", ind)
        self.may_fail = True

    def meter_amount(self, kind: str) -> str:
        return "1.0" if kind == "packets" else f"(double)F[{self.L.sm['packet_length']}]"

    def calc(self, name: str, ind: int) -> str:
        """Print the packing of calculation `name`'s inputs; a C expression for its hash (u64)."""
        c = self.calcs.get(name)
        if c is None:
            raise self.fail(f"unknown calculation {name}")
        return self.hash_of(c.algo, c.input, ind)

    def hash_of(self, algo_name: str, inputs: list[m.Value], ind: int) -> str:
        """Print the packing of a hash's inputs (a calculation's, an action selector's); a C expression for it."""
        algo = _ALGOS.get(algo_name)
        if algo is None:
            raise self.fail(f"hash algorithm {algo_name}")
        buf, nb = self.tmp("hb"), self.tmp("nb")
        parts: list[tuple[str, str, int | None]] = []  # (value, width, valid slot or None)
        payload = False
        most = 0
        for v in inputs:
            if isinstance(v, m.Field):
                slot, ftype = self.L.field_slot(v)
                hb = None if self.p.header(v.header).metadata else self.L.base[v.header]
                t = self.L.header_type(v.header)
                if ftype is not None and (ftype.width is None or ftype.width > MAX_BITS):
                    parts += self.chunk_parts(v.header, ftype, slot, hb)
                    most += (t.max_length or 0) * 8 if ftype.width is None else ftype.width
                else:
                    width = 1 if ftype is None else (ftype.width or 0)
                    parts.append((f"(u64){self.rv(v)}", str(width), hb))
                    most += width
            elif isinstance(v, m.Const):
                width = v.width if v.width is not None else max(v.value.bit_length(), 1)
                value = v.value & ((1 << width) - 1)
                for lo in range(0, width, MAX_BITS)[::-1]:
                    w = min(MAX_BITS, width - lo)
                    parts.append((f"{(value >> lo) & ((1 << w) - 1):#x}ULL", str(w), None))
                most += width
            elif isinstance(v, m.HeaderRef):
                b = self.L.base[v.name]
                t = self.L.header_type(v.name)
                for off, f in zip(self.L.offsets[t.name], t.fields):
                    if f.width is not None:
                        parts += self.chunk_parts(v.name, f, b + off, b)
                        most += f.width
            elif isinstance(v, m.Payload):
                payload = True
                break
            else:
                raise self.fail(f"a calculation cannot take a {type(v).__name__}")
        self.emit(f"u8 {buf}[{most // 8 + 2}] = {{0}}; u32 {nb} = 0;", ind)
        guards = {valid for _, _, valid in parts}
        if len(guards) == 1 and all(bits.isdigit() for _, bits, _ in parts):  # bits at fixed places
            (guard,) = guards
            puts, pos = [], 0
            for code, bits, _ in parts:
                puts.append(f"putbits({buf}, {pos}, {code}, {bits});")
                pos += int(bits)
            self.emit(" ".join(puts) + f" {nb} = {pos};" if guard is None else
                      f"if (F[{guard}]) {{ {' '.join(puts)} {nb} = {pos}; }}", ind)
        else:
            for code, bits, guard in parts:
                put = f"putbits({buf}, {nb}, {code}, {bits}); {nb} += {bits};"
                self.emit(put if guard is None else f"if (F[{guard}]) {{ {put} }}", ind)
        rest = "p->data + p->poff, p->len - p->poff" if payload else "NULL, 0"
        return f"hash_{algo}({buf}, ({nb} + 7) / 8, {rest})"

    def chunk_parts(self, header: str, f: m.FieldType, slot: int, valid: int | None) -> list[tuple[str, str, int | None]]:
        """A field's (value, width, valid slot) parts of a calculation's input, most significant first."""
        t = self.L.header_type(header)
        n = self.L.chunks(t, f)
        if f.width is None:  # a varbit: its current length
            vl = f"(int)F[{self.L.base[header] + self.L.offsets[t.name][-1]}]"
            return [(f"F[{slot + i}]", f"l_cw({vl}, {i})" if n > 1 else vl, valid) for i in reversed(range(n))]
        return [(f"F[{slot + i}]", str(min(MAX_BITS, f.width - MAX_BITS * i)), valid) for i in reversed(range(n))]

    def set_slots(self, assignments: list[tuple[int | str, str]], ind: int) -> None:
        self.emit(" ".join(f"F[{slot}] = (u64)({value});" for slot, value in assignments), ind)

    # -- actions

    def gen_action(self, a: m.Action) -> None:
        self.ctx = "action"
        self.param_widths = [width for _, width in a.runtime_data]
        self.param_offsets = [sum(-(-w // MAX_BITS) for w in self.param_widths[:i]) for i in range(len(a.runtime_data))]
        self.emit(f"static void ac{a.id}(pk_t *p, const u64 *A) {{ /* action {a.name} */", 0)
        self.emit("u64 *F = p->F; (void)F; (void)A;", 1)
        at, self.reg_locals = len(self.out), set()
        self.action_body(a, 0)
        self.out[at:at] = [f"    u64 *const R{rid} = p->E->reg[{rid}];" for rid in sorted(self.reg_locals)]
        self.emit(f"L{len(a.primitives)}: ;", 0)
        self.emit("}", 0)

    def reg_cells(self, name: str) -> str:
        """The C of register `name`'s cells: in an action a local loaded once (R<id>), as the generated code is
        built with -fno-strict-aliasing and every u64 store could otherwise change p->E->reg[id] (aggnet's
        per-lane register_read/add/register_write runs 4-8% faster at 256 lanes)."""
        rid = self.cp.registers[name]
        if self.ctx != "action":
            return f"p->E->reg[{rid}]"
        self.reg_locals.add(rid)
        return f"R{rid}"

    def label(self, index: int, ind: int) -> int:
        self.emit(f"L{index}: ;", ind)
        return ind + 1

    def jump(self, cond: str | None, target: m.Value, ind: int) -> None:
        if not isinstance(target, m.Const):
            raise self.fail("a jump to a computed place")
        self.emit(f"{'' if cond is None else f'if (!{cond}) '}goto L{target.value};", ind)
        self.check(ind)

    # -- pipelines

    def gen_pipeline(self, fname: str, pl: m.Pipeline) -> None:
        nodes = {t.name: i for i, t in enumerate(pl.tables)}
        nodes.update({c.name: len(pl.tables) + i for i, c in enumerate(pl.conditionals)})

        def node(name: str | None) -> int:
            return -1 if name is None else nodes[name]

        for t in pl.tables:
            self.gen_table(t, node)
        self.ctx = "node"
        self.emit(f"static void {fname}(pk_t *p) {{", 0)
        self.emit("u64 *F = p->F; (void)F;", 1)
        self.emit(f"int n = {node(pl.init_table)};", 1)
        self.emit("while (n >= 0) {", 1)
        self.emit("switch (n) {", 2)
        for t in pl.tables:
            self.emit(f"case {nodes[t.name]}: n = tb{t.id}(p); break; /* {t.name} */", 2)
        for c in pl.conditionals:
            self.emit(f"case {nodes[c.name]}: n = {self.rv(c.expression)} ? {node(c.true_next)} : "
                      f"{node(c.false_next)}; break; /* {c.name} */", 2)
        self.emit("default: return;", 2)
        self.emit("}", 2)
        self.emit("if (p->rc) return;", 2)
        self.may_fail = False
        self.emit("}", 1)
        self.emit("}", 0)

    def key_codes(self, k: m.KeyElement) -> list[str]:
        """The engine words of a key element: one per 64-bit chunk, least significant first."""
        slot, mask = self.key_mask(k)
        if mask is None:
            return [f"F[{slot}]"]
        width = self.L.width(k.target) if isinstance(k.target, m.Field) else MAX_BITS
        full = (1 << MAX_BITS) - 1
        return [f"(F[{slot + i}] & {(mask >> (MAX_BITS * i)) & full:#x}ULL)" for i in range(-(-width // MAX_BITS))]

    def gen_table(self, t: m.Table, node: Callable[[str | None], int]) -> None:
        self.ctx = "table"
        tid = self.cp.tables[t.name]
        self.emit(f"static int tb{t.id}(pk_t *p) {{ /* table {t.name} */", 0)
        counted = any(c.is_direct and c.binding == t.name for c in self.p.counter_arrays)
        keys = [c for k in t.key for c in self.key_codes(k)]
        self.emit("u64 *F = p->F; (void)F;", 1)
        self.emit(f"table_t *T = &p->E->tables[{tid}];", 1)
        if keys:
            self.emit(f"const u64 K[] = {{{', '.join(keys)}}};", 1)
            self.emit("entry_t *e = table_lookup(T, K);", 1)
        else:
            self.emit("entry_t *e = NULL;", 1)
        self.emit("int act; const u64 *A;", 1)
        self.emit("if (e) {", 1)
        if t.support_timeout:
            self.emit("e->last_hit = mono();", 2)
        if counted:
            self.emit(f"e->packets++; e->bytes += F[{self.L.sm['packet_length']}];", 2)
        meter = next((mt for mt in self.p.meter_arrays if mt.name == t.direct_meters), None)
        if meter is not None:
            color = f"meter_exec(&e->meter, {self.meter_amount(meter.type)})"
            if meter.result_target is not None:
                self.store(meter.result_target, color, 2)
            else:
                self.emit(f"(void){color};", 2)
        profile = next((ap for pl in self.p.pipelines for ap in pl.action_profiles if ap.name == t.action_profile), None)
        selector = profile.selector if profile is not None else None
        # a hit runs its entry's action, or with an action profile the member its entry names or its group picks by
        # the selector's hash; a miss runs the default action, with a profile nothing (as BMv2: no default action)
        if profile is None:
            self.emit("act = e->action; A = e->args;", 2)
            self.emit("} else { act = T->def_action; A = T->def_args; }", 1)
        else:
            self.emit("u64 h = 0;", 2)
            if selector is not None:
                self.emit("if (e->group >= 0) {", 2)
                self.emit(f"h = {self.hash_of(selector.algo, selector.input, 3)};", 3)
                self.emit("}", 2)
            self.emit("const member_t *M = profile_member(p->E, e, h);", 2)
            self.emit("act = M ? M->action : -1; A = M ? M->args : NULL;", 2)
            self.emit("} else { act = -1; A = NULL; }", 1)
        self.emit("p->act = act;", 1)
        self.emit("switch (act) {", 1)
        for aid in t.action_ids:
            a = self.actions[aid]
            self.emit(f"case {self.cp.actions[a.name]}: ac{aid}(p, A); break;", 1)
        self.emit("default: break;", 1)
        self.emit("}", 1)
        self.emit("if (p->rc) return -1;", 1)
        if selector is not None:
            self.emit("if (e && act < 0) return -1; /* an empty group: the pipeline ends, as in the Python engine */", 1)
        if "__HIT__" in t.next_tables or "__MISS__" in t.next_tables:
            self.emit(f"return e ? {node(t.next_tables.get('__HIT__'))} : {node(t.next_tables.get('__MISS__'))};", 1)
        else:
            self.emit("switch (act) {", 1)
            for name, target in t.next_tables.items():
                if name in self.cp.actions:
                    self.emit(f"case {self.cp.actions[name]}: return {node(target)};", 1)
            self.emit(f"default: return {node(t.base_default_next)};", 1)
            self.emit("}", 1)
        self.emit("}", 0)

    # -- parser, checksums, deparser

    def field_layout(self, t: m.HeaderType, vl: str) -> tuple[list[tuple[int, str, str]], str]:
        """Per field (index, bit offset, width) as C expressions, and the header's bytes; `vl`: varbit bits."""
        out, off = [], "0"
        for k, f in enumerate(t.fields):
            w = str(f.width) if f.width is not None else vl
            out.append((k, off, w))
            off = str(int(off) + int(w)) if off.isdigit() and w.isdigit() else f"{off} + {w}"
        nbytes = str(int(off) // 8) if off.isdigit() else f"({off}) / 8"
        return out, nbytes

    def extract_into(self, b: str, t: m.HeaderType, vl: str, ind: int) -> None:
        too_short = self.error_code("PacketTooShort")
        fields, nbytes = self.field_layout(t, vl)
        self.emit(f"if ((u64)o + {nbytes} > p->len) {{ rcode = {too_short}; goto reject; }}", ind)
        offsets = self.L.offsets[t.name]
        for k, off, w in fields:
            n = self.L.chunks(t, t.fields[k])
            for i in range(n):
                get = f"l_getchunk(p->data + o, {off}, {w}, {i})" if n > 1 else f"getbits(p->data + o, {off}, {w})"
                self.emit(f"F[{b} + {offsets[k] + i}] = {get};", ind)
        if t.max_length is not None:
            self.emit(f"F[{b} + {offsets[-1]}] = {vl};", ind)
        self.emit(f"F[{b}] = 1; o += {nbytes};", ind)

    def extract(self, target: m.Value, vl: str, ind: int) -> None:
        oob = self.error_code("StackOutOfBounds")
        self.emit("{", ind)
        ind += 1
        if isinstance(target, m.HeaderRef):
            t = self.L.header_type(target.name)
            b = str(self.L.base[target.name])
            if t.max_length is not None and vl != "0":
                fixed = sum(f.width or 0 for f in t.fields)
                self.emit(f"i128 vl = {vl};", ind)
                self.check(ind)
                self.emit(f"if (vl % 8) {{ rcode = {self.error_code('ParserInvalidArgument')}; goto reject; }}", ind)
                self.emit(f"if (vl + {fixed} > {t.max_length * 8}) {{ rcode = {self.error_code('HeaderTooShort')}; "
                          "goto reject; }", ind)
                vl = "(int)vl"
            self.extract_into(b, t, vl, ind)
            self.after_valid_change(target, b, ind)
        elif isinstance(target, m.StackRef):
            t = self.L.types[self.L.stack_type[target.name]]
            nxt = self.L.next_index[target.name]
            headers = self.L.stacks[target.name]
            arr = self.header_stack(target.name)
            self.emit(f"if (F[{nxt}] >= {len(headers)}) {{ rcode = {oob}; goto reject; }}", ind)
            self.emit(f"u64 b = {arr}[F[{nxt}]];", ind)
            self.extract_into("b", t, vl, ind)
            self.emit(f"F[{nxt}] += 1;", ind)
        elif isinstance(target, m.UnionStackField):  # the member of the stack's next union
            k, t = self.union_stack_member(target)
            nxt = self.L.next_index[target.stack]
            unions = self.L.union_stacks[target.stack]
            arr = self.stack(f"{target.stack}__{k}", [self.L.base[self.L.unions[u][k]] for u in unions])
            self.emit(f"if (F[{nxt}] >= {len(unions)}) {{ rcode = {oob}; goto reject; }}", ind)
            self.emit(f"u64 b = {arr}[F[{nxt}]];", ind)
            self.extract_into("b", t, vl, ind)
            self.emit(f"F[{nxt}] += 1;", ind)
        else:
            raise self.fail(f"extract into a {type(target).__name__}")
        self.emit("}", ind - 1)

    def parser_op(self, op: m.ParserOp, ind: int) -> None:
        ends = [look.offset + look.width for look in _lookaheads(op.parameters)]
        if ends:  # a lookahead past the packet's end rejects before the operation writes a bit (as BMv2)
            self.emit(f"if (((u64)o * 8 + {max(ends)} + 7) / 8 > p->len) {{ "
                      f"rcode = {self.error_code('PacketTooShort')}; goto reject; }}", ind)
        super().parser_op(op, ind)
        self.check(ind)

    def verify(self, cond: str, code: str, ind: int) -> None:
        self.emit(f"if (!{cond}) {{ rcode = (u64){code}; goto reject; }}", ind)

    def advance(self, amount: str, bits: bool, ind: int) -> None:
        self.emit(f"{{ i128 no = (i128)o + ({amount}{' >> 3' if bits else ''});", ind)
        self.check(ind + 1)
        self.emit(f"if (no > p->len) {{ o = p->len; rcode = {self.error_code('PacketTooShort')}; goto reject; }}",
                  ind + 1)
        self.emit("o = (u32)no; }", ind + 1)

    def gen_parser(self, p: m.Parser) -> None:
        self.ctx = "parser"
        self.labels = labels = {s.name: f"s{s.id}" for s in p.parse_states}
        self.emit("static u32 g_parse(pk_t *p) {", 0)
        self.emit("u64 *F = p->F; u32 o = 0; u64 rcode = NO_ERROR_CODE; int steps = 0; (void)F;", 1)
        self.emit(f"goto {labels[p.init_state]};", 1)
        timeout = self.error_code("ParserTimeout")
        for s in p.parse_states:
            self.emit(f"{labels[s.name]}: /* {s.name} */", 0)
            self.emit(f"if (++steps > {MAX_PARSER_STATES}) {{ rcode = {timeout}; goto reject; }}", 1)
            self.emit("{", 1)
            for op in s.parser_ops:
                self.parser_op(op, 2)
            self.transitions(s, 2)
            self.emit("}", 1)
        # a reject sets parser_error unless told not to
        self.out += ["accept: return o;", "reject:", f"    if (rcode != NO_ERROR_CODE) F[{self.L.sm['parser_error']}] = rcode;",
                     "    return o;", "}"]

    def set_key(self, parts: list[tuple[m.Value, int, int]], ind: int) -> None:
        """A key of up to 128 bits as one u128 `k`; a wider one as `key_words` u64 words k[], least significant first."""
        total = parts[0][2] + (parts[0][1] + 7) // 8 * 8
        self.key_words = -(-total // MAX_BITS) if total > 2 * MAX_BITS else 0
        if not self.key_words:
            code = [f"((((u128)({self.rv(v)})) & {_u128((1 << w) - 1)}) << {pos})" for v, w, pos in parts]
            self.emit(f"u128 k = {' | '.join(code)};", ind)
            self.check(ind)
            return
        self.emit(f"u64 k[{self.key_words}] = {{0}};", ind)
        for v, w, pos in parts:
            if w <= MAX_BITS:
                self.emit(f"l_key_put(k, {pos}, (u64)({self.rv(v)}), {w});", ind)
                continue
            puts = " ".join(f"l_key_put(k, {pos + c}, kp.w[{c // MAX_BITS}], {min(MAX_BITS, w - c)});"
                            for c in range(0, w, MAX_BITS))
            self.emit(f"{{ wint kp = {self.wide_rv(v)}; {puts} }}", ind)
        self.check(ind)

    def key_bits(self, pos: int, width: int) -> str:
        """The key's `width` (at most 64) bits from bit `pos` (a u64)."""
        if self.key_words:
            return f"l_key_get(k, {pos}, {width})"
        return f"(u64)((k >> {pos}) & {_u128((1 << width) - 1)})"

    def goto(self, state: str | None) -> str:
        return f"goto {self.labels[state] if state else 'accept'};"

    def case(self, value: int, mask: int | None, then: str) -> str:
        if self.key_words:  # word by word, skipping words the mask leaves out
            full = (1 << MAX_BITS) - 1
            conds = []
            for j in range(self.key_words):
                mj = full if mask is None else (mask >> (MAX_BITS * j)) & full
                vj = (value >> (MAX_BITS * j)) & mj
                if mj:
                    conds.append(f"k[{j}] == {vj:#x}ULL" if mj == full else f"(k[{j}] & {mj:#x}ULL) == {vj:#x}ULL")
            return f"if ({' && '.join(conds) or '1'}) {then}"
        if mask is None:
            return f"if (k == {_u128(value)}) {then}"
        return f"if ((k & {_u128(mask)}) == {_u128(value & mask)}) {then}"

    def reject(self, code: int) -> str:
        return f"rcode = {code}; goto reject;"

    def vset_case(self, vset: str, parts: list[tuple[int, int]], then: str, ind: int) -> None:
        # each part as its 64-bit chunks, least significant first (value_set_cells)
        chunks = [(min(MAX_BITS, w - c), pos + c) for w, pos in parts for c in range(0, max(w, 1), MAX_BITS)]
        n = len(chunks)
        same = " && ".join(f"vs[1 + m * {n} + {j}] == {self.key_bits(pos, w)}" for j, (w, pos) in enumerate(chunks))
        self.emit(f"{{ const u64 *vs = p->E->reg[{self.cp.value_sets[vset]}]; "
                  f"for (u64 m = 0; m < vs[0]; m++) if ({same}) {then} }}", ind)

    def gen_deparser(self, d: m.Deparser) -> int:
        """Print g_deparse; the most bytes it writes."""
        self.ctx = "deparser"
        self.emit("static u32 g_deparse(pk_t *p, u8 *out) {", 0)
        self.emit("u64 *F = p->F; u32 ob = 0; (void)F;", 1)
        for prim in d.primitives:
            self.primitive(prim, 1)
        most = 0
        for h in d.order:
            b = self.L.base[h]
            t = self.L.header_type(h)
            offsets = self.L.offsets[t.name]
            vl = f"(int)F[{b + offsets[-1]}]" if t.max_length is not None else "0"
            fields, nbytes = self.field_layout(t, vl)
            most += t.max_length if t.max_length is not None else int(nbytes)
            self.emit(f"if (F[{b}]) {{ /* {h} */", 1)
            self.emit(f"memset(out + ob, 0, {nbytes});", 2)
            for k, off, w in fields:
                n = self.L.chunks(t, t.fields[k])
                for i in range(n):
                    slot = b + offsets[k] + i
                    self.emit(f"l_putchunk(out + ob, {off}, F[{slot}], {w}, {i});" if n > 1 else
                              f"putbits(out + ob, {off}, F[{slot}], {w});", 2)
            self.emit(f"ob += {nbytes};", 2)
            self.emit("}", 1)
        self.emit("return ob;", 1)
        self.emit("}", 0)
        return most

    # -- the whole program

    def generate(self) -> CProgram:
        for a in self.p.actions:
            self.gen_action(a)
        self.gen_parser(self.p.parsers[0])
        pipelines = {pl.name: pl for pl in self.p.pipelines}
        for fname, name in (("g_ingress", "ingress"), ("g_egress", "egress")):
            if name in pipelines:
                self.gen_pipeline(fname, pipelines[name])
            else:
                self.emit(f"static void {fname}(pk_t *p) {{ (void)p; }}", 0)
        c_checksums(self, "g_verify", verify=True)
        c_checksums(self, "g_compute", verify=False)
        hdr_max = self.gen_deparser(self.p.deparsers[0])
        self.cp.source = "\n".join([self.prelude(hdr_max), *self.out, "DEFINE_PROGRAM();", ""])
        return self.cp

    def field_slots(self, f: m.Field) -> range:
        """Every slot of a field (one per 64-bit chunk)."""
        slot, ftype = self.L.field_slot(f)
        t = self.L.header_type(f.header)
        return range(slot, slot + (1 if ftype is None else self.L.chunks(t, ftype)))

    def prelude(self, hdr_max: int) -> str:
        """The descriptor's constants (DEFINE_PROGRAM in engine/program.h), the initial frame, stack arrays."""
        L = self.L
        init = []
        for v in L.initial:
            init.append("NONE64" if v is None else f"{int(v) if not isinstance(v, bytes) else 0}ULL")
        lines = [f"#define W_WORDS {self.w_words}", '#include "lowered.h"', f"#define NSLOTS {len(L.initial)}",
                 f"#define HDR_MAX {hdr_max}",
                 f"#define NTABLES {len(self.cp.tables)}", f"#define NREGS {len(self.cp.registers)}",
                 f"#define NCOUNTERS {len(self.cp.counters)}", f"#define NMETERS {len(self.cp.meters)}",
                 f"#define META_FIRST {L.meta_range[0]}", f"#define META_END {L.meta_range[1]}"]
        lines += [f"#define SM_{name.upper()} {L.sm.get(name, -1)}" for name in _SM_FIELDS]
        lines += [f"#define H_{name.upper()} {L.hidden[name]}" for name in _HIDDEN_C]
        lines.append(f"static const int SM_ALL[] = {{{', '.join(str(s) for s in L.sm.values())}}};")
        lines.append(f"#define SM_COUNT {len(L.sm)}")
        lines.append(f"static const u64 INIT[NSLOTS] = {{{', '.join(init)}}};")
        lines.append("static const int FL_EMPTY[1] = {0};")
        field_lists = {fl.id: [slot for f in fl.elements for slot in self.field_slots(f)] for fl in self.p.field_lists}
        for idx, slots in sorted(field_lists.items()):
            lines.append(f"static const int FL_{idx}[] = {{{', '.join(map(str, slots)) or '0'}}};")
        lines.append("static const int *field_list(u64 idx, int *n) {")
        lines.append("    switch (idx) {")
        for idx, slots in sorted(field_lists.items()):
            lines.append(f"    case {idx}: *n = {len(slots)}; return FL_{idx};")
        lines.append("    default: *n = 0; return FL_EMPTY;")
        lines.append("    }")
        lines.append("}")
        regs = [r.size * -(-r.bitwidth // MAX_BITS) for r in self.p.register_arrays] + \
            [value_set_cells(vs.max_size, self.vset_keys[vs.name]) for vs in self.p.parse_vsets]
        counters = list(self.counter_size.values())
        meters = [mt.size for mt in self.meters.values()]
        for name, sizes in (("REG_SIZE", regs), ("COUNTER_SIZE", counters), ("METER_SIZE", meters)):
            lines.append(f"static const u64 {name}[] = {{{', '.join(map(str, sizes or [0]))}}};")
        nkeys = [sum(len(self.key_codes(k)) for k in t.key) for pl in self.p.pipelines for t in pl.tables]
        lines.append(f"static const int TABLE_KEYS[] = {{{', '.join(map(str, nkeys or [0]))}}};")
        for arr, bases in self.stack_arrays.items():
            lines.append(f"static const u32 {arr}[] = {{{', '.join(map(str, bases))}}};")
        lines.append("static u32 g_parse(pk_t *p);")
        lines.append("static u32 g_deparse(pk_t *p, u8 *out);")
        lines += [f"static void {fname}(pk_t *p);" for fname in ("g_verify", "g_ingress", "g_egress", "g_compute")]
        lines += [f"static void ac{a.id}(pk_t *p, const u64 *A);" for a in self.p.actions]
        lines += [f"static int tb{t.id}(pk_t *p);" for pl in self.p.pipelines for t in pl.tables]
        return "\n".join(lines)


def generate_c(program: m.Program) -> CProgram:
    """The C for lowered `program` (raises Unsupported naming the first construct the native engine lacks)."""
    return _Printer(program).generate()
