"""The values of the lowered form as either back end prints them: the language-neutral walk (which slot a field,
a header or a stack element is; which template an operator takes), over the language's own reads
(python_values.py, c_values.py)."""
from __future__ import annotations

from p4target.backends.code import Code
from p4target.lowered import model as m


class Values:
    """Values printed as expressions; a back end's subclass defines the class attributes and the methods that
    raise NotImplementedError here."""

    # Expression templates by operator ("neg" is unary minus): {a} left, {b} right, {c} the `?` condition.
    OPS: dict[str, str] = {}
    # Stack queries by operator: {n} the stack's next-index slot.
    STACK_OPS: dict[str, str] = {}
    VALID = ""  # a header's validity as a boolean: {b} its base slot
    OR, FALSE = "", ""  # boolean or, false

    def __init__(self, o: Code):
        self.o = o

    def rv(self, v: m.Value | None) -> str:
        """An expression for a value read as data or a boolean."""
        raise NotImplementedError

    def read(self, slot: str, ftype: m.FieldType | None) -> str:
        """An expression reading the slot of a field of type `ftype` (None: a validity slot)."""
        raise NotImplementedError

    def stack_element(self, stack: str, index: m.Value | None) -> str:
        """An expression for the base slot of element `index` of a header stack (checked)."""
        raise NotImplementedError

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
            raise self.o.fail(f"expression operator {op} cannot be read as a value")
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
            return [str(self.o.L.base[h]) for h in self.o.L.unions[v.name]]
        assert isinstance(v, m.Expr) and isinstance(v.left, m.UnionStackRef)
        return self.union_stack_members(v.left.name, v.right)

    def union_stack_members(self, stack: str, index: m.Value | None) -> list[str]:
        """Expressions for the base slots of the members of union `index` of a union stack."""
        raise NotImplementedError

    def header_base(self, v: m.Value | None) -> str:
        """An expression for a header's base slot (its validity slot)."""
        if isinstance(v, m.HeaderRef):
            return str(self.o.L.base[v.name])
        if isinstance(v, m.Expr) and v.op == "dereference_header_stack" and isinstance(v.left, m.StackRef):
            return self.stack_element(v.left.name, v.right)
        if isinstance(v, m.Expr) and v.op == "access_union_header" and v.left is not None:
            assert isinstance(v.right, m.Const)
            return self.union_members(v.left)[v.right.value]
        raise self.o.fail(f"{type(v).__name__} does not name a header here")

    def next_slot(self, v: m.Value | None) -> int:
        if isinstance(v, (m.StackRef, m.UnionStackRef)):
            return self.o.L.next_index[v.name]
        raise self.o.fail("a stack operation needs a header stack")

    def field_lv(self, v: m.Value | None) -> tuple[str, m.FieldType | None]:
        """(slot expression, field type) of a writable field."""
        if isinstance(v, m.Field):
            slot, ftype = self.o.L.field_slot(v)
            return str(slot), ftype
        if isinstance(v, m.Expr) and v.op == "access_field" and isinstance(v.right, m.Const):
            t = self.o.L.header_type_of(v.left)
            k = v.right.value
            if not 0 <= k < len(t.fields):
                raise self.o.fail(f"field offset {k} is past header type {t.name}")
            return f"{self.header_base(v.left)} + {self.o.L.offsets[t.name][k]}", t.fields[k]
        raise self.o.fail(f"{type(v).__name__} is not a writable field")

    def target(self, dst: m.Value) -> tuple[str, m.FieldType, int]:
        """(slot expression, type, width) of a fixed-width field a value is written to."""
        slot, ftype = self.field_lv(dst)
        if ftype is None:
            raise self.o.fail("a header's $valid$ field cannot be written")
        if ftype.width is None:
            raise self.o.fail("a variable-length field is written with assign_VL")
        return slot, ftype, ftype.width

    def named(self, v: m.Value, kind: str) -> str:
        """The name of a register/counter/meter array or calculation a primitive takes."""
        if not isinstance(v, m.Named) or v.kind != kind:
            raise self.o.fail(f"expected a {kind}")
        return v.name

    def key_mask(self, k: m.KeyElement) -> tuple[int, int | None]:
        """(slot, mask or None for a validity bit) a table key element reads."""
        if isinstance(k.target, m.HeaderRef):
            return self.o.L.base[k.target.name], None
        slot, ftype = self.o.L.field_slot(k.target)
        if ftype is None:
            return slot, None
        width = ftype.width or 0
        return slot, (1 << width) - 1 if k.mask is None else k.mask & ((1 << width) - 1)
