"""What the Python and C printers of the lowered form share: the walk over a program.

`LoweredPrinter` decides what a primitive, expression, parser operation or transition does and
where its values live (`p4target.backends.layout`); each back end (python.py, c.py) says how that
is written in its language through the templates and methods it defines.
"""
from __future__ import annotations

from p4target.backends.layout import Layout, Unsupported
from p4target.lowered import model as m


class LoweredPrinter:
    """The language-neutral half of a printer; subclasses define the class attributes and the methods
    that raise NotImplementedError here."""

    # Expression templates by operator ("neg" is unary minus): {a} left, {b} right, {c} the `?` condition.
    OPS: dict[str, str] = {}
    # Stack queries by operator: {n} the stack's next-index slot.
    STACK_OPS: dict[str, str] = {}
    NOT_SET = ""  # a hidden slot's "not set" (a clone without a field list)
    NO_FIELD_LIST = ""  # resubmit/recirculate without a field list
    CLONE = {"I2E": "", "E2E": ""}  # the hidden clone_type slot's values

    def __init__(self, p: m.Program):
        if len(p.parsers) != 1 or len(p.deparsers) != 1:
            raise Unsupported("a v1model program has one parser and one deparser", p.source)
        self.p = p
        self.L = Layout(p)
        self.errors = dict(p.errors)
        self.out: list[str] = []
        self._tmp = 0
        self.actions = {a.id: a for a in p.actions}
        self.learn_lists = {ll.id: ll for ll in p.learn_lists}
        self.calcs = {c.name: c for c in p.calculations}

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

    def header_base(self, v: m.Value | None) -> str:
        """An expression for a header's base slot (its validity slot)."""
        raise NotImplementedError

    def set_slots(self, assignments: list[tuple[int, str]], ind: int) -> None:
        """Print slot = value for each pair."""
        raise NotImplementedError

    def extract(self, target: m.Value, vl: str, ind: int) -> None:
        raise NotImplementedError

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        raise NotImplementedError

    def verify(self, cond: str, code: str, ind: int) -> None:
        """The parser rejects with error `code` unless `cond`."""
        raise NotImplementedError

    def advance(self, amount: str, bits: bool, ind: int) -> None:
        """The parser's cursor moves `amount` bits (`bits`) or bytes on."""
        raise NotImplementedError

    def set_key(self, parts: list[tuple[str, int, int]], ind: int) -> None:
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

    # -- values

    def expr(self, e: m.Expr) -> str:
        op, a, b = e.op, e.left, e.right
        if op == "access_field":
            return self.read(*self.field_lv(e))
        if op in ("valid", "valid_union"):
            return self.valid(b)
        if op in self.STACK_OPS:
            return self.STACK_OPS[op].format(n=self.next_slot(b))
        template = self.OPS.get("neg" if op == "-" and a is None else op)
        if template is None:
            raise self.fail(f"expression operator {op} cannot be read as a value")
        return template.format(a=self.rv(a) if a is not None else "", b=self.rv(b),
                               c=self.rv(e.cond) if e.cond is not None else "")

    def valid(self, v: m.Value | None) -> str:
        raise NotImplementedError

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
            return f"{self.header_base(v.left)} + {1 + k}", t.fields[k]
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
        fn = getattr(self, "p_" + prim.op, None)
        if fn is None:
            raise self.fail(f"primitive {prim.op} is not supported")
        fn(prim.parameters, ind)

    def _field_list_id(self, v: m.Value | None, absent: str) -> str:
        return str(v.value) if isinstance(v, m.Const) else absent

    def p_clone_ingress_pkt_to_egress(self, ps: list[m.Value], ind: int) -> None:
        self._clone(ps, ind, "I2E")

    def p_clone_egress_pkt_to_egress(self, ps: list[m.Value], ind: int) -> None:
        self._clone(ps, ind, "E2E")

    def _clone(self, ps: list[m.Value], ind: int, kind: str) -> None:
        hid = self.L.hidden
        fl = self._field_list_id(ps[1] if len(ps) > 1 else None, self.NOT_SET)
        self.set_slots([(hid["clone_session"], self.rv(ps[0])), (hid["clone_type"], self.CLONE[kind]),
                        (hid["clone_fl"], fl)], ind)

    def p_resubmit(self, ps: list[m.Value], ind: int) -> None:
        self.set_slots([(self.L.hidden["resubmit"], self._field_list_id(ps[0] if ps else None, self.NO_FIELD_LIST))],
                       ind)

    def p_recirculate(self, ps: list[m.Value], ind: int) -> None:
        self.set_slots([(self.L.hidden["recirculate"],
                         self._field_list_id(ps[0] if ps else None, self.NO_FIELD_LIST))], ind)

    def p_truncate(self, ps: list[m.Value], ind: int) -> None:
        self.set_slots([(self.L.hidden["truncate"], self.rv(ps[0]))], ind)

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
        if s.transition_key:
            widths = [self.L.key_part_width(v) for v in s.transition_key]
            pos = sum((w + 7) // 8 * 8 for w in widths)
            parts = []
            for v, w in zip(s.transition_key, widths):
                pos -= (w + 7) // 8 * 8
                parts.append((self.rv(v), w, pos))
            self.set_key(parts, ind)
        for tr in s.transitions:
            if tr.kind == "default":
                self.emit(self.goto(tr.next_state), ind)
                return
            if tr.kind == "parse_vset":
                raise self.fail(f"parser value set {tr.vset} is not supported yet")
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
