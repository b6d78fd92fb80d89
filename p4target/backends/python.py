"""The lowered form printed as Python: the readable reference engine for p4c's BMv2 JSON.

Every packet is one list `F` of slots laid out by `p4target.backends.layout` (shared with the
C back end). Values are Python ints of unbounded precision, as BMv2's are: a value is
truncated to a field's width when it is written into the field, so an unsigned field's slot
always holds a value within its width (emitters and checksums do not mask it again).

The printed module has the functions `p4target.pipeline.Pipeline` calls: parse(F, data),
verify(F), ingress(F), egress(F), compute(F) and deparse(F). A control is its graph of
tables and conditionals, one function per node returning the next node (None at the end).
"""
from __future__ import annotations

import collections
import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4target import state as st
from p4target.backends import hashes
from p4target.backends.layout import Unsupported, ident
from p4target.backends.printer import LoweredPrinter
from p4target.backends.vectorize import Vectorizer
from p4target.errors import PacketError
from p4target.externs.base import Extern
from p4target.externs.checksum import python_checksums
from p4target.lowered import model as m

MAX_PARSER_STATES = 1000
_SHIFT_LIMIT = 4096  # BMv2 fields are at most this wide; a longer shift leaves nothing of them


@dataclass
class Compiled:
    """A printed program loaded: what the pipeline needs from it."""

    source: str
    namespace: dict[str, Any]
    frame: list  # the template every packet's frame starts from
    sm: dict[str, int]  # standard_metadata field -> slot
    hidden: dict[str, int]  # per-packet bookkeeping slots (clone, resubmit, ...)
    field_lists: dict[int, list[int]]  # field list id -> user metadata slots to preserve
    meta_range: tuple[int, int]  # slots of user metadata (reset on an E2E clone)
    empty: set[str] = field(default_factory=set)  # stages with nothing to do

    def fn(self, name: str) -> Callable[..., Any]:
        return self.namespace[name]


# -- helpers the printed code calls ------------------------------------------------------------

class _Reject(Exception):
    """The parser went to reject; `code` is the error's number (None: keep parser_error)."""

    def __init__(self, code: int | None, offset: int):
        super().__init__(code, offset)
        self.code = code
        self.offset = offset


def _log_format(msg: str, values: tuple) -> str:
    """log_msg: each `{}` in msg takes the next value (other braces are literal)."""
    parts = msg.split("{}")
    out = [parts[0]]
    for i, rest in enumerate(parts[1:]):
        out.append(str(values[i]) if i < len(values) else "{}")
        out.append(rest)
    return "".join(out)


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
    """Element `index` of a stack; out of range (P4: an undefined value), the stack's scratch header, which
    reads as invalid zeros and takes writes that nothing reads back meaningfully. Union stacks have none."""
    if not 0 <= index < len(items) - 1:
        if isinstance(items[-1], str):
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

