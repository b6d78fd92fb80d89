"""The Python printer's values: expressions, fields, stacks, register cells and hash inputs as Python (see
p4target/backends/python.py for the printed module's shape)."""
from __future__ import annotations

from p4target.backends import hashes
from p4target.backends.python_module import PyModule
from p4target.backends.python_runtime import _SHIFT_LIMIT
from p4target.backends.values import Values
from p4target.lowered import model as m


class PyValues(Values):
    """Values printed as Python expressions, reading the frame F and the module's namespace."""

    OPS = {"d2b": "({b} != 0)", "b2d": "(1 if {b} else 0)", "not": "(not {b})", "~": "(~{b})", "neg": "(-{b})",
           "?": "({a} if {c} else {b})", "two_comp_mod": "_sx({a}, {b})", "sat_cast": "_sat({a}, {b})",
           "usat_cast": "_usat({a}, {b})", "<<": "_shl({a}, {b})", "/": "_div({a}, {b})", "%": "_mod({a}, {b})",
           **{op: f"({{a}} {op} {{b}})" for op in ("+", "-", "*", ">>", "==", "!=", ">", ">=", "<", "<=", "&", "|",
                                                  "^", "and", "or")}}
    STACK_OPS = {"last_stack_index": "(F[{n}] - 1)", "size_stack": "F[{n}]"}
    VALID, OR, FALSE = "bool(F[{b}])", " or ", "False"

    def __init__(self, o: PyModule):
        super().__init__(o)
        self.o: PyModule = o

    def rv(self, v: m.Value | None) -> str:
        """A Python expression for a value read as data (int) or a boolean."""
        if isinstance(v, m.Field):
            slot, ftype = self.o.L.field_slot(v)
            return self.read(str(slot), ftype)
        if isinstance(v, m.Const):
            return str(v.value)
        if isinstance(v, m.BoolConst):
            return str(v.value)
        if isinstance(v, m.ActionParam):
            return f"a{v.index}"
        if isinstance(v, m.RegisterCell):
            reg = self.o.state.registers.get(v.name)
            if reg is None:
                raise self.o.fail(f"unknown register array {v.name}")
            i = self.rv(v.index)
            return f"({self.o.global_of('_R', reg.values)}[{i}] if {i} < {reg.schema.size} else 0)"
        if isinstance(v, m.StackField):
            b = self.header_base(m.Expr("dereference_header_stack", m.StackRef(v.stack),
                                        m.Expr("last_stack_index", None, m.StackRef(v.stack))))
            k, _ = self.o.L.field_index(self.o.L.stack_type[v.stack], v.field)
            return f"F[{b} + {1 + k}]"
        if isinstance(v, m.Lookahead):
            return f"_bits(data, o, {v.offset}, {v.width}, {self.o.error_code('PacketTooShort')})"
        if isinstance(v, m.Expr):
            if v.op == "b2d" and isinstance(v.right, m.BoolConst):
                return str(int(v.right.value))
            if v.op == "d2b" and isinstance(v.right, m.Field) and v.right.field == "$valid$":
                return f"F[{self.o.L.base[v.right.header]}]"  # the validity slot holds a bool
            if v.op == "<<" and isinstance(v.right, m.Const) and 0 <= v.right.value < _SHIFT_LIMIT:
                return f"({self.rv(v.left)} << {v.right.value})"
            return self.expr(v)
        raise self.o.fail(f"a {type(v).__name__} cannot be read as a value here")

    def read(self, slot: str, ftype: m.FieldType | None) -> str:
        return f"int(F[{slot}])" if ftype is None else f"F[{slot}]"

    def union_stack_members(self, stack: str, index: m.Value | None) -> list[str]:
        u = f"_at({self.o.union_stack_unions(stack)}, {self.rv(index)}, {self.o.text(stack)})"
        # the stack's unions all have the same type: member k's base is found through the first union
        members = self.o.names("_UM", stack, stack)
        self.o.ns.setdefault(members, {
            name: tuple(self.o.L.base[h] for h in self.o.L.unions[name]) for name in self.o.L.union_stacks[stack]})
        return [f"{members}[{u}][{k}]" for k in range(len(self.o.L.union_stack_type[stack].headers))]

    def stack_element(self, stack: str, index: m.Value | None) -> str:
        return f"_at({self.o.stack_bases(stack)}, {self.rv(index)}, {self.o.text(stack)})"

    def unchanged(self, v: m.Value | None, ftype: m.FieldType, width: int) -> bool:
        """Whether writing `v` into a field of `ftype` leaves it as it is (no truncation to print)."""
        if isinstance(v, m.Const) and ftype.signed:
            return -(1 << (width - 1)) <= v.value < 1 << (width - 1)
        return not ftype.signed and self.fits(v, width)

    def fits(self, v: m.Value | None, width: int) -> bool:
        """Whether `v` is an unsigned value of at most `width` bits as it stands (no truncation needed)."""
        if isinstance(v, m.Const):
            return 0 <= v.value < 1 << width
        if isinstance(v, m.RegisterCell):
            return self.o.state.registers[v.name].schema.bitwidth <= width
        if isinstance(v, m.Field) and v.field != "$valid$":
            ftype = self.o.L.field_slot(v)[1]
            return ftype is not None and not ftype.signed and ftype.width is not None and ftype.width <= width
        if isinstance(v, m.ActionParam):  # the store checks every action parameter against its width
            return self.o.param_widths[v.index] <= width
        if isinstance(v, m.Expr) and v.op == "&":
            return self.fits(v.left, width) or self.fits(v.right, width)
        if isinstance(v, m.Expr) and v.op in ("|", "^"):
            return self.fits(v.left, width) and self.fits(v.right, width)
        if isinstance(v, m.Expr) and v.op == "b2d":
            return width >= 1
        return False

    def calc(self, name: str) -> str:
        """A Python expression hashing calculation `name`'s inputs."""
        c = self.o.calcs.get(name)
        if c is None:
            raise self.o.fail(f"unknown calculation {name}")
        fn = f"_h_{c.algo}"
        if c.algo not in hashes.ALGORITHMS:
            raise self.o.fail(f"hash algorithm {c.algo} is not supported")
        return f"{fn}({self.calc_bytes(c.input)})"

    def calc_bytes(self, inputs: list[m.Value]) -> str:
        """The bytes a calculation hashes: inputs MSB first, fields of invalid headers skipped (BMv2). Fixed-width
        fields and constants are packed as one int while their headers are valid (the common case: a
        checksum over a parsed header costs a third of the generic packing)."""
        generic = self.calc_bytes_generic(inputs)
        terms: list[tuple[str, int]] = []
        headers: dict[int, None] = {}
        for v in inputs:
            if isinstance(v, m.Const) and v.width is not None:
                terms.append((str(v.value & ((1 << v.width) - 1)), v.width))
            elif isinstance(v, m.Field) and (ftype := self.o.L.field_slot(v)[1]) is not None and ftype.width:
                value = self.rv(v)
                terms.append((f"({value} & {(1 << ftype.width) - 1:#x})" if ftype.signed else value, ftype.width))
                if not self.o.p.header(v.header).metadata:
                    headers[self.o.L.base[v.header]] = None
            else:
                return generic
        total = sum(w for _, w in terms)
        if not terms:
            return generic
        pad, shifted = -total % 8, []
        pos = total + pad
        for code, w in terms:
            pos -= w
            shifted.append(f"{code} << {pos}" if pos else code)
        packed = f"({' | '.join(shifted)}).to_bytes({(total + pad) // 8}, 'big')"
        if not headers:
            return packed
        return f"({packed} if {' and '.join(f'F[{b}]' for b in headers)} else {generic})"

    def calc_bytes_generic(self, inputs: list[m.Value]) -> str:
        """calc_bytes for any inputs: field by field through _pack."""
        parts: list[str] = []
        for v in inputs:
            if isinstance(v, m.Field):
                slot, ftype = self.o.L.field_slot(v)
                hb = self.o.L.base[v.header]
                if ftype is not None and ftype.width is None:  # a varbit: its current length
                    vlen = f"F[{hb + 1 + len(self.o.L.header_type(v.header).fields)}]"
                    part = f"(F[{slot}], {vlen})"
                else:
                    width = 1 if ftype is None else (ftype.width or 0)
                    part = f"(({self.rv(v)}) & {(1 << width) - 1:#x}, {width})"
                parts.append(part if self.o.p.header(v.header).metadata else f"*(({part},) if F[{hb}] else ())")
            elif isinstance(v, m.Const):
                width = v.width if v.width is not None else max(v.value.bit_length(), 1)
                parts.append(f"({v.value & ((1 << width) - 1)}, {width})")
            elif isinstance(v, m.HeaderRef):
                b = self.o.L.base[v.name]
                t = self.o.L.header_type(v.name)
                inner = ", ".join(f"(F[{b + 1 + k}] & {(1 << f.width) - 1:#x}, {f.width})"
                                  for k, f in enumerate(t.fields) if f.width is not None)
                parts.append(f"*(({inner},) if F[{b}] else ())")
            elif isinstance(v, m.Payload):
                return f"_pack(({', '.join(parts)})) + F[{self.o.L.hidden['payload']}]" if parts else \
                    f"F[{self.o.L.hidden['payload']}]"
            else:
                raise self.o.fail(f"a calculation cannot take a {type(v).__name__}")
        return f"_pack(({''.join(p + ', ' for p in parts)}))"
