"""The C printer's primitives: assignments, header and stack operations, hashes, logging, checks and an
action's jumps printed as C statements (an extern's primitives: its module, handed this part)."""
from __future__ import annotations

from p4target.backends.c_module import MAX_BITS, CModule
from p4target.backends.c_values import CValues
from p4target.backends.primitives import Primitives
from p4target.backends.source_text import c_string, identifier
from p4target.extern_registry import Extern
from p4target.lowered import model as m

_ALGOS = {"crc16": "crc16", "crc16_custom": "crc16", "crc32": "crc32", "crc32_custom": "crc32", "csum16": "csum16",
          "xor16": "xor16", "identity": "identity"}


class CPrimitives(Primitives):
    """Primitives printed as C statements; each leaves as its context says when it set p->rc (CModule.check)."""

    NOT_SET, NO_FIELD_LIST, CLONE = "NONE64", "NO_FIELD_LIST", {"I2E": "CLONE_I2E", "E2E": "CLONE_E2E"}

    def __init__(self, o: CModule, v: CValues):
        super().__init__(o, v)
        self.o: CModule = o
        self.v: CValues = v

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        """Write `code` into a field, truncated to its width (a signed field keeps its bit pattern)."""
        slot, _, width = self.v.target(dst)
        if width > MAX_BITS:  # the i128 value in the field's words, sign-extended past 128 bits, the top one masked
            v, words = self.o.tmp("v"), -(-width // MAX_BITS)
            parts = [f"(u64){v}", f"(u64)({v} >> 64)"] + [f"(u64)({v} >> 127)"] * (words - 2)
            top = width - MAX_BITS * (words - 1)
            parts[-1] += f" & {(1 << top) - 1:#x}ULL" if top < MAX_BITS else ""
            self.o.emit(f"{{ i128 {v} = {code}; {' '.join(f'F[{slot} + {k}] = {c};' for k, c in enumerate(parts))} }}",
                      ind)
        else:
            mask = f" & {(1 << width) - 1:#x}ULL" if width < 64 else ""
            self.o.emit(f"F[{slot}] = (u64)({code}){mask};", ind)
        self.o.check(ind)

    def primitive(self, prim: m.Primitive, ind: int) -> None:
        super().primitive(prim, ind)
        self.o.check(ind)

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        slot, _, width = self.v.target(dst)
        if width > MAX_BITS and (isinstance(src, m.Field) or isinstance(src, m.Expr) and src.op == "access_field"):
            s, stype = self.v.field_lv(src)
            if stype is not None and stype.width == width:  # a wide field moved: its chunks copied
                self.copy(slot, s, -(-width // MAX_BITS), ind)
                return
        if width > 2 * MAX_BITS:
            self.o.emit(f"w_store(&F[{slot}], {-(-width // MAX_BITS)}, {width}, {self.v.wide_rv(src)});", ind)
            self.o.check(ind)
            return
        self.store(dst, self.v.rv(src), ind)

    p_modify_field = p_assign

    def extern_primitive(self, ext: Extern, op: str, ps: list[m.Value], ind: int) -> None:
        if ext.c_source is not None:
            self.o.extern_code.setdefault(ext.c_source, ext.c_source.read_text())
        ext.c(self, op, ps, ind)

    def bind(self, code: str, ind: int) -> str:
        name = self.o.tmp("b")
        self.o.emit(f"u64 {name} = {code};", ind)
        return name

    def log(self, msg: str, values: list[str], ind: int) -> None:
        v = self.o.tmp("L")
        self.o.emit(f"{{ const u64 {v}[] = {{{', '.join(f'(u64){x}' for x in values) or '0'}}};", ind)
        fmt = msg.encode("utf-8", "surrogatepass")  # its length: a NUL in it is text too
        self.o.emit(f"push_log(p->E, {c_string(fmt)}, {len(fmt)}, {v}, {len(values)}); }}", ind + 1)

    def copy(self, dst: str, src: str, n: int, ind: int) -> None:
        self.o.emit(f"memmove(&F[{dst}], &F[{src}], {n * 8});", ind)

    def invalidate_if_valid(self, base: str, others: list[int], ind: int) -> None:
        self.o.emit(f"if (F[{base}]) {{ " + " ".join(f"F[{o}] = 0;" for o in others) + " }", ind)

    def add_header(self, base: str, n: int, ind: int) -> str:
        b = self.bind(base, ind)
        self.o.check(ind)
        self.o.emit(f"if (!F[{b}]) {{ memset(&F[{b}], 0, {n * 8}); F[{b}] = 1; }}", ind)
        return b

    def _stack_shift(self, ps: list[m.Value], ind: int, sign: str) -> None:
        stack, count = ps
        assert isinstance(stack, m.StackRef)
        headers = self.o.L.stacks[stack.name]
        arr = self.o.header_stack(stack.name)
        self.o.emit(f"l_shift_stack(F, {arr}, {len(headers)}, {self.o.L.size[headers[0]]}, {sign}{self.v.rv(count)}, "
                  f"&F[{self.o.L.next_index[stack.name]}]);", ind)

    def p_push(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, "")

    def p_pop(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, "-")

    def p_exit(self, ps: list[m.Value], ind: int) -> None:
        self.o.emit("p->rc = RC_EXIT; return;", ind)

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        self.o.emit(f"if (!{cond}) {{ p->rc = RC_ERR; p->msg = {c_string(what + ' failed' + self.o.where())}; }}", ind)
        self.o.may_fail = True

    def meter_amount(self, kind: str) -> str:
        return "1.0" if kind == "packets" else f"(double)F[{self.o.L.sm['packet_length']}]"

    def calc(self, name: str, ind: int) -> str:
        """Print the packing of calculation `name`'s inputs; a C expression for its hash (u64)."""
        c = self.o.calcs.get(name)
        if c is None:
            raise self.o.fail(f"unknown calculation {name}")
        return self.hash_of(c.algo, c.input, ind)

    def hash_of(self, algo_name: str, inputs: list[m.Value], ind: int) -> str:
        """Print the packing of a hash's inputs (a calculation's, an action selector's); a C expression for it."""
        algo = _ALGOS.get(algo_name)
        if algo is None:
            raise self.o.fail(f"hash algorithm {algo_name}")
        buf, nb = self.o.tmp("hb"), self.o.tmp("nb")
        parts: list[tuple[str, str, int | None]] = []  # (value, width, valid slot or None)
        payload = False
        most = 0
        for v in inputs:
            if isinstance(v, m.Field):
                slot, ftype = self.o.L.field_slot(v)
                hb = None if self.o.p.header(v.header).metadata else self.o.L.base[v.header]
                t = self.o.L.header_type(v.header)
                if ftype is not None and (ftype.width is None or ftype.width > MAX_BITS):
                    parts += self.chunk_parts(v.header, ftype, slot, hb)
                    most += (t.max_length or 0) * 8 if ftype.width is None else ftype.width
                else:
                    width = 1 if ftype is None else (ftype.width or 0)
                    parts.append((f"(u64){self.v.rv(v)}", str(width), hb))
                    most += width
            elif isinstance(v, m.Const):
                width = v.width if v.width is not None else max(v.value.bit_length(), 1)
                value = v.value & ((1 << width) - 1)
                for lo in range(0, width, MAX_BITS)[::-1]:
                    w = min(MAX_BITS, width - lo)
                    parts.append((f"{(value >> lo) & ((1 << w) - 1):#x}ULL", str(w), None))
                most += width
            elif isinstance(v, m.HeaderRef):
                b = self.o.L.base[v.name]
                t = self.o.L.header_type(v.name)
                for off, f in zip(self.o.L.offsets[t.name], t.fields):
                    if f.width is not None:
                        parts += self.chunk_parts(v.name, f, b + off, b)
                        most += f.width
            elif isinstance(v, m.Payload):
                payload = True
                break
            else:
                raise self.o.fail(f"a calculation cannot take a {type(v).__name__}")
        self.o.emit(f"u8 {buf}[{most // 8 + 2}] = {{0}}; u32 {nb} = 0;", ind)
        guards = {valid for _, _, valid in parts}
        if len(guards) == 1 and all(bits.isdigit() for _, bits, _ in parts):  # bits at fixed places
            (guard,) = guards
            puts, pos = [], 0
            for code, bits, _ in parts:
                puts.append(f"putbits({buf}, {pos}, {code}, {bits});")
                pos += int(bits)
            self.o.emit(" ".join(puts) + f" {nb} = {pos};" if guard is None else
                      f"if (F[{guard}]) {{ {' '.join(puts)} {nb} = {pos}; }}", ind)
        else:
            for code, bits, guard in parts:
                put = f"putbits({buf}, {nb}, {code}, {bits}); {nb} += {bits};"
                self.o.emit(put if guard is None else f"if (F[{guard}]) {{ {put} }}", ind)
        rest = "p->data + p->poff, p->len - p->poff" if payload else "NULL, 0"
        return f"hash_{algo}({buf}, ({nb} + 7) / 8, {rest})"

    def chunk_parts(self, header: str, f: m.FieldType, slot: int, valid: int | None) -> list[tuple[str, str, int | None]]:
        """A field's (value, width, valid slot) parts of a calculation's input, most significant first."""
        t = self.o.L.header_type(header)
        n = self.o.L.chunks(t, f)
        if f.width is None:  # a varbit: its current length
            vl = f"(int)F[{self.o.L.base[header] + self.o.L.offsets[t.name][-1]}]"
            return [(f"F[{slot + i}]", f"l_cw({vl}, {i})" if n > 1 else vl, valid) for i in reversed(range(n))]
        return [(f"F[{slot + i}]", str(min(MAX_BITS, f.width - MAX_BITS * i)), valid) for i in reversed(range(n))]

    def set_slots(self, assignments: list[tuple[int | str, str]], ind: int) -> None:
        self.o.emit(" ".join(f"F[{slot}] = (u64)({value});" for slot, value in assignments), ind)

    def label(self, index: int, ind: int) -> int:
        self.o.emit(f"L{index}: ;", ind)
        return ind + 1

    def jump(self, cond: str | None, target: m.Value, ind: int) -> None:
        if not isinstance(target, m.Const):
            raise self.o.fail("a jump to a computed place")
        self.o.emit(f"{'' if cond is None else f'if (!{cond}) '}goto {identifier(f'L{target.value}')};", ind)
        self.o.check(ind)

    def jump_back(self, a: m.Action, cond: str | None, target: m.Value, ind: int) -> None:
        if not isinstance(target, m.Const):
            raise self.o.fail("a jump to a computed place")
        loop = len(self.o.jump_limits) - 1  # gen_action numbered this action's loops
        self.o.emit(f"{'' if cond is None else f'if (!{cond}) '}{{ if (++nback > MAX_BACKWARD_JUMPS) {{ "
                    f"l_jump_limit(p, {loop}, JUMP_LIMITS[{loop}]); return; }} goto {identifier(f'L{target.value}')}; }}",
                    ind)
        self.o.check(ind)
