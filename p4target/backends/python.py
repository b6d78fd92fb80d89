"""The lowered form printed as Python: the readable reference engine for p4c's BMv2 JSON.

Every packet is one list `F` of slots: per header instance a validity slot, then its fields
in order, then (for a header with a variable-length field) that field's length in bits; then
per header stack its next index; then the per-packet bookkeeping slots the v1model flow
needs (`HIDDEN`). Values are Python ints of unbounded precision, as BMv2's are: a value is
truncated to a field's width when it is written into the field.

The printed module has the functions `p4target.pipeline.Pipeline` calls: parse(F, data),
verify(F), ingress(F), egress(F), compute(F) and deparse(F). A control is its graph of
tables and conditionals, one function per node returning the next node (None at the end).
"""
from __future__ import annotations

import collections
import functools
import random
import time
from typing import Any

from p4target import state as st
from p4target.errors import P4Error
from p4target.interp import hashes
from p4target.interp.codegen import Compiled, PacketError, _log_format, _Reject
from p4target.lowered import model as m

HIDDEN = ("clone_session", "clone_type", "clone_fl", "resubmit", "recirculate", "truncate", "payload", "exit")
MAX_PARSER_STATES = 1000
DROP_PORT = 511
_SHIFT_LIMIT = 4096  # BMv2 fields are at most this wide; a longer shift leaves nothing of them


class Unsupported(P4Error):
    """A construct of the lowered form this engine does not run."""


# -- helpers the printed code calls ------------------------------------------------------------

def _sx(value: int, width: int) -> int:
    """Truncate to a signed `width`-bit value (two's complement)."""
    value &= (1 << width) - 1
    return value - (1 << width) if width and value >> (width - 1) else value


def _sat(value: int, width: int) -> int:
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return max(lo, min(hi, value))


def _usat(value: int, width: int) -> int:
    return max(0, min((1 << width) - 1, value))


def _shl(value: int, amount: int) -> int:
    return value << amount if amount < _SHIFT_LIMIT else 0


def _div(a: int, b: int) -> int:
    if b == 0:
        raise PacketError("division by zero")
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise PacketError("modulo by zero")
    return a % b


def _at(items: tuple, index: int, what: str) -> Any:
    """Element `index` of a stack; out of range (P4: an undefined value), the stack's scratch header,
    which reads as invalid zeros and takes writes that nothing reads back meaningfully."""
    if not 0 <= index < len(items) - 1:
        if isinstance(items[-1], str):  # union stacks have no scratch element
            raise PacketError(f"index {index} out of range for {what}")
        return items[-1]
    return items[index]


