"""The C printer's base: module constants, the program's ids (CProgram), and values printed as C (see
p4target/backends/c.py for the form of the generated code)."""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from p4target.backends.printer import LoweredPrinter
from p4target.lowered import model as m
from p4target.lowered.schema import value_set_widths

MAX_BITS = 64
# how code leaves on an error, by where it is printed (the function's return type)
_LEAVE = {"parser": "L_PARSE_CHECK();", "action": "if (p->rc) return;", "node": "if (p->rc) return;",
          "table": "if (p->rc) return -1;", "deparser": "if (p->rc) return 0;"}


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


def _lit(v: int) -> str:
    """An i128 constant."""
    if -(1 << 63) < v < (1 << 63):
        return f"((i128){v}LL)"
    if v < 0:
        return f"(-{_lit(-v)})"
    if v >> 128:
        raise ValueError(v)
    return f"((i128)(((u128){v >> 64:#x}ULL << 64) | {v & ((1 << 64) - 1):#x}ULL))"


def u128_literal(v: int) -> str:
    return f"(((u128){v >> 64:#x}ULL << 64) | {v & ((1 << 64) - 1):#x}ULL)"


def lookaheads(values: list[m.Value]) -> list[m.Lookahead]:
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


class CValues(LoweredPrinter):
    """The C printer's state (the ids the control plane addresses a program by) and how it prints values:
    expressions, fields, stacks and register cells. CParsing and the printer (p4target.backends.c) build on it."""

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
        self._local_slots: set[int] | None = None  # see _Printer.local_slots
        widths = [f.width or 0 for t in p.header_types for f in t.fields]
        widths += [width for a in p.actions for _, width in a.runtime_data]
        widths += [look.width for parser in p.parsers for s in parser.parse_states
                   for look in lookaheads(s.transition_key + [x for op in s.parser_ops for x in op.parameters])]
        self.w_words = 2 * -(-max(widths + [MAX_BITS]) // MAX_BITS) + 1

    def check(self, ind: int) -> None:
        """After code that can set p->rc: leave the way the current context does."""
        if self.may_fail:
            self.emit(_LEAVE[self.ctx], ind)
        self.may_fail = False

    def stack(self, key: Hashable, name: str, headers: list[int]) -> str:
        """The C array of a stack's (or a union stack's member's: `key`) header bases."""
        arr = self.names("STK", key, name)
        self.stack_arrays[arr] = headers
        return arr

    def header_stack(self, name: str) -> str:
        """The C array of a header stack's bases and, one past its end, its scratch header (every user of a
        stack's array writes the same one: the last write would otherwise decide its length)."""
        return self.stack(name, name, [self.L.base[h] for h in self.L.stacks[name]] + [self.L.scratch[name]])

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
        return [f"{self.union_member_stack(stack, k)}[{u}]"
                for k in range(len(self.L.union_stack_type[stack].headers))]

    def union_member_stack(self, stack: str, k: int) -> str:
        """The C array of the header bases of member `k` of each union of a union stack."""
        bases = [self.L.base[self.L.unions[un][k]] for un in self.L.union_stacks[stack]]
        return self.stack((stack, k), stack, bases)

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

    def reg_cells(self, name: str) -> str:
        """The C of register `name`'s cells: in an action a local loaded once (R<id>), as the generated code is
        built with -fno-strict-aliasing and every u64 store could otherwise change p->E->reg[id] (aggnet's
        per-lane register_read/add/register_write runs 4-8% faster at 256 lanes)."""
        rid = self.cp.registers[name]
        if self.ctx != "action":
            return f"p->E->reg[{rid}]"
        self.reg_locals.add(rid)
        return f"R{rid}"
