"""The Python printer's base: its state, values and primitives printed as Python (see
p4target/backends/python.py for the printed module's shape)."""
from __future__ import annotations

import random
import time
from typing import Any

from p4target import state as st
from p4target.backends import hashes
from p4target.backends.printer import LoweredPrinter
from p4target.backends.python_runtime import (
    _SHIFT_LIMIT,
    _at,
    _bits,
    _copy_header,
    _div,
    _log_format,
    _mod,
    _Reject,
    _sat,
    _shl,
    _sx,
    _usat,
)
from p4target.backends.vectorize import Vectorizer
from p4target.errors import PacketError
from p4target.externs.base import Extern
from p4target.lowered import model as m

_BOOL_OPS = frozenset({"==", "!=", ">", ">=", "<", "<=", "and", "or", "not", "d2b", "valid", "valid_union"})


class PyValues(LoweredPrinter):
    """The Python printer's state (bound to one State: tables, registers, ...), values and primitives. PyParsing and
    the printer (p4target.backends.python) build on it."""

    OPS = {"d2b": "({b} != 0)", "b2d": "(1 if {b} else 0)", "not": "(not {b})", "~": "(~{b})", "neg": "(-{b})",
           "?": "({a} if {c} else {b})", "two_comp_mod": "_sx({a}, {b})", "sat_cast": "_sat({a}, {b})",
           "usat_cast": "_usat({a}, {b})", "<<": "_shl({a}, {b})", "/": "_div({a}, {b})", "%": "_mod({a}, {b})",
           **{op: f"({{a}} {op} {{b}})" for op in ("+", "-", "*", ">>", "==", "!=", ">", ">=", "<", "<=", "&", "|",
                                                  "^", "and", "or")}}
    STACK_OPS = {"last_stack_index": "(F[{n}] - 1)", "size_stack": "F[{n}]"}
    VALID, OR, FALSE = "bool(F[{b}])", " or ", "False"
    NOT_SET, NO_FIELD_LIST, CLONE = "None", "0", {"I2E": "'I2E'", "E2E": "'E2E'"}

    def __init__(self, p: m.Program, state: st.State, rng: random.Random, vectorize: bool):
        super().__init__(p)
        self.state = state
        self.labels: dict[str, str] = {}  # parse state -> its function
        self.globals: dict[int, str] = {}  # id(object) -> its name in the printed module
        self.codecs: list[str] = []  # per header type: its extract and emit functions
        self.codecs_printed: set[str] = set()
        self.next_maps: dict[str, tuple[dict[str, str | None], str | None]] = {}  # per table: action -> next node
        self.ns: dict[str, Any] = {
            "_Reject": _Reject, "_PacketError": PacketError, "_sx": _sx, "_sat": _sat, "_usat": _usat,
            "_shl": _shl, "_div": _div, "_mod": _mod, "_at": _at, "_bits": _bits,
            "_copy": _copy_header, "_logf": _log_format, "_rng": rng, "_S": state,
            "_DG": state.digests, "_LOG": state.log, "_now": time.monotonic, "_pack": hashes.pack_fields,
        }
        for name, fn in hashes.ALGORITHMS.items():
            self.ns["_h_" + name] = fn
        self.vectorizer = Vectorizer(self) if vectorize else None
        self.param_widths: list[int] = []  # of the action being printed
        self.dead: set[int] = set()  # its primitives left out (_Printer.dead_stores)
        self.conditionals: dict[str, m.Conditional] = {}  # of the pipeline being printed
        self.node_fns: dict[str, str] = {}  # table or conditional -> its printed function
        # what tells that an action ran `exit` (nothing to test when no action can)
        self.exited = f"F[{self.L.hidden['exit']}]" if any(prim.op == "exit" for a in p.actions
                                                           for prim in a.primitives) else ""
        for hname, t in self.L.types.items():
            self.ns[self.field_specs(hname)] = tuple((f.width, f.signed) for f in t.fields)
        for s, headers in self.L.stacks.items():
            self.ns[self.stack_bases(s)] = tuple(self.L.base[h] for h in headers) + (self.L.scratch[s],)
        for s, names in self.L.union_stacks.items():
            self.ns[self.union_stack_unions(s)] = (*names, "")

    # -- the printer's names for the program's objects, strings and arrays

    def text(self, s: str) -> str:
        """The printed module's name for string `s` (a name, a log format, a source location): bound in its namespace,
        never a literal in the printed code (p4target.backends.source_text)."""
        return self.global_of("_S", s)

    def field_specs(self, header_type: str) -> str:
        """The printed module's tuple of a header type's (width, signed) per field."""
        return self.names("_FS", header_type, header_type)

    def stack_bases(self, stack: str) -> str:
        """The printed module's tuple of a header stack's base slots, then its scratch header's."""
        return self.names("_STK", stack, stack)

    def union_stack_unions(self, stack: str) -> str:
        """The printed module's tuple of a union stack's union names, then ""."""
        return self.names("_UST", stack, stack)

    # -- values

    def rv(self, v: m.Value | None) -> str:
        """A Python expression for a value read as data (int) or a boolean."""
        if isinstance(v, m.Field):
            slot, ftype = self.L.field_slot(v)
            return self.read(str(slot), ftype)
        if isinstance(v, m.Const):
            return str(v.value)
        if isinstance(v, m.BoolConst):
            return str(v.value)
        if isinstance(v, m.ActionParam):
            return f"a{v.index}"
        if isinstance(v, m.RegisterCell):
            reg = self.state.registers.get(v.name)
            if reg is None:
                raise self.fail(f"unknown register array {v.name}")
            i = self.rv(v.index)
            return f"({self.global_of('_R', reg.values)}[{i}] if {i} < {reg.schema.size} else 0)"
        if isinstance(v, m.StackField):
            b = self.header_base(m.Expr("dereference_header_stack", m.StackRef(v.stack),
                                        m.Expr("last_stack_index", None, m.StackRef(v.stack))))
            k, _ = self.L.field_index(self.L.stack_type[v.stack], v.field)
            return f"F[{b} + {1 + k}]"
        if isinstance(v, m.Lookahead):
            return f"_bits(data, o, {v.offset}, {v.width}, {self.error_code('PacketTooShort')})"
        if isinstance(v, m.Expr):
            if v.op == "b2d" and isinstance(v.right, m.BoolConst):
                return str(int(v.right.value))
            if v.op == "d2b" and isinstance(v.right, m.Field) and v.right.field == "$valid$":
                return f"F[{self.L.base[v.right.header]}]"  # the validity slot holds a bool
            if v.op == "<<" and isinstance(v.right, m.Const) and 0 <= v.right.value < _SHIFT_LIMIT:
                return f"({self.rv(v.left)} << {v.right.value})"
            return self.expr(v)
        raise self.fail(f"a {type(v).__name__} cannot be read as a value here")

    def read(self, slot: str, ftype: m.FieldType | None) -> str:
        return f"int(F[{slot}])" if ftype is None else f"F[{slot}]"

    def union_stack_members(self, stack: str, index: m.Value | None) -> list[str]:
        u = f"_at({self.union_stack_unions(stack)}, {self.rv(index)}, {self.text(stack)})"
        # the stack's unions all have the same type: member k's base is found through the first union
        members = self.names("_UM", stack, stack)
        self.ns.setdefault(members, {
            name: tuple(self.L.base[h] for h in self.L.unions[name]) for name in self.L.union_stacks[stack]})
        return [f"{members}[{u}][{k}]" for k in range(len(self.L.union_stack_type[stack].headers))]

    def stack_element(self, stack: str, index: m.Value | None) -> str:
        return f"_at({self.stack_bases(stack)}, {self.rv(index)}, {self.text(stack)})"

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        slot, ftype, width = self.target(dst)
        if ftype.signed:
            self.emit(f"F[{slot}] = _sx({code}, {width})", ind)
        else:
            self.emit(f"F[{slot}] = ({code}) & {(1 << width) - 1:#x}", ind)

    def global_of(self, prefix: str, obj: object) -> str:
        """`obj` (a register's cells, a counter's) as a global of the printed module: no lookup by name per packet."""
        name = self.globals.get(id(obj))
        if name is None:
            name = self.globals[id(obj)] = f"{prefix}{len(self.globals)}"
            self.ns[name] = obj
        return name

    # -- primitives

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
            return self.state.registers[v.name].schema.bitwidth <= width
        if isinstance(v, m.Field) and v.field != "$valid$":
            ftype = self.L.field_slot(v)[1]
            return ftype is not None and not ftype.signed and ftype.width is not None and ftype.width <= width
        if isinstance(v, m.ActionParam):  # the store checks every action parameter against its width
            return self.param_widths[v.index] <= width
        if isinstance(v, m.Expr) and v.op == "&":
            return self.fits(v.left, width) or self.fits(v.right, width)
        if isinstance(v, m.Expr) and v.op in ("|", "^"):
            return self.fits(v.left, width) and self.fits(v.right, width)
        if isinstance(v, m.Expr) and v.op == "b2d":
            return width >= 1
        return False

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        if isinstance(ps[1], m.BoolConst) and not self.target(ps[0])[1].signed:
            self.emit(f"F[{self.target(ps[0])[0]}] = {int(ps[1].value)}", ind)
        elif isinstance(ps[1], m.Expr) and ps[1].op in _BOOL_OPS:
            self.store(ps[0], f"(1 if {self.rv(ps[1])} else 0)", ind)
        elif isinstance(ps[0], m.Field) and self.unchanged(ps[1], *self.target(ps[0])[1:]):
            self.emit(f"F[{self.target(ps[0])[0]}] = {self.rv(ps[1])}", ind)
        else:
            self.store(ps[0], self.rv(ps[1]), ind)

    p_modify_field = p_assign

    def extern_primitive(self, ext: Extern, op: str, ps: list[m.Value], ind: int) -> None:
        ext.python(self, op, ps, ind)

    def bind(self, code: str, ind: int) -> str:
        return code

    def log(self, msg: str, values: list[str], ind: int) -> None:
        self.emit(f"_LOG.append(_logf({self.text(msg)}, ({''.join(v + ', ' for v in values)})))", ind)

    def copy(self, dst: str, src: str, n: int, ind: int) -> None:
        self.emit(f"_copy(F, {dst}, {src}, {n})", ind)

    def invalidate_if_valid(self, base: str, others: list[int], ind: int) -> None:
        self.emit(f"if F[{base}]: " + "; ".join(f"F[{o}] = False" for o in others), ind)

    def add_header(self, base: str, n: int, ind: int) -> str:
        self.emit(f"_b = {base}", ind)
        self.emit(f"if not F[_b]: F[_b:_b + {n}] = [True] + [0] * {n - 1}", ind)
        return "_b"

    def _stack_shift(self, ps: list[m.Value], ind: int, push: bool) -> None:
        stack, count = ps
        assert isinstance(stack, m.StackRef)
        headers = self.L.stacks[stack.name]
        size = self.L.size[headers[0]]
        bases = [self.L.base[h] for h in headers]
        n = self.rv(count)
        t = self.tmp()
        self.emit(f"{t} = {n}", ind)
        nxt = self.L.next_index[stack.name]
        arr = self.stack_bases(stack.name)
        if push:
            self.emit(f"for _i in range({len(bases) - 1}, -1, -1):", ind)
            self.emit(f"if _i >= {t}: _copy(F, {arr}[_i], {arr}[_i - {t}], {size})", ind + 1)
            self.emit(f"else: F[{arr}[_i]] = False", ind + 1)
            self.emit(f"F[{nxt}] = min(F[{nxt}] + {t}, {len(bases)})", ind)
        else:
            self.emit(f"for _i in range({len(bases)}):", ind)
            self.emit(f"if _i + {t} < {len(bases)}: _copy(F, {arr}[_i], {arr}[_i + {t}], {size})", ind + 1)
            self.emit(f"else: F[{arr}[_i]] = False", ind + 1)
            self.emit(f"F[{nxt}] = max(F[{nxt}] - {t}, 0)", ind)

    def p_push(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=True)

    def p_pop(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=False)

    def p_exit(self, ps: list[m.Value], ind: int) -> None:
        self.emit(f"F[{self.L.hidden['exit']}] = True; return", ind)

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        self.emit(f"if not {cond}: raise _PacketError({self.text(what + ' failed' + self.where())})", ind)

    def meter_amount(self, kind: str) -> str:
        return "1" if kind == "packets" else f"F[{self.L.sm['packet_length']}]"

    def calc(self, name: str) -> str:
        """A Python expression hashing calculation `name`'s inputs."""
        c = self.calcs.get(name)
        if c is None:
            raise self.fail(f"unknown calculation {name}")
        fn = f"_h_{c.algo}"
        if c.algo not in hashes.ALGORITHMS:
            raise self.fail(f"hash algorithm {c.algo} is not supported")
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
            elif isinstance(v, m.Field) and (ftype := self.L.field_slot(v)[1]) is not None and ftype.width:
                value = self.rv(v)
                terms.append((f"({value} & {(1 << ftype.width) - 1:#x})" if ftype.signed else value, ftype.width))
                if not self.p.header(v.header).metadata:
                    headers[self.L.base[v.header]] = None
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
                slot, ftype = self.L.field_slot(v)
                hb = self.L.base[v.header]
                if ftype is not None and ftype.width is None:  # a varbit: its current length
                    vlen = f"F[{hb + 1 + len(self.L.header_type(v.header).fields)}]"
                    part = f"(F[{slot}], {vlen})"
                else:
                    width = 1 if ftype is None else (ftype.width or 0)
                    part = f"(({self.rv(v)}) & {(1 << width) - 1:#x}, {width})"
                parts.append(part if self.p.header(v.header).metadata else f"*(({part},) if F[{hb}] else ())")
            elif isinstance(v, m.Const):
                width = v.width if v.width is not None else max(v.value.bit_length(), 1)
                parts.append(f"({v.value & ((1 << width) - 1)}, {width})")
            elif isinstance(v, m.HeaderRef):
                b = self.L.base[v.name]
                t = self.L.header_type(v.name)
                inner = ", ".join(f"(F[{b + 1 + k}] & {(1 << f.width) - 1:#x}, {f.width})"
                                  for k, f in enumerate(t.fields) if f.width is not None)
                parts.append(f"*(({inner},) if F[{b}] else ())")
            elif isinstance(v, m.Payload):
                return f"_pack(({', '.join(parts)})) + F[{self.L.hidden['payload']}]" if parts else \
                    f"F[{self.L.hidden['payload']}]"
            else:
                raise self.fail(f"a calculation cannot take a {type(v).__name__}")
        return f"_pack(({''.join(p + ', ' for p in parts)}))"

    def set_slots(self, assignments: list[tuple[int | str, str]], ind: int) -> None:
        self.emit("; ".join(f"F[{slot}] = {value}" for slot, value in assignments), ind)
