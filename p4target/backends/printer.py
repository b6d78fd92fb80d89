"""What the Python and C printers of the lowered form share: the walk over a program.

`LoweredPrinter` decides what a primitive, expression, parser operation or transition does and
where its values live (`p4target.backends.layout`); each back end (python.py, c.py) says how that
is written in its language through the templates and methods it defines.
"""
from __future__ import annotations

from p4target.backends.layout import Layout, Unsupported
from p4target.backends.source_text import Identifiers
from p4target.externs.base import Extern, for_primitive
from p4target.lowered import model as m


class LoweredPrinter:
    """The language-neutral half of a printer; subclasses define the class attributes and the methods
    that raise NotImplementedError here."""

    # Expression templates by operator ("neg" is unary minus): {a} left, {b} right, {c} the `?` condition.
    OPS: dict[str, str] = {}
    # Stack queries by operator: {n} the stack's next-index slot.
    STACK_OPS: dict[str, str] = {}
    VALID = ""  # a header's validity as a boolean: {b} its base slot
    OR, FALSE = "", ""  # boolean or, false
    NOT_SET = ""  # a hidden slot's "not set" (a clone without a field list)
    NO_FIELD_LIST = ""  # resubmit/recirculate without a field list
    CLONE = {"I2E": "", "E2E": ""}  # the hidden clone_type slot's values
    CHUNK_BITS: int | None = None  # see Layout

    def __init__(self, p: m.Program):
        if len(p.parsers) != 1 or len(p.deparsers) != 1:
            raise Unsupported("a v1model program has one parser and one deparser", p.source)
        self.p = p
        self.L = Layout(p, self.CHUNK_BITS)
        self.errors = dict(p.errors)
        self.out: list[str] = []
        self._tmp = 0
        self.actions = {a.id: a for a in p.actions}
        self.learn_lists = {ll.id: ll for ll in p.learn_lists}
        self.calcs = {c.name: c for c in p.calculations}
        self.current: m.Primitive | None = None  # the primitive being printed
        self.names = Identifiers()  # every identifier printed for an object of the program (never its name)

    def fail(self, message: str) -> Unsupported:
        return Unsupported(message, self.p.source)

    def emit(self, line: str, ind: int) -> None:
        self.out.append("    " * ind + line)

    def tmp(self, prefix: str = "t") -> str:
        self._tmp += 1
        return f"_{prefix}{self._tmp}"

    def error_code(self, name: str) -> int:
        return self.errors.get(name, 0)

    # -- what each language defines

    def rv(self, v: m.Value | None) -> str:
        """An expression for a value read as data or a boolean."""
        raise NotImplementedError

    def read(self, slot: str, ftype: m.FieldType | None) -> str:
        """An expression reading the slot of a field of type `ftype` (None: a validity slot)."""
        raise NotImplementedError

    def stack_element(self, stack: str, index: m.Value | None) -> str:
        """An expression for the base slot of element `index` of a header stack (checked)."""
        raise NotImplementedError

    def set_slots(self, assignments: list[tuple[int | str, str]], ind: int) -> None:
        """Print slot = value for each pair."""
        raise NotImplementedError

    def extract(self, target: m.Value, vl: str, ind: int) -> None:
        raise NotImplementedError

    def bind(self, code: str, ind: int) -> str:
        """A name for the value of `code`, computed once here (or `code` itself where that is as cheap)."""
        raise NotImplementedError

    def log(self, msg: str, values: list[str], ind: int) -> None:
        """Print log_msg's line: `msg` with its `{}`s filled by values."""
        raise NotImplementedError

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        """Print a write of `code` into a field, truncated to its width."""
        raise NotImplementedError

    def label(self, index: int, ind: int) -> int:
        """Print the place primitive `index` of an action starts (a jump's target); the body's indentation."""
        raise NotImplementedError

    def jump(self, cond: str | None, target: m.Value, ind: int) -> None:
        """Print a jump to primitive `target`, when `cond` is zero (always when None)."""
        raise NotImplementedError

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        """Print: the packet is dropped with an error ("`what` failed") unless `cond`."""
        raise NotImplementedError

    def copy(self, dst: str, src: str, n: int, ind: int) -> None:
        """Print a copy of `n` slots from `src` to `dst`."""
        raise NotImplementedError

    def invalidate_if_valid(self, base: str, others: list[int], ind: int) -> None:
        """Print: when header `base` is valid, the headers at `others` become invalid."""
        raise NotImplementedError

    def add_header(self, base: str, n: int, ind: int) -> str:
        """Print: header `base` (of `n` slots), unless valid, becomes valid with zero fields; a name for base."""
        raise NotImplementedError

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        raise NotImplementedError

    def verify(self, cond: str, code: str, ind: int) -> None:
        """The parser rejects with error `code` unless `cond`."""
        raise NotImplementedError

    def advance(self, amount: str, bits: bool, ind: int) -> None:
        """The parser's cursor moves `amount` bits (`bits`) or bytes on."""
        raise NotImplementedError

    def set_key(self, parts: list[tuple[m.Value, int, int]], ind: int) -> None:
        """Print the transition key from its parts: (value, width, bit position)."""
        raise NotImplementedError

    def goto(self, state: str | None) -> str:
        """A statement going to parse state `state` (None: accept)."""
        raise NotImplementedError

    def case(self, value: int, mask: int | None, then: str) -> str:
        """A statement running `then` when the transition key matches value (under mask)."""
        raise NotImplementedError

    def reject(self, code: int) -> str:
        """A statement rejecting with error `code`."""
        raise NotImplementedError

    def vset_case(self, vset: str, parts: list[tuple[int, int]], then: str, ind: int) -> None:
        """Print: run `then` when the key's parts ((width, bit position) each) are a member of value set `vset`."""
        raise NotImplementedError

    # -- values

    def expr(self, e: m.Expr) -> str:
        op, a, b = e.op, e.left, e.right
        if op == "access_field":
            return self.read(*self.field_lv(e))
        if op in ("valid", "valid_union"):
            return self.valid(b)
        if op in self.STACK_OPS:
            return self.STACK_OPS[op].format(n=self.next_slot(b))
        template = self.templates().get("neg" if op == "-" and a is None else op)
        if template is None:
            raise self.fail(f"expression operator {op} cannot be read as a value")
        return template.format(a=self.rv(a) if a is not None else "", b=self.rv(b),
                               c=self.rv(e.cond) if e.cond is not None else "")

    def templates(self) -> dict[str, str]:
        """The expression templates in use (OPS)."""
        return self.OPS

    def valid(self, v: m.Value | None) -> str:
        """Whether a header (any member of a union) is valid."""
        if isinstance(v, m.UnionRef) or (isinstance(v, m.Expr) and v.op == "dereference_union_stack"):
            members = [self.VALID.format(b=x) for x in self.union_members(v)]
            return "(" + self.OR.join(members) + ")" if members else self.FALSE
        return self.VALID.format(b=self.header_base(v))

    def union_members(self, v: m.Value) -> list[str]:
        """Expressions for the base slots of a union's members."""
        if isinstance(v, m.UnionRef):
            return [str(self.L.base[h]) for h in self.L.unions[v.name]]
        assert isinstance(v, m.Expr) and isinstance(v.left, m.UnionStackRef)
        return self.union_stack_members(v.left.name, v.right)

    def union_stack_members(self, stack: str, index: m.Value | None) -> list[str]:
        """Expressions for the base slots of the members of union `index` of a union stack."""
        raise NotImplementedError

    def header_base(self, v: m.Value | None) -> str:
        """An expression for a header's base slot (its validity slot)."""
        if isinstance(v, m.HeaderRef):
            return str(self.L.base[v.name])
        if isinstance(v, m.Expr) and v.op == "dereference_header_stack" and isinstance(v.left, m.StackRef):
            return self.stack_element(v.left.name, v.right)
        if isinstance(v, m.Expr) and v.op == "access_union_header" and v.left is not None:
            assert isinstance(v.right, m.Const)
            return self.union_members(v.left)[v.right.value]
        raise self.fail(f"{type(v).__name__} does not name a header here")

    def next_slot(self, v: m.Value | None) -> int:
        if isinstance(v, (m.StackRef, m.UnionStackRef)):
            return self.L.next_index[v.name]
        raise self.fail("a stack operation needs a header stack")

    def field_lv(self, v: m.Value | None) -> tuple[str, m.FieldType | None]:
        """(slot expression, field type) of a writable field."""
        if isinstance(v, m.Field):
            slot, ftype = self.L.field_slot(v)
            return str(slot), ftype
        if isinstance(v, m.Expr) and v.op == "access_field" and isinstance(v.right, m.Const):
            t = self.L.header_type_of(v.left)
            k = v.right.value
            if not 0 <= k < len(t.fields):
                raise self.fail(f"field offset {k} is past header type {t.name}")
            return f"{self.header_base(v.left)} + {self.L.offsets[t.name][k]}", t.fields[k]
        raise self.fail(f"{type(v).__name__} is not a writable field")

    def target(self, dst: m.Value) -> tuple[str, m.FieldType, int]:
        """(slot expression, type, width) of a fixed-width field a value is written to."""
        slot, ftype = self.field_lv(dst)
        if ftype is None:
            raise self.fail("a header's $valid$ field cannot be written")
        if ftype.width is None:
            raise self.fail("a variable-length field is written with assign_VL")
        return slot, ftype, ftype.width

    # -- primitives

    def primitive(self, prim: m.Primitive, ind: int) -> None:
        """An extern's primitive as its module (p4target.externs) prints it; the language's own (assign, header
        and stack operations, exit) as the `p_<op>` method here or in the back end prints it."""
        self.current = prim
        ext = for_primitive(prim.op)
        if ext is not None:
            self.extern_primitive(ext, prim.op, prim.parameters, ind)
            return
        fn = getattr(self, "p_" + prim.op, None)
        if fn is None:
            raise self.fail(f"primitive {prim.op} is not supported")
        fn(prim.parameters, ind)

    def where(self) -> str:
        """' at FILE:LINE:COL' of the primitive being printed, where its source is known (BMv2's source_info)."""
        return f" at {self.current.source}" if self.current is not None and self.current.source else ""

    def extern_primitive(self, ext: Extern, op: str, ps: list[m.Value], ind: int) -> None:
        """Print extern primitive `op` in this back end's language (the module's `python` or `c`)."""
        raise NotImplementedError

    def p_assign_VL(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        assert isinstance(dst, m.Field) and isinstance(src, m.Field)
        dt, st = self.L.header_type(dst.header), self.L.header_type(src.header)
        (d, dtype), (s, stype) = self.field_lv(dst), self.field_lv(src)
        assert dtype is not None and stype is not None
        self.copy(d, s, min(self.L.chunks(dt, dtype), self.L.chunks(st, stype)), ind)
        self.set_slots([(self.L.base[dst.header] + self.L.offsets[dt.name][-1],
                         f"F[{self.L.base[src.header] + self.L.offsets[st.name][-1]}]")], ind)

    def p_assign_header(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        d = self.bind(self.header_base(dst), ind)
        self.copy(d, self.header_base(src), self.L.slots(self.L.header_type_of(src)), ind)
        self.after_valid_change(dst, d, ind)

    def p_assign_union(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        if not isinstance(dst, m.UnionRef):
            raise self.fail("assign_union needs header unions")
        for k, (_, tname) in enumerate(self.L.union_type[dst.name].headers):
            self.copy(self.union_members(dst)[k], self.union_members(src)[k], self.L.slots(self.L.types[tname]), ind)

    def named(self, v: m.Value, kind: str) -> str:
        """The name of a register/counter/meter array or calculation a primitive takes."""
        if not isinstance(v, m.Named) or v.kind != kind:
            raise self.fail(f"expected a {kind}")
        return v.name

    def p_assign_header_stack(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        assert isinstance(dst, m.StackRef) and isinstance(src, m.StackRef)
        size = self.L.size[self.L.stacks[dst.name][0]]
        for d, s in zip(self.L.stacks[dst.name], self.L.stacks[src.name]):
            self.copy(str(self.L.base[d]), str(self.L.base[s]), size, ind)
        self.set_slots([(self.L.next_index[dst.name], f"F[{self.L.next_index[src.name]}]")], ind)

    def after_valid_change(self, dst: m.Value, base: str, ind: int) -> None:
        """A union member made valid invalidates the union's other members, as BMv2 does."""
        if isinstance(dst, m.HeaderRef) and dst.name in self.L.member_of:
            others = [self.L.base[h] for h in self.L.unions[self.L.member_of[dst.name]] if h != dst.name]
            if others:
                self.invalidate_if_valid(base, others, ind)

    def p_add_header(self, ps: list[m.Value], ind: int) -> None:
        b = self.add_header(self.header_base(ps[0]), self.L.slots(self.L.header_type_of(ps[0])), ind)
        self.after_valid_change(ps[0], b, ind)

    def p_remove_header(self, ps: list[m.Value], ind: int) -> None:
        self.set_slots([(self.header_base(ps[0]), self.FALSE)], ind)

    def action_body(self, a: m.Action, ind: int) -> None:
        """An action's primitives, with p4c's jumps (its lowering of `if` inside an action) by index."""
        for i, prim in enumerate(a.primitives):
            body = self.label(i, ind)
            if prim.op == "_jump":
                self.jump(None, prim.parameters[0], body)
            elif prim.op == "_jump_if_zero":
                self.jump(self.rv(prim.parameters[0]), prim.parameters[1], body)
            else:
                self.primitive(prim, body)

    # -- parser

    def parser_op(self, op: m.ParserOp, ind: int) -> None:
        ps = op.parameters
        if op.op == "extract":
            self.extract(ps[0], "0", ind)
        elif op.op == "extract_VL":
            self.extract(ps[0], self.rv(ps[1]), ind)
        elif op.op == "set":
            self.p_assign(ps, ind)
        elif op.op == "verify":
            self.verify(self.rv(ps[0]), self.rv(ps[1]), ind)
        elif op.op in ("advance", "shift"):
            self.advance(self.rv(ps[0]), op.op == "advance", ind)
        elif op.op == "primitive":
            name = ps[0]
            assert isinstance(name, m.Named)
            self.primitive(m.Primitive(name.name, ps[1:]), ind)
        else:
            raise self.fail(f"parser operation {op.op} is not supported")

    def union_stack_member(self, target: m.UnionStackField) -> tuple[int, m.HeaderType]:
        """(index, header type) of the member a union stack's extract fills."""
        ut = self.L.union_stack_type[target.stack]
        k = next((i for i, (name, _) in enumerate(ut.headers) if name == target.member), None)
        if k is None:
            raise self.fail(f"header union stack {target.stack} has no member {target.member}")
        return k, self.L.types[ut.headers[k][1]]

    def transitions(self, s: m.ParseState, ind: int) -> None:
        """A parse state's select: its key (each part padded to whole bytes, first part most significant)."""
        parts = []
        if s.transition_key:
            widths = [self.L.key_part_width(v) for v in s.transition_key]
            pos = sum((w + 7) // 8 * 8 for w in widths)
            for v, w in zip(s.transition_key, widths):
                pos -= (w + 7) // 8 * 8
                parts.append((v, w, pos))
            self.set_key(parts, ind)
        for tr in s.transitions:
            if tr.kind == "default":
                self.emit(self.goto(tr.next_state), ind)
                return
            if tr.kind == "parse_vset":
                assert tr.vset is not None
                self.vset_case(tr.vset, [(w, pos) for _, w, pos in parts], self.goto(tr.next_state), ind)
                continue
            self.emit(self.case(tr.value or 0, tr.mask, self.goto(tr.next_state)), ind)
        self.emit(self.reject(self.error_code("NoMatch")), ind)

    # -- tables

    def key_mask(self, k: m.KeyElement) -> tuple[int, int | None]:
        """(slot, mask or None for a validity bit) a table key element reads."""
        if isinstance(k.target, m.HeaderRef):
            return self.L.base[k.target.name], None
        slot, ftype = self.L.field_slot(k.target)
        if ftype is None:
            return slot, None
        width = ftype.width or 0
        return slot, (1 << width) - 1 if k.mask is None else k.mask & ((1 << width) - 1)
