"""The Python printer's parser, checksum and deparser printing (see p4target/backends/python.py)."""
from __future__ import annotations

import functools

from p4target.backends.parsing import MAX_PARSER_STATES, Parsing
from p4target.backends.python_module import PyModule
from p4target.backends.python_primitives import PyPrimitives
from p4target.backends.python_runtime import _extract, _packed
from p4target.backends.python_values import PyValues
from p4target.lowered import model as m


class PyParsing(Parsing):
    """Parse states, header codecs, checksums and the deparser as Python."""

    def __init__(self, o: PyModule, v: PyValues, s: PyPrimitives):
        super().__init__(o, v, s)
        self.o: PyModule = o
        self.v: PyValues = v
        self.s: PyPrimitives = s
        self.labels: dict[str, str] = {}  # parse state -> its function
        self.codecs_printed: set[str] = set()

    def extractor(self, t: m.HeaderType) -> str:
        """The function filling a header of type `t` from the packet: printed straight-line for a fixed-width
        type (the parser's hot path; a loop over the fields cost 40% of a packet), the generic one for a varbit."""
        name = self.o.names("_ex", t.name, t.name)
        if name in self.o.ns or name in self.codecs_printed:
            return name
        if any(f.width is None for f in t.fields):
            fields = self.o.ns[self.o.field_specs(t.name)]
            self.o.ns[name] = functools.partial(_extract, fields)
            return name
        self.codecs_printed.add(name)
        self.o.codecs += [f"def {name}(F, b, data, o, vl, too_short):"]
        self.o.codecs += ["    " + line for line in self.extract_lines(t, "b", "too_short")] + ["    return o"]
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
        name = self.o.names("_em", t.name, t.name)
        if name in self.o.ns or name in self.codecs_printed:
            return name
        if any(f.width is None for f in t.fields):
            self.o.ns[name] = functools.partial(_packed, self.o.ns[self.o.field_specs(t.name)])
            return name
        self.codecs_printed.add(name)
        self.o.codecs += [f"def {name}(F, b):", f"    return {self.packed_code(t, 'b')}"]
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
        too_short = self.o.error_code("PacketTooShort")
        if isinstance(target, m.HeaderRef):
            t = self.o.L.header_type(target.name)
            b = str(self.o.L.base[target.name])
        elif isinstance(target, m.StackRef):
            t = self.o.L.types[self.o.L.stack_type[target.name]]
            nxt = self.o.L.next_index[target.name]
            size = len(self.o.L.stacks[target.name])
            self.o.emit(f"if F[{nxt}] >= {size}: raise _Reject({self.o.error_code('StackOutOfBounds')}, o)", ind)
            self.o.emit(f"_b = {self.o.stack_bases(target.name)}[F[{nxt}]]; F[{nxt}] += 1", ind)
            self.o.emit(f"o = {self.extractor(t)}(F, _b, data, o, {vl}, {too_short})", ind)
            return
        elif isinstance(target, m.UnionStackField):  # the member of the stack's next union
            k, t = self.union_stack_member(target)
            nxt = self.o.L.next_index[target.stack]
            size = len(self.o.L.union_stacks[target.stack])
            self.o.emit(f"if F[{nxt}] >= {size}: raise _Reject({self.o.error_code('StackOutOfBounds')}, o)", ind)
            members = self.v.union_members(m.Expr("dereference_union_stack", m.UnionStackRef(target.stack),
                                                m.Expr("size_stack", None, m.UnionStackRef(target.stack))))
            others = [b for j, b in enumerate(members) if j != k]
            self.o.emit(f"_b = {members[k]}; _others = ({''.join(f'{b}, ' for b in others)}); F[{nxt}] += 1", ind)
            self.o.emit(f"o = {self.extractor(t)}(F, _b, data, o, {vl}, {too_short})", ind)
            self.o.emit("for _o in _others: F[_o] = False", ind)  # the union's other members, as BMv2
            return
        else:
            raise self.o.fail(f"cannot extract into a {type(target).__name__}")
        if t.max_length is not None and vl != "0":
            fixed = sum(f.width or 0 for f in t.fields)
            self.o.emit(f"_vl = {vl}", ind)
            self.o.emit(f"if _vl % 8: raise _Reject({self.o.error_code('ParserInvalidArgument')}, o)", ind)
            self.o.emit(f"if _vl + {fixed} > {t.max_length * 8}: raise _Reject({self.o.error_code('HeaderTooShort')}, o)",
                      ind)
            vl = "_vl"
        if all(f.width is not None for f in t.fields):  # inline: a call per header costs as much as its fields
            for line in self.extract_lines(t, b, too_short):
                self.o.emit(line, ind)
        else:
            self.o.emit(f"o = {self.extractor(t)}(F, {b}, data, o, {vl}, {too_short})", ind)
        self.s.after_valid_change(target, b, ind)

    def verify(self, cond: str, code: str, ind: int) -> None:
        self.o.emit(f"if not {cond}: raise _Reject({code}, o)", ind)

    def advance(self, amount: str, bits: bool, ind: int) -> None:
        self.o.emit(f"o += ({amount}) >> 3" if bits else f"o += {amount}", ind)
        self.o.emit(f"if o > len(data): raise _Reject({self.o.error_code('PacketTooShort')}, len(data))", ind)

    def gen_parser(self, p: m.Parser) -> None:
        self.labels = {s.name: self.o.names("ps", id(s), s.name) for s in p.parse_states}
        for s in p.parse_states:
            self.o.emit(f"def {self.labels[s.name]}(F, data, o):", 0)
            for op in s.parser_ops:
                self.parser_op(op, 1)
            self.transitions(s, 1)
        self.o.emit("def parse(F, data):", 0)
        self.o.emit(f"o = 0; s = {self.labels[p.init_state]}; n = 0", 1)
        self.o.emit("try:", 1)
        self.o.emit("while s is not None:", 2)
        self.o.emit("s, o = s(F, data, o)", 3)
        self.o.emit("n += 1", 3)
        self.o.emit(f"if n > {MAX_PARSER_STATES}: raise _Reject({self.o.error_code('ParserTimeout')}, o)", 3)
        self.o.emit("except _Reject as r:", 1)
        self.o.emit(f"if r.code is not None: F[{self.o.L.sm['parser_error']}] = r.code", 2)
        self.o.emit("return r.offset", 2)
        self.o.emit("return o", 1)

    def set_key(self, parts: list[tuple[m.Value, int, int]], ind: int) -> None:
        terms = [self.v.rv(v) if self.v.fits(v, w) else f"(({self.v.rv(v)}) & {(1 << w) - 1:#x})" for v, w, _ in parts]
        self.o.emit(f"_k = {' | '.join(f'{t} << {pos}' if pos else t for t, (_, _, pos) in zip(terms, parts))}", ind)

    def goto(self, state: str | None) -> str:
        return f"return {self.labels[state] if state else 'None'}, o"

    def case(self, value: int, mask: int | None, then: str) -> str:
        return f"if _k == {value:#x}: {then}" if mask is None else f"if _k & {mask:#x} == {value & mask:#x}: {then}"

    def reject(self, code: int) -> str:
        return f"raise _Reject({code}, o)"

    def vset_case(self, vset: str, parts: list[tuple[int, int]], then: str, ind: int) -> None:
        members = self.o.global_of("_VS", self.o.state.value_set(vset).members)
        member = "".join(f"(_k >> {pos}) & {(1 << w) - 1:#x}, " for w, pos in parts)
        self.o.emit(f"if ({member}) in {members}: {then}", ind)

    def gen_checksums(self, fname: str, verify: bool) -> bool:
        """Print the function of the verify (or update) checksums; False where there are none."""
        sums = [c for c in self.o.p.checksums if (c.verify if verify else c.update)]
        if not sums:
            return False
        self.o.emit(f"def {fname}(F):", 0)
        for c in sums:
            cond = self.v.rv(c.if_cond) if c.if_cond is not None else "True"
            self.o.emit(f"if {cond}:", 1)
            target, _ = self.v.field_lv(c.target)
            if verify:
                self.o.emit(f"if {self.v.calc(c.calculation)} != F[{target}]: F[{self.o.L.sm['checksum_error']}] = 1", 2)
            else:
                self.s.store(c.target, self.v.calc(c.calculation), 2)
        return True

    def gen_deparser(self, d: m.Deparser) -> None:
        self.o.emit("def deparse(F):", 0)
        self.o.emit("out = []", 1)
        for prim in d.primitives:
            self.s.primitive(prim, 1)
        for h in d.order:
            b = self.o.L.base[h]
            t = self.o.L.types[self.o.p.header(h).header_type]
            fixed = all(f.width is not None for f in t.fields)
            self.o.emit(f"if F[{b}]: out.append({self.packed_code(t, str(b)) if fixed else f'{self.emitter(t)}(F, {b})'})",
                      1)
        self.o.emit("return out", 1)