def _bits(data: bytes, o: int, offset: int, width: int, too_short: int) -> int:
    """`width` bits of `data` starting `offset` bits past byte `o` (a parser lookahead)."""
    start, end = o * 8 + offset, o * 8 + offset + width
    nbytes = (end + 7) // 8
    if nbytes > len(data):
        raise _Reject(too_short, o)
    chunk = int.from_bytes(data[start // 8:nbytes], "big")
    return (chunk >> (nbytes * 8 - end)) & ((1 << width) - 1)


FieldSpec = tuple[tuple[int | None, bool], ...]  # per field: (width or None for varbit, signed)


def _extract(fields: FieldSpec, F: list, b: int, data: bytes, o: int, vl: int, too_short: int) -> int:
    """Fill header `b`'s fields from `data` at byte `o`; the new offset. `vl`: varbit bits."""
    total = sum(w if w is not None else vl for w, _ in fields)
    end = o + total // 8
    if end > len(data):
        raise _Reject(too_short, o)
    value = int.from_bytes(data[o:end], "big")
    pos = total
    for k, (w, signed) in enumerate(fields):
        width = w if w is not None else vl
        pos -= width
        v = (value >> pos) & ((1 << width) - 1)
        F[b + 1 + k] = _sx(v, width) if signed else v
    if any(w is None for w, _ in fields):
        F[b + 1 + len(fields)] = vl
    F[b] = True
    return end


def _packed(fields: FieldSpec, F: list, b: int) -> bytes:
    """Header `b`'s fields as wire bytes."""
    value = total = 0
    for k, (w, _) in enumerate(fields):
        width = w if w is not None else F[b + 1 + len(fields)]
        value = (value << width) | (F[b + 1 + k] & ((1 << width) - 1))
        total += width
    pad = -total % 8
    return (value << pad).to_bytes((total + pad) // 8, "big")


def _constant(value: Any) -> Any:
    return value


def _copy_header(F: list, dst: int, src: int, n: int) -> None:
    F[dst:dst + n] = F[src:src + n]


# -- the printer ------------------------------------------------------------------------------

class _Layout:
    """Slots of every header instance, stack and bookkeeping value (see the module docstring)."""

    def __init__(self, p: m.Program):
        self.p = p
        self.types = {t.name: t for t in p.header_types}
        self.base: dict[str, int] = {}
        self.size: dict[str, int] = {}  # slots a header takes
        self.initial: list = []
        ordered = ([h for h in p.headers if not h.metadata] + [h for h in p.headers if h.name == "standard_metadata"]
                   + [h for h in p.headers if h.metadata and h.name != "standard_metadata"])
        self.meta_range = (0, 0)
        for h in ordered:
            if h.metadata and h.name != "standard_metadata" and self.meta_range == (0, 0):
                self.meta_range = (len(self.initial), 0)
            t = self.types[h.header_type]
            self.base[h.name] = len(self.initial)
            varbit = any(f.width is None for f in t.fields)
            self.size[h.name] = 1 + len(t.fields) + int(varbit)
            self.initial += [h.metadata] + [0] * (len(t.fields) + int(varbit))
        self.meta_range = (self.meta_range[0] or len(self.initial), len(self.initial))
        by_id = {h.id: h.name for h in p.headers}
        self.stacks = {s.name: [by_id[i] for i in s.header_ids] for s in p.header_stacks}
        self.stack_type = {s.name: s.header_type for s in p.header_stacks}
        self.next_index = {}
        self.scratch: dict[str, int] = {}  # per stack: a header taking out-of-range accesses
        for s in p.header_stacks:
            self.next_index[s.name] = len(self.initial)
            self.initial.append(0)
            t = self.types[s.header_type]
            self.scratch[s.name] = len(self.initial)
            self.initial += [False] + [0] * (len(t.fields) + int(any(f.width is None for f in t.fields)))
        union_types = {u.name: u for u in p.header_union_types}
        self.unions = {u.name: [by_id[i] for i in u.header_ids] for u in p.header_unions}
        self.union_type = {u.name: union_types[u.union_type] for u in p.header_unions}
        union_by_id = {u.id: u.name for u in p.header_unions}
        self.union_stacks = {us.name: [union_by_id[i] for i in us.header_union_ids] for us in p.header_union_stacks}
        self.union_stack_type = {us.name: union_types[us.union_type] for us in p.header_union_stacks}
        for us in p.header_union_stacks:
            self.next_index[us.name] = len(self.initial)
            self.initial.append(0)
        self.member_of = {h: u for u, hs in self.unions.items() for h in hs}
        self.hidden = {}
        for name in HIDDEN:
            self.hidden[name] = len(self.initial)
            self.initial.append(None if name != "payload" else b"")
        sm = self.base.get("standard_metadata")
        if sm is None:
            raise P4Error("the program has no standard_metadata header (not a v1model program?)", p.source)
        self.sm = {f.name: sm + 1 + k for k, f in enumerate(self.types["standard_metadata"].fields)}

    def header_type(self, name: str) -> m.HeaderType:
        return self.types[self.p.header(name).header_type]

    def field_slot(self, f: m.Field) -> tuple[int, m.FieldType | None]:
        """(slot, type) of a field; type None for `$valid$` (the validity slot)."""
        b = self.base[f.header]
        if f.field == "$valid$":
            return b, None
        t = self.header_type(f.header)
        k = next(i for i, x in enumerate(t.fields) if x.name == f.field)
        return b + 1 + k, t.fields[k]


class _Printer:
    """Lowered Program -> Python source bound to one State (tables, registers, ...)."""

    def __init__(self, p: m.Program, state: st.State, rng: random.Random):
        if len(p.parsers) != 1 or len(p.deparsers) != 1:
            raise Unsupported("a v1model program has one parser and one deparser", p.source)
        self.p = p
        self.state = state
        self.L = _Layout(p)
        self.errors = dict(p.errors)
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_Reject": _Reject, "_PacketError": PacketError, "_sx": _sx, "_sat": _sat, "_usat": _usat,
            "_shl": _shl, "_div": _div, "_mod": _mod, "_at": _at, "_bits": _bits, "_extract": _extract,
            "_packed": _packed, "_copy": _copy_header, "_logf": _log_format, "_rng": rng, "_S": state,
            "_DG": state.digests, "_LOG": state.log, "_now": time.monotonic, "_pack": hashes.pack_fields,
        }
        for name, fn in hashes.ALGORITHMS.items():
            self.ns["_h_" + name] = fn
        self.actions = {a.id: a for a in p.actions}
        self.action_by_name = {a.name: a for a in p.actions}
        self.field_lists = {fl.id: fl for fl in p.field_lists}
        self.learn_lists = {ll.id: ll for ll in p.learn_lists}
        self.calcs = {c.name: c for c in p.calculations}
        self._tmp = 0
        self._bound: dict[int, str] = {}
        self.printed: set[str] = set()
        self.header_lines: list[str] = []  # per header type extract/emit functions
        self.next_maps: dict[str, tuple[dict[str, str | None], str | None]] = {}
        for hname, t in self.L.types.items():
            self.ns[f"_FS_{_ident(hname)}"] = tuple((f.width, f.signed) for f in t.fields)
        for s, headers in self.L.stacks.items():
            self.ns[f"_STK_{_ident(s)}"] = tuple(self.L.base[h] for h in headers) + (self.L.scratch[s],)
        for s, names in {**self.L.unions, **self.L.union_stacks}.items():
            self.ns[f"_STK_{_ident(s)}"] = tuple(self.L.base.get(h, h) for h in names) + ("",)

    def fail(self, message: str) -> Unsupported:
        return Unsupported(message, self.p.source)

    def emit(self, line: str, ind: int) -> None:
        self.lines.append("    " * ind + line)

    def bind(self, prefix: str, obj: object) -> str:
        """`obj` as a global of the printed module (once per object): no lookups by name per packet."""
        name = self._bound.get(id(obj))
        if name is None:
            name = self._bound[id(obj)] = f"{prefix}{len(self._bound)}"
            self.ns[name] = obj
        return name

    def tmp(self) -> str:
        self._tmp += 1
        return f"_t{self._tmp}"

    def error_code(self, name: str) -> int:
        return self.errors.get(name, 0)

    # -- values

    def rv(self, v: m.Value | None) -> str:
        """A Python expression for a value read as data (int) or a boolean."""
        if isinstance(v, m.Field):
            slot, ftype = self.L.field_slot(v)
            return f"int(F[{slot}])" if ftype is None else f"F[{slot}]"
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
            return f"({self.bind('_R', reg.values)}[{i}] if {i} < {reg.schema.size} else 0)"
        if isinstance(v, m.StackField):
            b = self.header_base(m.Expr("dereference_header_stack", m.StackRef(v.stack),
                                        m.Expr("last_stack_index", None, m.StackRef(v.stack))))
            k, _ = self.field_index(self.L.stack_type[v.stack], v.field)
            return f"F[{b} + {1 + k}]"
        if isinstance(v, m.Lookahead):
            return f"_bits(data, o, {v.offset}, {v.width}, {self.error_code('PacketTooShort')})"
        if isinstance(v, m.Expr):
            return self.expr(v)
        raise self.fail(f"a {type(v).__name__} cannot be read as a value here")

    def expr(self, e: m.Expr) -> str:
        op, a, b = e.op, e.left, e.right
        if op == "access_field":
            return self.field_lv(e)[0]
        if op in ("valid", "valid_union"):
            return self.valid(b)
        if op == "d2b":
            return f"({self.rv(b)} != 0)"
        if op == "b2d":
            return f"int({self.rv(b)})"
        if op == "not":
            return f"(not {self.rv(b)})"
        if op == "~":
            return f"(~{self.rv(b)})"
        if op == "-" and a is None:
            return f"(-{self.rv(b)})"
        if op == "last_stack_index":
            return f"(F[{self.next_slot(b)}] - 1)"
        if op == "size_stack":
            return f"F[{self.next_slot(b)}]"
        if op == "?":
            return f"({self.rv(a)} if {self.rv(e.cond)} else {self.rv(b)})"
        if op == "two_comp_mod":
            return f"_sx({self.rv(a)}, {self.rv(b)})"
        if op in ("sat_cast", "usat_cast"):
            return f"_{op[:-5]}({self.rv(a)}, {self.rv(b)})"
        if op == "<<":
            return f"_shl({self.rv(a)}, {self.rv(b)})"
        if op in ("/", "%"):
            return f"{'_div' if op == '/' else '_mod'}({self.rv(a)}, {self.rv(b)})"
        if op in ("and", "or"):
            return f"({self.rv(a)} {op} {self.rv(b)})"
        if op in ("+", "-", "*", ">>", "==", "!=", ">", ">=", "<", "<=", "&", "|", "^"):
            return f"({self.rv(a)} {op} {self.rv(b)})"
        raise self.fail(f"expression operator {op} cannot be read as a value")

    def valid(self, v: m.Value | None) -> str:
        if isinstance(v, m.UnionRef) or (isinstance(v, m.Expr) and v.op == "dereference_union_stack"):
            members = self.union_members(v)
            return "(" + " or ".join(f"F[{x}]" for x in members) + ")" if members else "False"
        return f"bool(F[{self.header_base(v)}])"

    def union_members(self, v: m.Value) -> list[str]:
        if isinstance(v, m.UnionRef):
            return [str(self.L.base[h]) for h in self.L.unions[v.name]]
        assert isinstance(v, m.Expr) and isinstance(v.left, m.UnionStackRef)
        u = f"_at(_STK_{_ident(v.left.name)}, {self.rv(v.right)}, {v.left.name!r})"
        ut = self.L.union_stack_type[v.left.name]
        # the stack's unions all have the same type: member k's base is found through the first union
        first = self.L.union_stacks[v.left.name]
        self.ns.setdefault(f"_UM_{_ident(v.left.name)}", {
            name: tuple(self.L.base[h] for h in self.L.unions[name]) for name in first})
        return [f"_UM_{_ident(v.left.name)}[{u}][{k}]" for k in range(len(ut.headers))]

    def next_slot(self, v: m.Value | None) -> int:
        if isinstance(v, (m.StackRef, m.UnionStackRef)):
            return self.L.next_index[v.name]
        raise self.fail("a stack operation needs a header stack")

    def header_base(self, v: m.Value | None) -> str:
        """A Python expression for a header's base slot (its validity slot)."""
        if isinstance(v, m.HeaderRef):
            return str(self.L.base[v.name])
        if isinstance(v, m.Expr) and v.op == "dereference_header_stack" and isinstance(v.left, m.StackRef):
            return f"_at(_STK_{_ident(v.left.name)}, {self.rv(v.right)}, {v.left.name!r})"
        if isinstance(v, m.Expr) and v.op == "access_union_header" and v.left is not None:
            assert isinstance(v.right, m.Const)
            return self.union_members(v.left)[v.right.value]
        raise self.fail(f"{type(v).__name__} does not name a header here")

    def header_type_of(self, v: m.Value | None) -> m.HeaderType:
        if isinstance(v, m.HeaderRef):
            return self.L.header_type(v.name)
        if isinstance(v, m.Expr) and v.op == "dereference_header_stack" and isinstance(v.left, m.StackRef):
            return self.L.types[self.L.stack_type[v.left.name]]
        if isinstance(v, m.Expr) and v.op == "access_union_header" and isinstance(v.right, m.Const):
            ut = (self.L.union_type[v.left.name] if isinstance(v.left, m.UnionRef)
                  else self.L.union_stack_type[v.left.left.name])  # type: ignore[union-attr]
            return self.L.types[ut.headers[v.right.value][1]]
        raise self.fail(f"{type(v).__name__} does not name a header here")

    def field_index(self, type_name: str, field: str) -> tuple[int, m.FieldType]:
        t = self.L.types[type_name]
        k = next((i for i, f in enumerate(t.fields) if f.name == field), None)
        if k is None:
            raise self.fail(f"header type {type_name} has no field {field}")
        return k, t.fields[k]

    def field_lv(self, v: m.Value | None) -> tuple[str, m.FieldType | None]:
        """(`F[...]` expression, field type) of a writable field."""
        if isinstance(v, m.Field):
            slot, ftype = self.L.field_slot(v)
            return f"F[{slot}]", ftype
        if isinstance(v, m.Expr) and v.op == "access_field" and isinstance(v.right, m.Const):
            t = self.header_type_of(v.left)
            k = v.right.value
            if not 0 <= k < len(t.fields):
                raise self.fail(f"field offset {k} is past header type {t.name}")
            return f"F[{self.header_base(v.left)} + {1 + k}]", t.fields[k]
        raise self.fail(f"{type(v).__name__} is not a writable field")

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        target, ftype = self.field_lv(dst)
        if ftype is None:
            raise self.fail("a header's $valid$ field cannot be written")
        if ftype.width is None:
            raise self.fail("a variable-length field is written with assign_VL")
        if ftype.signed:
            self.emit(f"{target} = _sx({code}, {ftype.width})", ind)
        else:
            self.emit(f"{target} = ({code}) & {(1 << ftype.width) - 1:#x}", ind)

    # -- primitives

    def primitive(self, prim: m.Primitive, ind: int) -> None:
        fn = getattr(self, "p_" + prim.op, None)
        if fn is None:
            raise self.fail(f"primitive {prim.op} is not supported")
        fn(prim.parameters, ind)

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        if isinstance(ps[1], m.BoolConst) or (isinstance(ps[1], m.Expr) and ps[1].op in _BOOL_OPS):
            self.store(ps[0], f"int({self.rv(ps[1])})", ind)
        else:
            self.store(ps[0], self.rv(ps[1]), ind)

    p_modify_field = p_assign

    def p_assign_VL(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        assert isinstance(dst, m.Field) and isinstance(src, m.Field)
        db, sb = self.L.base[dst.header], self.L.base[src.header]
        dn, sn = len(self.L.header_type(dst.header).fields), len(self.L.header_type(src.header).fields)
        self.emit(f"{self.field_lv(dst)[0]} = {self.rv(src)}; F[{db + 1 + dn}] = F[{sb + 1 + sn}]", ind)

    def p_assign_header(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        n = 1 + len(self.header_type_of(src).fields) + int(self.header_type_of(src).max_length is not None)
        d = self.header_base(dst)
        self.emit(f"_copy(F, {d}, {self.header_base(src)}, {n})", ind)
        self.after_valid_change(dst, d, ind)

    def p_assign_union(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        ut = self.L.union_type[dst.name] if isinstance(dst, m.UnionRef) else None
        if ut is None:
            raise self.fail("assign_union needs header unions")
        for k, (_, tname) in enumerate(ut.headers):
            size = 1 + len(self.L.types[tname].fields) + int(self.L.types[tname].max_length is not None)
            self.emit(f"_copy(F, {self.union_members(dst)[k]}, {self.union_members(src)[k]}, {size})", ind)

    def p_assign_header_stack(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        assert isinstance(dst, m.StackRef) and isinstance(src, m.StackRef)
        size = self.L.size[self.L.stacks[dst.name][0]]
        for d, s in zip(self.L.stacks[dst.name], self.L.stacks[src.name]):
            self.emit(f"_copy(F, {self.L.base[d]}, {self.L.base[s]}, {size})", ind)
        self.emit(f"F[{self.L.next_index[dst.name]}] = F[{self.L.next_index[src.name]}]", ind)

    def after_valid_change(self, dst: m.Value, base: str, ind: int) -> None:
        """A union member made valid invalidates the union's other members, as BMv2 does."""
        if isinstance(dst, m.HeaderRef) and dst.name in self.L.member_of:
            others = [self.L.base[h] for h in self.L.unions[self.L.member_of[dst.name]] if h != dst.name]
            if others:
                self.emit(f"if F[{base}]: " + "; ".join(f"F[{o}] = False" for o in others), ind)

    def p_add_header(self, ps: list[m.Value], ind: int) -> None:
        b = self.header_base(ps[0])
        t = self.header_type_of(ps[0])
        n = len(t.fields) + int(t.max_length is not None)
        self.emit(f"_b = {b}", ind)
        self.emit(f"if not F[_b]: F[_b:_b + {n + 1}] = [True] + [0] * {n}", ind)
        self.after_valid_change(ps[0], b, ind)

    def p_remove_header(self, ps: list[m.Value], ind: int) -> None:
        self.emit(f"F[{self.header_base(ps[0])}] = False", ind)

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
        if push:
            self.emit(f"for _i in range({len(bases) - 1}, -1, -1):", ind)
            self.emit(f"if _i >= {t}: _copy(F, _STK_{_ident(stack.name)}[_i], _STK_{_ident(stack.name)}[_i - {t}], {size})",
                      ind + 1)
            self.emit(f"else: F[_STK_{_ident(stack.name)}[_i]] = False", ind + 1)
            self.emit(f"F[{nxt}] = min(F[{nxt}] + {t}, {len(bases)})", ind)
        else:
            self.emit(f"for _i in range({len(bases)}):", ind)
            self.emit(f"if _i + {t} < {len(bases)}: _copy(F, _STK_{_ident(stack.name)}[_i], "
                      f"_STK_{_ident(stack.name)}[_i + {t}], {size})", ind + 1)
            self.emit(f"else: F[_STK_{_ident(stack.name)}[_i]] = False", ind + 1)
            self.emit(f"F[{nxt}] = max(F[{nxt}] - {t}, 0)", ind)

    def p_push(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=True)

    def p_pop(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=False)

    def p_exit(self, ps: list[m.Value], ind: int) -> None:
        self.emit(f"F[{self.L.hidden['exit']}] = True; return", ind)

    def p_mark_to_drop(self, ps: list[m.Value], ind: int) -> None:
        b = self.L.base[ps[0].name] if isinstance(ps[0], m.HeaderRef) else self.L.base["standard_metadata"]
        sm = self.L.types["standard_metadata"]
        k = {f.name: i for i, f in enumerate(sm.fields)}
        self.emit(f"F[{b + 1 + k['egress_spec']}] = {DROP_PORT}; F[{b + 1 + k['mcast_grp']}] = 0", ind)

    def p_drop(self, ps: list[m.Value], ind: int) -> None:
        self.p_mark_to_drop([m.HeaderRef("standard_metadata")], ind)

    def _check(self, ps: list[m.Value], ind: int, what: str) -> None:
        self.emit(f"if not {self.rv(ps[0])}: raise _PacketError('{what} failed')", ind)

    def p_assert(self, ps: list[m.Value], ind: int) -> None:
        self._check(ps, ind, "assert")

    def p_assume(self, ps: list[m.Value], ind: int) -> None:
        self._check(ps, ind, "assume")

    def p_log_msg(self, ps: list[m.Value], ind: int) -> None:
        msg = ps[0].value if isinstance(ps[0], m.String) else ""
        values = ps[1].items if len(ps) > 1 and isinstance(ps[1], m.ValueList) else ()
        self.emit(f"_LOG.append(_logf({msg!r}, ({''.join(self.rv(v) + ', ' for v in values)})))", ind)

    def _named(self, v: m.Value, kind: str) -> str:
        if not isinstance(v, m.Named) or v.kind != kind:
            raise self.fail(f"expected a {kind}")
        return v.name

    def p_register_read(self, ps: list[m.Value], ind: int) -> None:
        self.store(ps[0], self.rv(m.RegisterCell(self._named(ps[1], "register_array"), ps[2])), ind)

    def p_register_write(self, ps: list[m.Value], ind: int) -> None:
        name = self._named(ps[0], "register_array")
        reg = self.state.registers[name]
        i = self.tmp()
        self.emit(f"{i} = {self.rv(ps[1])}", ind)
        self.emit(f"if {i} < {reg.schema.size}: {self.bind('_R', reg.values)}[{i}] = "
                  f"({self.rv(ps[2])}) & {(1 << reg.schema.bitwidth) - 1:#x}", ind)

    def p_count(self, ps: list[m.Value], ind: int) -> None:
        name = self._named(ps[0], "counter_array")
        cnt = self.state.counters[name]
        i = self.tmp()
        self.emit(f"{i} = {self.rv(ps[1])}", ind)
        self.emit(f"if {i} < {cnt.schema.size}: {self.bind('_CP', cnt.packets)}[{i}] += 1; "
                  f"{self.bind('_CB', cnt.bytes)}[{i}] += F[{self.L.sm['packet_length']}]", ind)

    def meter_amount(self, kind: str) -> str:
        return "1" if kind == "packets" else f"F[{self.L.sm['packet_length']}]"

    def p_execute_meter(self, ps: list[m.Value], ind: int) -> None:
        name = self._named(ps[0], "meter_array")
        meter = self.state.meters[name]
        i = self.tmp()
        self.emit(f"{i} = {self.rv(ps[1])}", ind)
        amount = self.meter_amount(meter.schema.type)
        self.store(ps[2], f"({self.bind('_M', meter.cells)}[{i}].execute({amount}, _now()) "
                          f"if {i} < {meter.schema.size} else 0)", ind)

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
        """The bytes a calculation hashes: inputs MSB first, fields of invalid headers skipped (BMv2)."""
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

    def p_modify_field_with_hash_based_offset(self, ps: list[m.Value], ind: int) -> None:
        dst, base, calc, size = ps
        h, n = self.tmp(), self.tmp()
        self.emit(f"{h} = {self.calc(self._named(calc, 'calculation'))}; {n} = {self.rv(size)}", ind)
        self.store(dst, f"({self.rv(base)} + ({h} % {n} if {n} else {h}))", ind)

    def p_modify_field_rng_uniform(self, ps: list[m.Value], ind: int) -> None:
        lo, hi = self.tmp(), self.tmp()
        self.emit(f"{lo} = {self.rv(ps[1])}; {hi} = {self.rv(ps[2])}", ind)
        self.store(ps[0], f"(_rng.randint({lo}, {hi}) if {lo} <= {hi} else {lo})", ind)

    def p_generate_digest(self, ps: list[m.Value], ind: int) -> None:
        lid = ps[1].value if isinstance(ps[1], m.Const) else None
        ll = self.learn_lists.get(lid) if lid is not None else None
        if ll is None:
            raise self.fail(f"generate_digest names no learn list ({ps[1]})")
        values = "".join(f"{self.rv(f)} & {(1 << max(self.width(f), 1)) - 1:#x}, " for f in ll.elements)
        self.emit(f"_DG.append(({ll.name!r}, ({values})))", ind)

    def width(self, f: m.Field) -> int:
        _, ftype = self.L.field_slot(f)
        return 1 if ftype is None else (ftype.width or 0)

    def _field_list_id(self, v: m.Value | None) -> str:
        return str(v.value) if isinstance(v, m.Const) else "None"

    def p_clone_ingress_pkt_to_egress(self, ps: list[m.Value], ind: int) -> None:
        self._clone(ps, ind, "I2E")

    def p_clone_egress_pkt_to_egress(self, ps: list[m.Value], ind: int) -> None:
        self._clone(ps, ind, "E2E")

    def _clone(self, ps: list[m.Value], ind: int, kind: str) -> None:
        hid = self.L.hidden
        fl = self._field_list_id(ps[1]) if len(ps) > 1 else "None"
        self.emit(f"F[{hid['clone_session']}] = {self.rv(ps[0])}; F[{hid['clone_type']}] = {kind!r}; "
                  f"F[{hid['clone_fl']}] = {fl}", ind)

    def p_resubmit(self, ps: list[m.Value], ind: int) -> None:
        self.emit(f"F[{self.L.hidden['resubmit']}] = {self._field_list_id(ps[0]) if ps else 0}", ind)

    def p_recirculate(self, ps: list[m.Value], ind: int) -> None:
        self.emit(f"F[{self.L.hidden['recirculate']}] = {self._field_list_id(ps[0]) if ps else 0}", ind)

    def p_truncate(self, ps: list[m.Value], ind: int) -> None:
        self.emit(f"F[{self.L.hidden['truncate']}] = {self.rv(ps[0])}", ind)

    # -- actions

    def action_fn(self, a: m.Action) -> str:
        return f"ac{a.id}_{_ident(a.name)}"

    def gen_action(self, a: m.Action) -> None:
        args = "".join(f", a{i}" for i in range(len(a.runtime_data)))
        self.emit(f"def {self.action_fn(a)}(F{args}):", 0)
        self.emit(f"# action {a.name}", 1)
        jumps = any(p.op in ("_jump", "_jump_if_zero") for p in a.primitives)
        if not jumps:
            for prim in a.primitives:
                self.primitive(prim, 1)
            self.emit("return", 1)
            return
        # p4c lowers `if` inside an action to jumps: run its basic blocks as a little state machine
        # (flat `if pc == START` blocks: an elif chain per primitive would nest too deep for Python)
        prims = a.primitives
        leaders = {0}
        for i, prim in enumerate(prims):
            if prim.op in ("_jump", "_jump_if_zero"):
                leaders.add(i + 1)
                target = prim.parameters[-1]
                leaders.add(target.value if isinstance(target, m.Const) else len(prims))
        starts = sorted(x for x in leaders if x < len(prims))
        self.emit("pc = 0", 1)
        self.emit("while True:", 1)
        for start, end in zip(starts, starts[1:] + [len(prims)]):
            self.emit(f"if pc == {start}:", 2)
            for prim in prims[start:end]:
                if prim.op == "_jump":
                    self.emit(f"pc = {self.rv(prim.parameters[0])}; continue", 3)
                elif prim.op == "_jump_if_zero":
                    self.emit(f"if not {self.rv(prim.parameters[0])}: pc = {self.rv(prim.parameters[1])}; continue",
                              3)
                else:
                    self.primitive(prim, 3)
            self.emit(f"pc = {end}; continue", 3)
        self.emit("return", 2)

    # -- pipelines

    def node_fn(self, name: str | None, nodes: dict[str, str]) -> str:
        return "None" if name is None else nodes[name]

    def gen_pipeline(self, fname: str, pl: m.Pipeline) -> None:
        nodes = {t.name: f"tb{t.id}_{_ident(t.name)}" for t in pl.tables}
        nodes.update({c.name: f"cd{c.id}_{_ident(c.name)}" for c in pl.conditionals})
        for t in pl.tables:
            self.gen_table(t, nodes)
        for c in pl.conditionals:
            self.emit(f"def {nodes[c.name]}(F):", 0)
            self.emit(f"return {self.node_fn(c.true_next, nodes)} if {self.rv(c.expression)} "
                      f"else {self.node_fn(c.false_next, nodes)}", 1)
        self.emit(f"def {fname}(F):", 0)
        self.emit(f"F[{self.L.hidden['exit']}] = False", 1)
        self.emit(f"n = {self.node_fn(pl.init_table, nodes)}", 1)
        self.emit("while n is not None:", 1)
        self.emit("n = n(F)", 2)

    def key_code(self, k: m.KeyElement) -> str:
        if isinstance(k.target, m.HeaderRef):
            return f"int(F[{self.L.base[k.target.name]}])"
        slot, ftype = self.L.field_slot(k.target)
        if ftype is None:
            return f"int(F[{slot}])"
        width = ftype.width or 0
        mask = (1 << width) - 1 if k.mask is None else k.mask & ((1 << width) - 1)
        return f"(F[{slot}] & {mask:#x})"

    def gen_table(self, t: m.Table, nodes: dict[str, str]) -> None:
        obj = self.state.tables[t.name]
        fns = {}
        for aid in t.action_ids:
            fns[self.actions[aid].name] = self.action_fn(self.actions[aid])
        amap = f"_AM{t.id}"
        self.ns[amap] = fns  # filled with functions after exec
        tv = f"_T{t.id}"
        self.ns[tv] = obj
        hit_next = t.next_tables.get("__HIT__")
        miss_next = t.next_tables.get("__MISS__")
        by_hit = "__HIT__" in t.next_tables or "__MISS__" in t.next_tables
        nexts = f"_NX{t.id}"
        self.next_maps[nexts] = (t.next_tables, t.base_default_next)
        self.emit(f"def {nodes[t.name]}(F):", 0)
        self.emit(f"# table {t.name}", 1)
        exit_slot = self.L.hidden["exit"]
        default = t.default_entry
        if not t.key and default is not None and default.action_entry_const and obj.profile is None:
            # a keyless table whose action nobody can change: p4c's synthesized "tbl_act" tables
            action = self.actions[default.action_id]
            args = "".join(f", {v}" for v in default.action_data)
            self.emit(f"{self.action_fn(action)}(F{args})", 1)
            target = t.next_tables.get("__MISS__") if by_hit else t.next_tables.get(action.name, t.base_default_next)
            self.emit(f"return None if F[{exit_slot}] else {self.node_fn(target, nodes)}", 1)
            return

        def leave(hit: bool, action: str) -> None:
            target = (hit_next if hit else miss_next) if by_hit else None
            exit_check = f"if F[{self.L.hidden['exit']}]: return None"
            self.emit(exit_check, 2 if hit else 1)
            if by_hit:
                self.emit(f"return {self.node_fn(target, nodes)}", 2 if hit else 1)
            else:
                self.emit(f"return {nexts}[{action}]", 2 if hit else 1)

        if t.key:
            values = ", ".join(self.key_code(k) for k in t.key)
            self.emit(f"_e = {tv}.lookup(({values},))", 1)
            self.emit("if _e is not None:", 1)
            if t.support_timeout:
                self.emit("_e.last_hit = _now()", 2)
            if obj.schema.direct_counter is not None:
                self.emit(f"_e.packets += 1; _e.bytes += F[{self.L.sm['packet_length']}]", 2)
            if obj.schema.direct_meter is not None:
                meter = next(mt for mt in self.p.meter_arrays if mt.name == obj.schema.direct_meter)
                color = f"_e.meter.execute({self.meter_amount(meter.type)}, _now())"
                if meter.result_target is not None:
                    self.store(meter.result_target, color, 2)
            if obj.profile is None:
                self.emit(f"{amap}[_e.action](F, *_e.args)", 2)
                leave(True, "_e.action")
            else:
                self.indirect_hit(t, obj.profile, amap, 2)
                leave(True, "_m.action")
        if obj.profile is None:
            self.emit(f"_d = {tv}.default", 1)
            self.emit(f"{amap}[_d.action](F, *_d.args)", 1)
            leave(False, "_d.action")
        else:
            self.emit(f"return {self.node_fn(t.base_default_next if not by_hit else miss_next, nodes)}", 1)

    def indirect_hit(self, t: m.Table, profile: st.ActionProfile, amap: str, ind: int) -> None:
        pv = f"_P{t.id}"
        self.ns[pv] = profile
        ap = next(a for pl in self.p.pipelines for a in pl.action_profiles if a.name == t.action_profile)
        if ap.selector is not None:
            if ap.selector.algo not in hashes.ALGORITHMS:
                raise self.fail(f"action selector hash {ap.selector.algo} is not supported")
            self.emit("if _e.group_id is not None:", ind)
            self.emit(f"_m = {pv}.pick(_e.group_id, _h_{ap.selector.algo}({self.calc_bytes(ap.selector.input)}))",
                      ind + 1)
            self.emit("if _m is None: return None", ind + 1)
            self.emit("else:", ind)
            self.emit(f"_m = {pv}.members[_e.member_id]", ind + 1)
        else:
            self.emit(f"_m = {pv}.members[_e.member_id]", ind)
        self.emit(f"{amap}[_m.action](F, *_m.args)", ind)

    # -- parser, checksums, deparser

    def extract(self, target: m.Value, vl: str, ind: int) -> None:
        too_short = self.error_code("PacketTooShort")
        if isinstance(target, m.HeaderRef):
            t = self.L.header_type(target.name)
            b = str(self.L.base[target.name])
        elif isinstance(target, m.StackRef):
            t = self.L.types[self.L.stack_type[target.name]]
            nxt = self.L.next_index[target.name]
            size = len(self.L.stacks[target.name])
            self.emit(f"if F[{nxt}] >= {size}: raise _Reject({self.error_code('StackOutOfBounds')}, o)", ind)
            self.emit(f"_b = _STK_{_ident(target.name)}[F[{nxt}]]; F[{nxt}] += 1", ind)
            self.emit(f"o = {self.extractor(t)}(F, _b, data, o, {vl}, {too_short})", ind)
            return
        elif isinstance(target, m.UnionStackField):  # the member of the stack's next union
            ut = self.L.union_stack_type[target.stack]
            k = next((i for i, (name, _) in enumerate(ut.headers) if name == target.member), None)
            if k is None:
                raise self.fail(f"header union stack {target.stack} has no member {target.member}")
            t = self.L.types[ut.headers[k][1]]
            nxt = self.L.next_index[target.stack]
            size = len(self.L.union_stacks[target.stack])
            self.emit(f"if F[{nxt}] >= {size}: raise _Reject({self.error_code('StackOutOfBounds')}, o)", ind)
            members = self.union_members(m.Expr("dereference_union_stack", m.UnionStackRef(target.stack),
                                                m.Expr("size_stack", None, m.UnionStackRef(target.stack))))
            self.emit(f"_b = {members[k]}; F[{nxt}] += 1", ind)
            self.emit(f"o = {self.extractor(t)}(F, _b, data, o, {vl}, {too_short})", ind)
            return
        else:
            raise self.fail(f"cannot extract into a {type(target).__name__}")
        if t.max_length is not None and vl != "0":
            fixed = sum(f.width or 0 for f in t.fields)
            self.emit(f"_vl = {vl}", ind)
            self.emit(f"if _vl % 8: raise _Reject({self.error_code('ParserInvalidArgument')}, o)", ind)
            self.emit(f"if _vl + {fixed} > {t.max_length * 8}: raise _Reject({self.error_code('HeaderTooShort')}, o)",
                      ind)
            vl = "_vl"
        self.emit(f"o = {self.extractor(t)}(F, {b}, data, o, {vl}, {too_short})", ind)
        self.after_valid_change(target, b, ind)

    def extractor(self, t: m.HeaderType) -> str:
        """The function filling a header of type `t` from the packet: printed straight-line for
        fixed-width types (the parser's hot path), the generic `_extract` for a varbit."""
        name = f"_ex_{_ident(t.name)}"
        if any(f.width is None for f in t.fields):
            self.ns.setdefault(name, functools.partial(_extract, self.ns[f"_FS_{_ident(t.name)}"]))
            return name
        if name not in self.printed:
            self.printed.add(name)
            nbytes = sum(f.width or 0 for f in t.fields) // 8
            lines = [f"def {name}(F, b, data, o, vl, too_short):", f"    end = o + {nbytes}",
                     "    if end > len(data): raise _Reject(too_short, o)",
                     "    v = int.from_bytes(data[o:end], 'big')"]
            pos = nbytes * 8
            for k, f in enumerate(t.fields):
                w = f.width or 0
                pos -= w
                value = f"(v >> {pos}) & {_mask(w):#x}" if pos else f"v & {_mask(w):#x}"
                if f.signed:
                    value = f"(({value}) ^ {1 << (w - 1):#x}) - {1 << (w - 1):#x}"
                lines.append(f"    F[b + {1 + k}] = {value}")
            lines += ["    F[b] = True", "    return end"]
            self.header_lines += lines
        return name

    def emitter(self, t: m.HeaderType) -> str:
        """The function writing a header of type `t` as bytes (printed for fixed-width types)."""
        name = f"_em_{_ident(t.name)}"
        if any(f.width is None for f in t.fields):
            self.ns.setdefault(name, functools.partial(_packed, self.ns[f"_FS_{_ident(t.name)}"]))
            return name
        if name not in self.printed:
            self.printed.add(name)
            total = sum(f.width or 0 for f in t.fields)
            pad = -total % 8
            parts, pos = [], total + pad
            for k, f in enumerate(t.fields):
                w = f.width or 0
                pos -= w
                parts.append(f"(F[b + {1 + k}] & {_mask(w):#x}) << {pos}" if pos else f"(F[b + {1 + k}] & {_mask(w):#x})")
            self.header_lines += [f"def {name}(F, b):",
                                  f"    return ({' | '.join(parts) or '0'}).to_bytes({(total + pad) // 8}, 'big')"]
        return name

    def parser_op(self, op: m.ParserOp, ind: int) -> None:
        ps = op.parameters
        if op.op == "extract":
            self.extract(ps[0], "0", ind)
        elif op.op == "extract_VL":
            self.extract(ps[0], self.rv(ps[1]), ind)
        elif op.op == "set":
            self.p_assign(ps, ind)
        elif op.op == "verify":
            self.emit(f"if not {self.rv(ps[0])}: raise _Reject({self.rv(ps[1])}, o)", ind)
        elif op.op in ("advance", "shift"):
            amount = self.rv(ps[0])
            self.emit(f"o += ({amount}) >> 3" if op.op == "advance" else f"o += {amount}", ind)
            self.emit(f"if o > len(data): raise _Reject({self.error_code('PacketTooShort')}, len(data))", ind)
        elif op.op == "primitive":
            name = ps[0]
            assert isinstance(name, m.Named)
            self.primitive(m.Primitive(name.name, ps[1:]), ind)

    def key_part_width(self, v: m.Value) -> int:
        if isinstance(v, m.Field):
            return self.width(v)
        if isinstance(v, m.Lookahead):
            return v.width
        if isinstance(v, m.StackField):
            return self.field_index(self.L.stack_type[v.stack], v.field)[1].width or 0
        raise self.fail(f"a parser transition key cannot be a {type(v).__name__}")

    def gen_parser(self, p: m.Parser) -> None:
        fnames = {s.name: f"ps{s.id}_{_ident(s.name)}" for s in p.parse_states}
        for s in p.parse_states:
            self.emit(f"def {fnames[s.name]}(F, data, o):", 0)
            for op in s.parser_ops:
                self.parser_op(op, 1)
            self.transitions(s, fnames, 1)
        self.emit("def parse(F, data):", 0)
        self.emit(f"o = 0; s = {fnames[p.init_state]}; n = 0", 1)
        self.emit("try:", 1)
        self.emit("while s is not None:", 2)
        self.emit("s, o = s(F, data, o)", 3)
        self.emit("n += 1", 3)
        self.emit(f"if n > {MAX_PARSER_STATES}: raise _Reject({self.error_code('ParserTimeout')}, o)", 3)
        self.emit("except _Reject as r:", 1)
        self.emit(f"if r.code is not None: F[{self.L.sm['parser_error']}] = r.code", 2)
        self.emit("return r.offset", 2)
        self.emit("return o", 1)

    def transitions(self, s: m.ParseState, fnames: dict[str, str], ind: int) -> None:
        def go(target: str | None) -> str:
            return f"return {fnames[target] if target else 'None'}, o"

        if s.transition_key:
            parts = []
            for v in s.transition_key:
                w = self.key_part_width(v)
                parts.append((self.rv(v), w, (w + 7) // 8 * 8))
            total = sum(p[2] for p in parts)
            code, pos = [], total
            for c, w, padded in parts:
                pos -= padded
                code.append(f"(({c}) & {(1 << w) - 1:#x}) << {pos}")
            self.emit(f"_k = {' | '.join(code)}", ind)
        for tr in s.transitions:
            if tr.kind == "default":
                self.emit(go(tr.next_state), ind)
                return
            if tr.kind == "parse_vset":
                raise self.fail(f"parser value set {tr.vset} is not supported yet")
            if tr.mask is None:
                self.emit(f"if _k == {tr.value:#x}: {go(tr.next_state)}", ind)
            else:
                self.emit(f"if _k & {tr.mask:#x} == {(tr.value or 0) & tr.mask:#x}: {go(tr.next_state)}", ind)
        self.emit(f"raise _Reject({self.error_code('NoMatch')}, o)", ind)

    def gen_checksums(self, fname: str, verify: bool) -> bool:
        sums = [c for c in self.p.checksums if (c.verify if verify else c.update)]
        if not sums:
            return False
        self.emit(f"def {fname}(F):", 0)
        for c in sums:
            cond = self.rv(c.if_cond) if c.if_cond is not None else "True"
            self.emit(f"if {cond}:", 1)
            target, _ = self.field_lv(c.target)
            if verify:
                self.emit(f"if {self.calc(c.calculation)} != {target}: F[{self.L.sm['checksum_error']}] = 1", 2)
            else:
                self.store(c.target, self.calc(c.calculation), 2)
        return True

    def gen_deparser(self, d: m.Deparser) -> None:
        self.emit("def deparse(F):", 0)
        self.emit("out = []", 1)
        for prim in d.primitives:
            self.primitive(prim, 1)
        for h in d.order:
            b = self.L.base[h]
            self.emit(f"if F[{b}]: out.append({self.emitter(self.L.types[self.p.header(h).header_type])}(F, {b}))", 1)
        self.emit("return out", 1)

    def compile(self) -> Compiled:
        for a in self.p.actions:
            self.gen_action(a)
        self.gen_parser(self.p.parsers[0])
        pipelines = {pl.name: pl for pl in self.p.pipelines}
        empty = set()
        for fname in ("ingress", "egress"):
            if fname in pipelines:
                self.gen_pipeline(fname, pipelines[fname])
            else:
                empty.add(fname)
        if not self.gen_checksums("verify", verify=True):
            empty.add("verify")
        if not self.gen_checksums("compute", verify=False):
            empty.add("compute")
        self.gen_deparser(self.p.deparsers[0])
        source = "\n".join(self.header_lines + self.lines) + "\n"
        exec(compile(source, f"<p4 {self.p.source}>", "exec"), self.ns)  # noqa: S102 - our own generated code
        for key in list(self.ns):
            if key.startswith("_AM"):
                self.ns[key] = {name: self.ns[fn] for name, fn in self.ns[key].items()}
        node_names = {}
        for pl in self.p.pipelines:
            for t in pl.tables:
                node_names[t.name] = self.ns[f"tb{t.id}_{_ident(t.name)}"]
            for c in pl.conditionals:
                node_names[c.name] = self.ns[f"cd{c.id}_{_ident(c.name)}"]
        for var, (targets, fallback) in self.next_maps.items():  # action -> next node, as functions
            fallback_node = node_names.get(fallback) if fallback else None
            self.ns[var] = collections.defaultdict(functools.partial(_constant, fallback_node),
                                                   {a: node_names[n] if n else None for a, n in targets.items()})
        field_lists = {fl.id: [self.L.field_slot(f)[0] for f in fl.elements] for fl in self.p.field_lists}
        return Compiled(source, self.ns, self.L.initial, self.L.sm, self.L.hidden, field_lists,
                        self.L.meta_range, empty)


_BOOL_OPS = frozenset({"==", "!=", ">", ">=", "<", "<=", "and", "or", "not", "d2b", "valid", "valid_union"})


def _mask(width: int) -> int:
    return (1 << width) - 1


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def compile_program(program: m.Program, state: st.State, rng: random.Random) -> Compiled:
    """Print `program` as Python bound to `state` and load it (P4Error for what it cannot run)."""
    return _Printer(program, state, rng).compile()

