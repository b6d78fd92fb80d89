"""The C printer's parser and deparser printing (see p4target/backends/c.py)."""
from __future__ import annotations

from p4target.backends.c_module import MAX_BITS, CModule, lookaheads
from p4target.backends.c_primitives import CPrimitives
from p4target.backends.c_values import CValues, u128_literal
from p4target.backends.parsing import MAX_PARSER_STATES, Parsing
from p4target.lowered import model as m


class CParsing(Parsing):
    """Parse states and the deparser as C."""

    def __init__(self, o: CModule, v: CValues, s: CPrimitives):
        super().__init__(o, v, s)
        self.o: CModule = o
        self.v: CValues = v
        self.s: CPrimitives = s
        self.labels: dict[str, str] = {}  # parse state -> its label
        self.key_words = 0  # the current transition key's u64 words when wider than 128 bits (set_key)

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
        too_short = self.o.error_code("PacketTooShort")
        fields, nbytes = self.field_layout(t, vl)
        self.o.emit(f"if ((u64)o + {nbytes} > p->len) {{ rcode = {too_short}; goto reject; }}", ind)
        offsets = self.o.L.offsets[t.name]
        for k, off, w in fields:
            n = self.o.L.chunks(t, t.fields[k])
            for i in range(n):
                get = f"l_getchunk(p->data + o, {off}, {w}, {i})" if n > 1 else f"getbits(p->data + o, {off}, {w})"
                self.o.emit(f"F[{b} + {offsets[k] + i}] = {get};", ind)
        if t.max_length is not None:
            self.o.emit(f"F[{b} + {offsets[-1]}] = {vl};", ind)
        self.o.emit(f"F[{b}] = 1; o += {nbytes};", ind)

    def extract(self, target: m.Value, vl: str, ind: int) -> None:
        oob = self.o.error_code("StackOutOfBounds")
        self.o.emit("{", ind)
        ind += 1
        if isinstance(target, m.HeaderRef):
            t = self.o.L.header_type(target.name)
            b = str(self.o.L.base[target.name])
            if t.max_length is not None and vl != "0":
                fixed = sum(f.width or 0 for f in t.fields)
                self.o.emit(f"i128 vl = {vl};", ind)
                self.o.check(ind)
                self.o.emit(f"if (vl % 8) {{ rcode = {self.o.error_code('ParserInvalidArgument')}; goto reject; }}", ind)
                self.o.emit(f"if (vl + {fixed} > {t.max_length * 8}) {{ rcode = {self.o.error_code('HeaderTooShort')}; "
                          "goto reject; }", ind)
                vl = "(int)vl"
            self.extract_into(b, t, vl, ind)
            self.s.after_valid_change(target, b, ind)
        elif isinstance(target, m.StackRef):
            t = self.o.L.types[self.o.L.stack_type[target.name]]
            nxt = self.o.L.next_index[target.name]
            headers = self.o.L.stacks[target.name]
            arr = self.o.header_stack(target.name)
            self.o.emit(f"if (F[{nxt}] >= {len(headers)}) {{ rcode = {oob}; goto reject; }}", ind)
            self.o.emit(f"u64 b = {arr}[F[{nxt}]];", ind)
            self.extract_into("b", t, vl, ind)
            self.o.emit(f"F[{nxt}] += 1;", ind)
        elif isinstance(target, m.UnionStackField):  # the member of the stack's next union
            k, t = self.union_stack_member(target)
            nxt = self.o.L.next_index[target.stack]
            unions = self.o.L.union_stacks[target.stack]
            arr = self.o.union_member_stack(target.stack, k)
            self.o.emit(f"if (F[{nxt}] >= {len(unions)}) {{ rcode = {oob}; goto reject; }}", ind)
            self.o.emit(f"u64 b = {arr}[F[{nxt}]];", ind)
            self.extract_into("b", t, vl, ind)
            for j in range(len(self.o.L.union_stack_type[target.stack].headers)):
                if j != k:  # the union's other members, as BMv2
                    self.o.emit(f"F[{self.o.union_member_stack(target.stack, j)}[F[{nxt}]]] = 0;", ind)
            self.o.emit(f"F[{nxt}] += 1;", ind)
        else:
            raise self.o.fail(f"extract into a {type(target).__name__}")
        self.o.emit("}", ind - 1)

    def parser_op(self, op: m.ParserOp, ind: int) -> None:
        ends = [look.offset + look.width for look in lookaheads(op.parameters)]
        if ends:  # a lookahead past the packet's end rejects before the operation writes a bit (as BMv2)
            self.o.emit(f"if (((u64)o * 8 + {max(ends)} + 7) / 8 > p->len) {{ "
                      f"rcode = {self.o.error_code('PacketTooShort')}; goto reject; }}", ind)
        super().parser_op(op, ind)
        self.o.check(ind)

    def verify(self, cond: str, code: str, ind: int) -> None:
        self.o.emit(f"if (!{cond}) {{ rcode = (u64){code}; goto reject; }}", ind)

    def advance(self, amount: str, bits: bool, ind: int) -> None:
        self.o.emit(f"{{ i128 no = (i128)o + ({amount}{' >> 3' if bits else ''});", ind)
        self.o.check(ind + 1)
        self.o.emit(f"if (no > p->len) {{ o = p->len; rcode = {self.o.error_code('PacketTooShort')}; goto reject; }}",
                  ind + 1)
        self.o.emit("o = (u32)no; }", ind + 1)

    def gen_parser(self, p: m.Parser) -> None:
        self.o.ctx = "parser"
        self.labels = labels = {s.name: self.o.names("s", id(s), s.name) for s in p.parse_states}
        self.o.emit("static u32 g_parse(pk_t *p) {", 0)
        self.o.emit("u64 *F = p->F; u32 o = 0; u64 rcode = NO_ERROR_CODE; int steps = 0; (void)F;", 1)
        self.o.emit(f"goto {labels[p.init_state]};", 1)
        timeout = self.o.error_code("ParserTimeout")
        for s in p.parse_states:
            self.o.emit(f"{labels[s.name]}:", 0)
            self.o.emit(f"if (++steps > {MAX_PARSER_STATES}) {{ rcode = {timeout}; goto reject; }}", 1)
            self.o.emit("{", 1)
            for op in s.parser_ops:
                self.parser_op(op, 2)
            self.transitions(s, 2)
            self.o.emit("}", 1)
        # a reject sets parser_error unless told not to
        self.o.out += ["accept: return o;", "reject:", f"    if (rcode != NO_ERROR_CODE) F[{self.o.L.sm['parser_error']}] = rcode;",
                     "    return o;", "}"]

    def set_key(self, parts: list[tuple[m.Value, int, int]], ind: int) -> None:
        """A key of up to 128 bits as one u128 `k`; a wider one as `key_words` u64 words k[], least significant first."""
        total = parts[0][2] + (parts[0][1] + 7) // 8 * 8
        self.key_words = -(-total // MAX_BITS) if total > 2 * MAX_BITS else 0
        if not self.key_words:
            code = [f"((((u128)({self.v.rv(v)})) & {u128_literal((1 << w) - 1)}) << {pos})" for v, w, pos in parts]
            self.o.emit(f"u128 k = {' | '.join(code)};", ind)
            self.o.check(ind)
            return
        self.o.emit(f"u64 k[{self.key_words}] = {{0}};", ind)
        for v, w, pos in parts:
            if w <= MAX_BITS:
                self.o.emit(f"l_key_put(k, {pos}, (u64)({self.v.rv(v)}), {w});", ind)
                continue
            puts = " ".join(f"l_key_put(k, {pos + c}, kp.w[{c // MAX_BITS}], {min(MAX_BITS, w - c)});"
                            for c in range(0, w, MAX_BITS))
            self.o.emit(f"{{ wint kp = {self.v.wide_rv(v)}; {puts} }}", ind)
        self.o.check(ind)

    def key_bits(self, pos: int, width: int) -> str:
        """The key's `width` (at most 64) bits from bit `pos` (a u64)."""
        if self.key_words:
            return f"l_key_get(k, {pos}, {width})"
        return f"(u64)((k >> {pos}) & {u128_literal((1 << width) - 1)})"

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
            return f"if (k == {u128_literal(value)}) {then}"
        return f"if ((k & {u128_literal(mask)}) == {u128_literal(value & mask)}) {then}"

    def reject(self, code: int) -> str:
        return f"rcode = {code}; goto reject;"

    def vset_case(self, vset: str, parts: list[tuple[int, int]], then: str, ind: int) -> None:
        # each part as its 64-bit chunks, least significant first (value_set_cells)
        chunks = [(min(MAX_BITS, w - c), pos + c) for w, pos in parts for c in range(0, max(w, 1), MAX_BITS)]
        n = len(chunks)
        same = " && ".join(f"vs[1 + m * {n} + {j}] == {self.key_bits(pos, w)}" for j, (w, pos) in enumerate(chunks))
        self.o.emit(f"{{ const u64 *vs = p->E->reg[{self.o.cp.value_sets[vset]}]; "
                  f"for (u64 m = 0; m < vs[0]; m++) if ({same}) {then} }}", ind)

    def gen_deparser(self, d: m.Deparser) -> int:
        """Print g_deparse; the most bytes it writes."""
        self.o.ctx = "deparser"
        self.o.emit("static u32 g_deparse(pk_t *p, u8 *out) {", 0)
        self.o.emit("u64 *F = p->F; u32 ob = 0; (void)F;", 1)
        for prim in d.primitives:
            self.s.primitive(prim, 1)
        most = 0
        for h in d.order:
            b = self.o.L.base[h]
            t = self.o.L.header_type(h)
            offsets = self.o.L.offsets[t.name]
            vl = f"(int)F[{b + offsets[-1]}]" if t.max_length is not None else "0"
            fields, nbytes = self.field_layout(t, vl)
            most += t.max_length if t.max_length is not None else int(nbytes)
            self.o.emit(f"if (F[{b}]) {{", 1)
            self.o.emit(f"memset(out + ob, 0, {nbytes});", 2)
            for k, off, w in fields:
                n = self.o.L.chunks(t, t.fields[k])
                for i in range(n):
                    slot = b + offsets[k] + i
                    self.o.emit(f"l_putchunk(out + ob, {off}, F[{slot}], {w}, {i});" if n > 1 else
                              f"putbits(out + ob, {off}, F[{slot}], {w});", 2)
            self.o.emit(f"ob += {nbytes};", 2)
            self.o.emit("}", 1)
        self.o.emit("return ob;", 1)
        self.o.emit("}", 0)
        return most