class _Printer(LoweredPrinter):
    """Lowered Program -> Python source bound to one State (tables, registers, ...)."""

    OPS = {"d2b": "({b} != 0)", "b2d": "int({b})", "not": "(not {b})", "~": "(~{b})", "neg": "(-{b})",
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
        self.conditionals: dict[str, m.Conditional] = {}  # of the pipeline being printed
        # what tells that an action ran `exit` (nothing to test when no action can)
        self.exited = f"F[{self.L.hidden['exit']}]" if any(prim.op == "exit" for a in p.actions
                                                           for prim in a.primitives) else ""
        for hname, t in self.L.types.items():
            self.ns[f"_FS_{ident(hname)}"] = tuple((f.width, f.signed) for f in t.fields)
        for s, headers in self.L.stacks.items():
            self.ns[f"_STK_{ident(s)}"] = tuple(self.L.base[h] for h in headers) + (self.L.scratch[s],)
        for s, names in {**self.L.unions, **self.L.union_stacks}.items():
            self.ns[f"_STK_{ident(s)}"] = tuple(self.L.base.get(h, h) for h in names) + ("",)

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
            if v.op == "d2b" and isinstance(v.right, m.Field) and v.right.field == "$valid$":
                return f"F[{self.L.base[v.right.header]}]"  # the validity slot holds a bool
            if v.op == "<<" and isinstance(v.right, m.Const) and 0 <= v.right.value < _SHIFT_LIMIT:
                return f"({self.rv(v.left)} << {v.right.value})"
            return self.expr(v)
        raise self.fail(f"a {type(v).__name__} cannot be read as a value here")

    def read(self, slot: str, ftype: m.FieldType | None) -> str:
        return f"int(F[{slot}])" if ftype is None else f"F[{slot}]"

    def union_stack_members(self, stack: str, index: m.Value | None) -> list[str]:
        u = f"_at(_STK_{ident(stack)}, {self.rv(index)}, {stack!r})"
        # the stack's unions all have the same type: member k's base is found through the first union
        self.ns.setdefault(f"_UM_{ident(stack)}", {
            name: tuple(self.L.base[h] for h in self.L.unions[name]) for name in self.L.union_stacks[stack]})
        return [f"_UM_{ident(stack)}[{u}][{k}]" for k in range(len(self.L.union_stack_type[stack].headers))]

    def stack_element(self, stack: str, index: m.Value | None) -> str:
        return f"_at(_STK_{ident(stack)}, {self.rv(index)}, {stack!r})"

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        slot, ftype, width = self.target(dst)
        if ftype.signed:
            self.emit(f"F[{slot}] = _sx({code}, {width})", ind)
        else:
            self.emit(f"F[{slot}] = ({code}) & {(1 << width) - 1:#x}", ind)

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
        return False

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        if isinstance(ps[1], m.BoolConst) and not self.target(ps[0])[1].signed:
            self.emit(f"F[{self.target(ps[0])[0]}] = {int(ps[1].value)}", ind)
        elif isinstance(ps[1], m.Expr) and ps[1].op in _BOOL_OPS:
            self.store(ps[0], f"int({self.rv(ps[1])})", ind)
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
        self.emit(f"_LOG.append(_logf({msg!r}, ({''.join(v + ', ' for v in values)})))", ind)

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
        if push:
            self.emit(f"for _i in range({len(bases) - 1}, -1, -1):", ind)
            self.emit(f"if _i >= {t}: _copy(F, _STK_{ident(stack.name)}[_i], _STK_{ident(stack.name)}[_i - {t}], {size})",
                      ind + 1)
            self.emit(f"else: F[_STK_{ident(stack.name)}[_i]] = False", ind + 1)
            self.emit(f"F[{nxt}] = min(F[{nxt}] + {t}, {len(bases)})", ind)
        else:
            self.emit(f"for _i in range({len(bases)}):", ind)
            self.emit(f"if _i + {t} < {len(bases)}: _copy(F, _STK_{ident(stack.name)}[_i], "
                      f"_STK_{ident(stack.name)}[_i + {t}], {size})", ind + 1)
            self.emit(f"else: F[_STK_{ident(stack.name)}[_i]] = False", ind + 1)
            self.emit(f"F[{nxt}] = max(F[{nxt}] - {t}, 0)", ind)

    def p_push(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=True)

    def p_pop(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=False)

    def p_exit(self, ps: list[m.Value], ind: int) -> None:
        self.emit(f"F[{self.L.hidden['exit']}] = True; return", ind)

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        self.emit(f"if not {cond}: raise _PacketError({what + ' failed' + self.where()!r})", ind)

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

    # -- actions

    def action_fn(self, a: m.Action) -> str:
        return f"ac{a.id}_{ident(a.name)}"

    def gen_action(self, a: m.Action) -> None:
        if self.vectorizer is not None:
            a = self.vectorizer.reroll(a)
        args = "".join(f", a{i}" for i in range(len(a.runtime_data)))
        self.emit(f"def {self.action_fn(a)}(F{args}):", 0)
        self.emit(f"# action {a.name}", 1)
        # p4c lowers `if` inside an action to jumps; printed back as if/else where they nest as an `if` does
        printed = len(self.out)
        if self.structured(a.primitives, 0, len(a.primitives), 1):
            self.emit("return", 1)
            return
        del self.out[printed:]
        # other jumps: a little state machine over primitive indexes, one flat `if pc == I` per primitive
        # falling through to the next (an elif chain nests too deep for Python's compiler); a jump sets pc
        # and starts over
        self.emit("pc = 0", 1)
        self.emit("while True:", 1)
        self.action_body(a, 2)
        self.emit("return", 3)
        self.emit("return", 2)

    def structured(self, prims: list[m.Primitive], lo: int, hi: int, ind: int) -> bool:
        """Print prims[lo:hi] with p4c's jump patterns as if/else: `_jump_if_zero(c, T)` then-part
        [`_jump(E)`] else-part up to E; a jump to the action's end is `return`. False if a jump does not nest."""
        i = lo
        while i < hi:
            prim = prims[i]
            if prim.op == "_jump":
                if _target(prim, 0) != len(prims):
                    return False
                self.emit("return", ind)
            elif prim.op == "_jump_if_zero":
                t = _target(prim, 1)
                if not i < t <= hi:
                    return False
                then_end, end = t, t
                if t - 1 > i and prims[t - 1].op == "_jump":
                    e = _target(prims[t - 1], 0)
                    if t <= e <= hi:
                        then_end, end = t - 1, e
                cond: m.Value | None = prim.parameters[0]
                if isinstance(cond, m.Expr) and cond.op == "b2d":  # p4c's jump tests a bool made data
                    cond = cond.right
                self.emit(f"if {self.rv(cond)}:", ind)
                if not self.branch(prims, i + 1, then_end, ind + 1):
                    return False
                if end > t:
                    self.emit("else:", ind)
                    if not self.branch(prims, t, end, ind + 1):
                        return False
                i = end
                continue
            else:
                self.primitive(prim, ind)
            i += 1
        return True

    def branch(self, prims: list[m.Primitive], lo: int, hi: int, ind: int) -> bool:
        printed = len(self.out)
        if not self.structured(prims, lo, hi, ind):
            return False
        if len(self.out) == printed:
            self.emit("pass", ind)
        return True

    def label(self, index: int, ind: int) -> int:
        if index:
            self.emit(f"pc = {index}", ind + 1)  # the primitive before falls through to this one
        self.emit(f"if pc == {index}:", ind)
        return ind + 1

    def jump(self, cond: str | None, target: m.Value, ind: int) -> None:
        self.emit(f"{'' if cond is None else f'if not {cond}: '}pc = {self.rv(target)}; continue", ind)

    def p__vector(self, ps: list[m.Value], ind: int) -> None:
        """A run of unrolled lane primitives, rerolled (see p4target.backends.vectorize)."""
        assert self.vectorizer is not None and isinstance(ps[0], m.Const)
        self.vectorizer.emit(ps[0].value, ind)

    # -- pipelines

    def node_fn(self, name: str | None, nodes: dict[str, str], depth: int = 3) -> str:
        """The next node after a node: a conditional (and the conditionals it leads to, `depth` deep) is decided
        right there (a call fewer per packet each)."""
        if name is None:
            return "None"
        c = self.conditionals.get(name)
        if c is None or depth == 0:
            return nodes[name]
        true, false = self.node_fn(c.true_next, nodes, depth - 1), self.node_fn(c.false_next, nodes, depth - 1)
        return f"({true} if {self.rv(c.expression)} else {false})"

    def gen_pipeline(self, fname: str, pl: m.Pipeline) -> None:
        self.conditionals = {c.name: c for c in pl.conditionals}
        nodes = {t.name: f"tb{t.id}_{ident(t.name)}" for t in pl.tables}
        nodes.update({c.name: f"cd{c.id}_{ident(c.name)}" for c in pl.conditionals})
        for t in pl.tables:
            self.gen_table(t, nodes)
        for c in pl.conditionals:
            self.emit(f"def {nodes[c.name]}(F):", 0)
            self.emit(f"return {self.node_fn(c.true_next, nodes)} if {self.rv(c.expression)} "
                      f"else {self.node_fn(c.false_next, nodes)}", 1)
        self.conditionals = {}
        self.emit(f"def {fname}(F):", 0)
        self.emit(f"F[{self.L.hidden['exit']}] = False", 1)
        self.emit(f"n = {self.node_fn(pl.init_table, nodes)}", 1)
        self.emit("while n is not None:", 1)
        self.emit("n = n(F)", 2)

    def key_code(self, k: m.KeyElement) -> str:
        slot, mask = self.key_mask(k)
        if mask is None:
            return f"int(F[{slot}])"
        if isinstance(k.target, m.Field) and self.fits(k.target, mask.bit_length()) and mask & (mask + 1) == 0:
            return f"F[{slot}]"  # the mask keeps every value the field can hold
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
        default = t.default_entry
        if not t.key and default is not None and default.action_entry_const and obj.profile is None:
            # a keyless table whose action nobody can change (p4c's synthesized "tbl_act"): call it directly
            action = self.actions[default.action_id]
            target = t.next_tables.get("__MISS__") if by_hit else t.next_tables.get(action.name, t.base_default_next)
            if not action.runtime_data and all(p.op not in ("_jump", "_jump_if_zero", "exit") for p in action.primitives):
                # straight-line, cannot exit: its primitives right here (a call fewer per packet)
                for prim in (action if self.vectorizer is None else self.vectorizer.reroll(action)).primitives:
                    self.primitive(prim, 1)
                self.emit(f"return {self.node_fn(target, nodes)}", 1)
                return
            args = "".join(f", {v}" for v in default.action_data)
            self.emit(f"{self.action_fn(action)}(F{args})", 1)
            self.emit(f"return {f'None if {self.exited} else ' if self.exited else ''}{self.node_fn(target, nodes)}", 1)
            return

        def leave(hit: bool, action: str) -> None:
            target = (hit_next if hit else miss_next) if by_hit else None
            if self.exited:
                self.emit(f"if {self.exited}: return None", 2 if hit else 1)
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

    def global_of(self, prefix: str, obj: object) -> str:
        """`obj` (a register's cells, a counter's) as a global of the printed module: no lookup by name per packet."""
        name = self.globals.get(id(obj))
        if name is None:
            name = self.globals[id(obj)] = f"{prefix}{len(self.globals)}"
            self.ns[name] = obj
        return name

    def extractor(self, t: m.HeaderType) -> str:
        """The function filling a header of type `t` from the packet: printed straight-line for a fixed-width
        type (the parser's hot path; a loop over the fields cost 40% of a packet), the generic one for a varbit."""
        name = f"_ex_{ident(t.name)}"
        if name in self.ns or name in self.codecs_printed:
            return name
        if any(f.width is None for f in t.fields):
            fields = self.ns[f"_FS_{ident(t.name)}"]
            self.ns[name] = functools.partial(_extract, fields)
            return name
        self.codecs_printed.add(name)
        self.codecs += [f"def {name}(F, b, data, o, vl, too_short):"]
        self.codecs += ["    " + line for line in self.extract_lines(t, "b", "too_short")] + ["    return o"]
        return name

    @staticmethod
    def extract_lines(t: m.HeaderType, b: str, too_short: str | int) -> list[str]:
        """Straight-line code filling fixed-width header `t` at base slot `b` from `data` at `o`, moving `o` on."""
        nbytes = sum(f.width or 0 for f in t.fields) // 8
        lines = [f"_end = o + {nbytes}", f"if _end > len(data): raise _Reject({too_short}, o)",
                 "_v = int.from_bytes(data[o:_end], 'big')"]
        pos = nbytes * 8
        for k, f in enumerate(t.fields):
            w = f.width or 0
            pos -= w
            value = f"_v >> {pos}" if k == 0 else f"(_v >> {pos}) & {(1 << w) - 1:#x}" if pos else f"_v & {(1 << w) - 1:#x}"
            if f.signed:
                value = f"(({value}) ^ {1 << (w - 1):#x}) - {1 << (w - 1):#x}"
            lines.append(f"F[{b} + {1 + k}] = {value}" if b == "b" else f"F[{int(b) + 1 + k}] = {value}")
        return lines + [f"F[{b}] = True", "o = _end"]

    def emitter(self, t: m.HeaderType) -> str:
        """The function writing a header of type `t` as bytes (printed straight-line for a fixed-width type)."""
        name = f"_em_{ident(t.name)}"
        if name in self.ns or name in self.codecs_printed:
            return name
        if any(f.width is None for f in t.fields):
            self.ns[name] = functools.partial(_packed, self.ns[f"_FS_{ident(t.name)}"])
            return name
        self.codecs_printed.add(name)
        self.codecs += [f"def {name}(F, b):", f"    return {self.packed_code(t, 'b')}"]
        return name

    @staticmethod
    def packed_code(t: m.HeaderType, b: str) -> str:
        """An expression: fixed-width header `t` at base slot `b` as wire bytes."""
        total = sum(f.width or 0 for f in t.fields)
        pad = -total % 8
        parts, pos = [], total + pad
        for k, f in enumerate(t.fields):
            w = f.width or 0
            pos -= w
            slot = f"F[b + {1 + k}]" if b == "b" else f"F[{int(b) + 1 + k}]"
            part = slot if not f.signed else f"({slot} & {(1 << w) - 1:#x})"
            parts.append(f"{part} << {pos}" if pos else part)
        return f"({' | '.join(parts) or '0'}).to_bytes({(total + pad) // 8}, 'big')"

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
            self.emit(f"_b = _STK_{ident(target.name)}[F[{nxt}]]; F[{nxt}] += 1", ind)
            self.emit(f"o = {self.extractor(t)}(F, _b, data, o, {vl}, {too_short})", ind)
            return
        elif isinstance(target, m.UnionStackField):  # the member of the stack's next union
            k, t = self.union_stack_member(target)
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
        if all(f.width is not None for f in t.fields):  # inline: a call per header costs as much as its fields
            for line in self.extract_lines(t, b, too_short):
                self.emit(line, ind)
        else:
            self.emit(f"o = {self.extractor(t)}(F, {b}, data, o, {vl}, {too_short})", ind)
        self.after_valid_change(target, b, ind)

    def verify(self, cond: str, code: str, ind: int) -> None:
        self.emit(f"if not {cond}: raise _Reject({code}, o)", ind)

    def advance(self, amount: str, bits: bool, ind: int) -> None:
        self.emit(f"o += ({amount}) >> 3" if bits else f"o += {amount}", ind)
        self.emit(f"if o > len(data): raise _Reject({self.error_code('PacketTooShort')}, len(data))", ind)

    def gen_parser(self, p: m.Parser) -> None:
        self.labels = {s.name: f"ps{s.id}_{ident(s.name)}" for s in p.parse_states}
        for s in p.parse_states:
            self.emit(f"def {self.labels[s.name]}(F, data, o):", 0)
            for op in s.parser_ops:
                self.parser_op(op, 1)
            self.transitions(s, 1)
        self.emit("def parse(F, data):", 0)
        self.emit(f"o = 0; s = {self.labels[p.init_state]}; n = 0", 1)
        self.emit("try:", 1)
        self.emit("while s is not None:", 2)
        self.emit("s, o = s(F, data, o)", 3)
        self.emit("n += 1", 3)
        self.emit(f"if n > {MAX_PARSER_STATES}: raise _Reject({self.error_code('ParserTimeout')}, o)", 3)
        self.emit("except _Reject as r:", 1)
        self.emit(f"if r.code is not None: F[{self.L.sm['parser_error']}] = r.code", 2)
        self.emit("return r.offset", 2)
        self.emit("return o", 1)

    def set_key(self, parts: list[tuple[m.Value, int, int]], ind: int) -> None:
        terms = [self.rv(v) if self.fits(v, w) else f"(({self.rv(v)}) & {(1 << w) - 1:#x})" for v, w, _ in parts]
        self.emit(f"_k = {' | '.join(f'{t} << {pos}' if pos else t for t, (_, _, pos) in zip(terms, parts))}", ind)

    def goto(self, state: str | None) -> str:
        return f"return {self.labels[state] if state else 'None'}, o"

    def case(self, value: int, mask: int | None, then: str) -> str:
        return f"if _k == {value:#x}: {then}" if mask is None else f"if _k & {mask:#x} == {value & mask:#x}: {then}"

    def reject(self, code: int) -> str:
        return f"raise _Reject({code}, o)"

    def vset_case(self, vset: str, parts: list[tuple[int, int]], then: str, ind: int) -> None:
        members = self.global_of("_VS", self.state.value_set(vset).members)
        member = "".join(f"(_k >> {pos}) & {(1 << w) - 1:#x}, " for w, pos in parts)
        self.emit(f"if ({member}) in {members}: {then}", ind)

    def gen_deparser(self, d: m.Deparser) -> None:
        self.emit("def deparse(F):", 0)
        self.emit("out = []", 1)
        for prim in d.primitives:
            self.primitive(prim, 1)
        for h in d.order:
            b = self.L.base[h]
            t = self.L.types[self.p.header(h).header_type]
            fixed = all(f.width is not None for f in t.fields)
            self.emit(f"if F[{b}]: out.append({self.packed_code(t, str(b)) if fixed else f'{self.emitter(t)}(F, {b})'})",
                      1)
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
        if not python_checksums(self, "verify", verify=True):
            empty.add("verify")
        if not python_checksums(self, "compute", verify=False):
            empty.add("compute")
        self.gen_deparser(self.p.deparsers[0])
        source = "\n".join(self.codecs + self.out) + "\n"
        exec(compile(source, f"<p4 {self.p.source}>", "exec"), self.ns)  # noqa: S102 - our own generated code
        for key in list(self.ns):
            if key.startswith("_AM"):
                self.ns[key] = {name: self.ns[fn] for name, fn in self.ns[key].items()}
        node_names = {}
        for pl in self.p.pipelines:
            for t in pl.tables:
                node_names[t.name] = self.ns[f"tb{t.id}_{ident(t.name)}"]
            for c in pl.conditionals:
                node_names[c.name] = self.ns[f"cd{c.id}_{ident(c.name)}"]
        for var, (targets, fallback) in self.next_maps.items():  # action -> next node, as functions
            fallback_node = node_names.get(fallback) if fallback else None
            self.ns[var] = collections.defaultdict(functools.partial(_constant, fallback_node),
                                                   {a: node_names[n] if n else None for a, n in targets.items()})
        field_lists = {fl.id: [self.L.field_slot(f)[0] for f in fl.elements] for fl in self.p.field_lists}
        return Compiled(source, self.ns, self.L.initial, self.L.sm, self.L.hidden, field_lists,
                        self.L.meta_range, empty)


def _target(prim: m.Primitive, k: int) -> int:
    """The primitive index a jump's parameter k names."""
    target = prim.parameters[k]
    if not isinstance(target, m.Const):
        raise Unsupported(f"a {prim.op} whose target is not a constant")
    return target.value


_BOOL_OPS = frozenset({"==", "!=", ">", ">=", "<", "<=", "and", "or", "not", "d2b", "valid", "valid_union"})


def compile_program(program: m.Program, state: st.State, rng: random.Random, vectorize: bool = True) -> Compiled:
    """Print `program` as Python bound to `state` and load it (P4Error for what it cannot run); `vectorize`:
    numpy code for unrolled lane runs (off only to compare with plain code)."""
    return _Printer(program, state, rng, vectorize).compile()

