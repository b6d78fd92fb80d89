"""The lowered form printed as C, for the native engine: p4c's BMv2 JSON with no Python per packet.

The twin of `p4target.backends.python` (the readable reference): the same slot layout
(`p4target.backends.layout`), the same v1model flow (the engine's, engine/flow.c), printed against
engine/program.h. Slots are u64 and hold each value's bit pattern masked to its width; an expression
is computed as an i128 (engine/lowered.h): BMv2's values have infinite precision and p4c masks every
result that could grow, so 128 bits hold every intermediate value of fields up to 64 bits wide, and
`>>`, `/`, `%`, comparisons, `two_comp_mod` and the saturating casts see the same numbers as BMv2.

Fields wider than 64 bits take one slot per 64-bit chunk, least significant first
(`Layout(chunk_bits=64)`): they are extracted, emitted, copied, hashed and moved between fields of
their width at any width, and computed with (an i128) up to 127 bits. An expression that reads a
value of 128 bits or more (a field, a constant, an action parameter wider than 64 bits) is computed
in the multi-word integers of engine/wide.h (`wint`, W_WORDS words: twice the widest field and a
sign word). Table keys (a range over its words as one number), action parameters, register cells,
digest fields and parser value-set values wider than 64 bits take one engine word per 64-bit chunk,
least significant first (p4target/native/store.py splits and joins the control plane's values the
same way; a value set's members live in engine cells, `value_set_cells`, which P4Runtime's
ValueSetEntry writes fill). A parser transition key of up to 128 bits is one u128; a wider one
(fields, lookaheads, a value set's key) is an array of 64-bit words, least significant first, each
case comparing it word by word under its mask. A lookahead wider than 127 bits is read as a wint,
one 64-bit chunk at a time; a parser operation checks the packet is long enough for its lookaheads
before it writes anything, as BMv2 does. A computed value (a hash, a checksum, a meter's colour, a
random number: at most 128 bits) written to a wider field fills its low words and sign-extends into
the rest. What does not run raises `Unsupported` naming the construct (the program then runs on the
Python engine); of what p4c writes for v1model, nothing is left: only JSON with other than one parser
and one deparser.

Control flow: `exit` sets p->rc = RC_EXIT, an error (division by zero, a stack index out of range, a
failed assert) RC_ERR, and every caller returns when p->rc is set. A pipeline is a loop over its
nodes (tables and conditionals), each giving the index of the next.
"""
from __future__ import annotations

import collections
import re
from collections.abc import Callable

from p4target.backends.c_parser import CParsing
from p4target.backends.c_values import MAX_BITS, CProgram, value_set_cells
from p4target.backends.source_text import c_string, check_source, identifier
from p4target.externs.base import Extern
from p4target.externs.checksum import c_checksums
from p4target.lowered import model as m

_ALGOS = {"crc16": "crc16", "crc16_custom": "crc16", "crc32": "crc32", "crc32_custom": "crc32", "csum16": "csum16",
          "xor16": "xor16", "identity": "identity"}
_SM_FIELDS = ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "enq_qdepth",
              "deq_qdepth", "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
              "parser_error", "checksum_error")
_HIDDEN_C = ("clone_session", "clone_type", "clone_fl", "resubmit", "recirculate", "truncate")


class _Printer(CParsing):
    """Lowered Program -> C source and the ids the control plane addresses it by."""

    # -- primitives

    def primitive(self, prim: m.Primitive, ind: int) -> None:
        super().primitive(prim, ind)
        self.check(ind)

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        slot, _, width = self.target(dst)
        if width > MAX_BITS and (isinstance(src, m.Field) or isinstance(src, m.Expr) and src.op == "access_field"):
            s, stype = self.field_lv(src)
            if stype is not None and stype.width == width:  # a wide field moved: its chunks copied
                self.copy(slot, s, -(-width // MAX_BITS), ind)
                return
        if width > 2 * MAX_BITS:
            self.emit(f"w_store(&F[{slot}], {-(-width // MAX_BITS)}, {width}, {self.wide_rv(src)});", ind)
            self.check(ind)
            return
        self.store(dst, self.rv(src), ind)

    p_modify_field = p_assign

    def extern_primitive(self, ext: Extern, op: str, ps: list[m.Value], ind: int) -> None:
        ext.c(self, op, ps, ind)

    def bind(self, code: str, ind: int) -> str:
        name = self.tmp("b")
        self.emit(f"u64 {name} = {code};", ind)
        return name

    def log(self, msg: str, values: list[str], ind: int) -> None:
        v = self.tmp("L")
        self.emit(f"{{ const u64 {v}[] = {{{', '.join(f'(u64){x}' for x in values) or '0'}}};", ind)
        fmt = msg.encode("utf-8", "surrogatepass")  # its length: a NUL in it is text too
        self.emit(f"push_log(p->E, {c_string(fmt)}, {len(fmt)}, {v}, {len(values)}); }}", ind + 1)

    def copy(self, dst: str, src: str, n: int, ind: int) -> None:
        self.emit(f"memmove(&F[{dst}], &F[{src}], {n * 8});", ind)

    def invalidate_if_valid(self, base: str, others: list[int], ind: int) -> None:
        self.emit(f"if (F[{base}]) {{ " + " ".join(f"F[{o}] = 0;" for o in others) + " }", ind)

    def add_header(self, base: str, n: int, ind: int) -> str:
        b = self.bind(base, ind)
        self.check(ind)
        self.emit(f"if (!F[{b}]) {{ memset(&F[{b}], 0, {n * 8}); F[{b}] = 1; }}", ind)
        return b

    def _stack_shift(self, ps: list[m.Value], ind: int, sign: str) -> None:
        stack, count = ps
        assert isinstance(stack, m.StackRef)
        headers = self.L.stacks[stack.name]
        arr = self.header_stack(stack.name)
        self.emit(f"l_shift_stack(F, {arr}, {len(headers)}, {self.L.size[headers[0]]}, {sign}{self.rv(count)}, "
                  f"&F[{self.L.next_index[stack.name]}]);", ind)

    def p_push(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, "")

    def p_pop(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, "-")

    def p_exit(self, ps: list[m.Value], ind: int) -> None:
        self.emit("p->rc = RC_EXIT; return;", ind)

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        self.emit(f"if (!{cond}) {{ p->rc = RC_ERR; p->msg = {c_string(what + ' failed' + self.where())}; }}", ind)
        self.may_fail = True

    def meter_amount(self, kind: str) -> str:
        return "1.0" if kind == "packets" else f"(double)F[{self.L.sm['packet_length']}]"

    def calc(self, name: str, ind: int) -> str:
        """Print the packing of calculation `name`'s inputs; a C expression for its hash (u64)."""
        c = self.calcs.get(name)
        if c is None:
            raise self.fail(f"unknown calculation {name}")
        return self.hash_of(c.algo, c.input, ind)

    def hash_of(self, algo_name: str, inputs: list[m.Value], ind: int) -> str:
        """Print the packing of a hash's inputs (a calculation's, an action selector's); a C expression for it."""
        algo = _ALGOS.get(algo_name)
        if algo is None:
            raise self.fail(f"hash algorithm {algo_name}")
        buf, nb = self.tmp("hb"), self.tmp("nb")
        parts: list[tuple[str, str, int | None]] = []  # (value, width, valid slot or None)
        payload = False
        most = 0
        for v in inputs:
            if isinstance(v, m.Field):
                slot, ftype = self.L.field_slot(v)
                hb = None if self.p.header(v.header).metadata else self.L.base[v.header]
                t = self.L.header_type(v.header)
                if ftype is not None and (ftype.width is None or ftype.width > MAX_BITS):
                    parts += self.chunk_parts(v.header, ftype, slot, hb)
                    most += (t.max_length or 0) * 8 if ftype.width is None else ftype.width
                else:
                    width = 1 if ftype is None else (ftype.width or 0)
                    parts.append((f"(u64){self.rv(v)}", str(width), hb))
                    most += width
            elif isinstance(v, m.Const):
                width = v.width if v.width is not None else max(v.value.bit_length(), 1)
                value = v.value & ((1 << width) - 1)
                for lo in range(0, width, MAX_BITS)[::-1]:
                    w = min(MAX_BITS, width - lo)
                    parts.append((f"{(value >> lo) & ((1 << w) - 1):#x}ULL", str(w), None))
                most += width
            elif isinstance(v, m.HeaderRef):
                b = self.L.base[v.name]
                t = self.L.header_type(v.name)
                for off, f in zip(self.L.offsets[t.name], t.fields):
                    if f.width is not None:
                        parts += self.chunk_parts(v.name, f, b + off, b)
                        most += f.width
            elif isinstance(v, m.Payload):
                payload = True
                break
            else:
                raise self.fail(f"a calculation cannot take a {type(v).__name__}")
        self.emit(f"u8 {buf}[{most // 8 + 2}] = {{0}}; u32 {nb} = 0;", ind)
        guards = {valid for _, _, valid in parts}
        if len(guards) == 1 and all(bits.isdigit() for _, bits, _ in parts):  # bits at fixed places
            (guard,) = guards
            puts, pos = [], 0
            for code, bits, _ in parts:
                puts.append(f"putbits({buf}, {pos}, {code}, {bits});")
                pos += int(bits)
            self.emit(" ".join(puts) + f" {nb} = {pos};" if guard is None else
                      f"if (F[{guard}]) {{ {' '.join(puts)} {nb} = {pos}; }}", ind)
        else:
            for code, bits, guard in parts:
                put = f"putbits({buf}, {nb}, {code}, {bits}); {nb} += {bits};"
                self.emit(put if guard is None else f"if (F[{guard}]) {{ {put} }}", ind)
        rest = "p->data + p->poff, p->len - p->poff" if payload else "NULL, 0"
        return f"hash_{algo}({buf}, ({nb} + 7) / 8, {rest})"

    def chunk_parts(self, header: str, f: m.FieldType, slot: int, valid: int | None) -> list[tuple[str, str, int | None]]:
        """A field's (value, width, valid slot) parts of a calculation's input, most significant first."""
        t = self.L.header_type(header)
        n = self.L.chunks(t, f)
        if f.width is None:  # a varbit: its current length
            vl = f"(int)F[{self.L.base[header] + self.L.offsets[t.name][-1]}]"
            return [(f"F[{slot + i}]", f"l_cw({vl}, {i})" if n > 1 else vl, valid) for i in reversed(range(n))]
        return [(f"F[{slot + i}]", str(min(MAX_BITS, f.width - MAX_BITS * i)), valid) for i in reversed(range(n))]

    def set_slots(self, assignments: list[tuple[int | str, str]], ind: int) -> None:
        self.emit(" ".join(f"F[{slot}] = (u64)({value});" for slot, value in assignments), ind)

    # -- actions

    def action_fn(self, a: m.Action) -> str:
        return self.names("ac", a.id, a.name)

    def table_fn(self, t: m.Table) -> str:
        return self.names("tb", id(t), t.name)

    def gen_action(self, a: m.Action) -> None:
        self.ctx = "action"
        self.param_widths = [width for _, width in a.runtime_data]
        self.param_offsets = [sum(-(-w // MAX_BITS) for w in self.param_widths[:i]) for i in range(len(a.runtime_data))]
        self.emit(f"static void {self.action_fn(a)}(pk_t *p, const u64 *A) {{", 0)
        self.emit("u64 *F = p->F; (void)F; (void)A;", 1)
        at, self.reg_locals = len(self.out), set()
        self.action_body(a, 0)
        self.emit(f"L{len(a.primitives)}: ;", 0)
        self.hold_in_locals(at)
        self.out[at:at] = [f"    u64 *const R{rid} = p->E->reg[{rid}];" for rid in sorted(self.reg_locals)]
        self.emit("}", 0)

    def hold_in_locals(self, at: int) -> None:
        """In the action printed from self.out[at:], the slots it names more than once that only printed code
        names (`local_slots`) become C locals: loaded on entry, stored back on every way out. The compiler
        cannot keep a slot in a register across a register-array store (both are u64 arrays that may
        alias); a local it can: aggnet's lanes_add runs its four temporaries through 32 lanes."""
        body = "\n".join(self.out[at:])
        if '"' in body:
            return  # a string (log_msg's format) could hold text like a slot or `return;`: the text is not rewritten
        names = collections.Counter(int(n) for n in re.findall(r"(?<![&\w])F\[(\d+)\]", body))
        held = sorted(slot for slot, n in names.items() if n > 1 and slot in self.local_slots()
                      and f"&F[{slot}]" not in body)
        if not held:
            return
        store = " ".join(f"F[{slot}] = l{slot};" for slot in held)
        pattern = re.compile(r"(?<![&\w])F\[(" + "|".join(map(str, held)) + r")\]")
        self.out[at:] = [pattern.sub(r"l\1", line).replace("return;", f"{{ {store} return; }}") for line in self.out[at:]]
        self.out.insert(at, "    u64 " + ", ".join(f"l{slot} = F[{slot}]" for slot in held) + ";")
        self.emit(store, 1)

    def local_slots(self) -> set[int]:
        """Slots no engine helper reads or writes behind the printed code: user metadata of at most 64 bits
        that no calculation, field list, learn list, checksum or extern instance names, in a header never
        named whole."""
        if self._local_slots is None:
            elsewhere = m.field_reads([self.p.calculations, self.p.learn_lists, self.p.field_lists, self.p.checksums,
                                       self.p.extern_instances, self.p.meter_arrays, self.p.counter_arrays,
                                       self.p.register_arrays, self.p.field_aliases, self.p.parse_vsets])
            whole = {f.header for f in m.field_reads(self.p) if f.field == "*"}
            self._local_slots = {
                self.L.field_slot(m.Field(h.name, f.name))[0] for h in self.p.headers
                if h.metadata and h.name != "standard_metadata" and h.name not in whole
                for f in self.L.header_type(h.name).fields
                if f.width is not None and f.width <= MAX_BITS and m.Field(h.name, f.name) not in elsewhere}
        return self._local_slots

    def label(self, index: int, ind: int) -> int:
        self.emit(f"L{index}: ;", ind)
        return ind + 1

    def jump(self, cond: str | None, target: m.Value, ind: int) -> None:
        if not isinstance(target, m.Const):
            raise self.fail("a jump to a computed place")
        self.emit(f"{'' if cond is None else f'if (!{cond}) '}goto {identifier(f'L{target.value}')};", ind)
        self.check(ind)

    # -- pipelines

    def gen_pipeline(self, fname: str, pl: m.Pipeline) -> None:
        nodes = {t.name: i for i, t in enumerate(pl.tables)}
        nodes.update({c.name: len(pl.tables) + i for i, c in enumerate(pl.conditionals)})

        def node(name: str | None) -> int:
            return -1 if name is None else nodes[name]

        for t in pl.tables:
            self.gen_table(t, node)
        self.ctx = "node"
        self.emit(f"static void {fname}(pk_t *p) {{", 0)
        self.emit("u64 *F = p->F; (void)F;", 1)
        self.emit(f"int n = {node(pl.init_table)};", 1)
        self.emit("while (n >= 0) {", 1)
        self.emit("switch (n) {", 2)
        for t in pl.tables:
            self.emit(f"case {nodes[t.name]}: n = {self.table_fn(t)}(p); break;", 2)
        for c in pl.conditionals:
            self.emit(f"case {nodes[c.name]}: n = {self.rv(c.expression)} ? {node(c.true_next)} : "
                      f"{node(c.false_next)}; break;", 2)
        self.emit("default: return;", 2)
        self.emit("}", 2)
        self.emit("if (p->rc) return;", 2)
        self.may_fail = False
        self.emit("}", 1)
        self.emit("}", 0)

    def key_codes(self, k: m.KeyElement) -> list[str]:
        """The engine words of a key element: one per 64-bit chunk, least significant first."""
        slot, mask = self.key_mask(k)
        if mask is None:
            return [f"F[{slot}]"]
        width = self.L.width(k.target) if isinstance(k.target, m.Field) else MAX_BITS
        full = (1 << MAX_BITS) - 1
        return [f"(F[{slot + i}] & {(mask >> (MAX_BITS * i)) & full:#x}ULL)" for i in range(-(-width // MAX_BITS))]

    def gen_table(self, t: m.Table, node: Callable[[str | None], int]) -> None:
        self.ctx = "table"
        tid = self.cp.tables[t.name]
        self.emit(f"static int {self.table_fn(t)}(pk_t *p) {{", 0)
        counted = any(c.is_direct and c.binding == t.name for c in self.p.counter_arrays)
        keys = [c for k in t.key for c in self.key_codes(k)]
        self.emit("u64 *F = p->F; (void)F;", 1)
        self.emit(f"table_t *T = &p->E->tables[{tid}];", 1)
        if keys:
            self.emit(f"const u64 K[] = {{{', '.join(keys)}}};", 1)
            self.emit("entry_t *e = table_lookup(T, K);", 1)
        else:
            self.emit("entry_t *e = NULL;", 1)
        self.emit("int act; const u64 *A;", 1)
        self.emit("if (e) {", 1)
        if t.support_timeout:
            self.emit("e->last_hit = mono();", 2)
        if counted:
            self.emit(f"e->packets++; e->bytes += F[{self.L.sm['packet_length']}];", 2)
        meter = next((mt for mt in self.p.meter_arrays if mt.name == t.direct_meters), None)
        if meter is not None:
            color = f"meter_exec(&e->meter, {self.meter_amount(meter.type)})"
            if meter.result_target is not None:
                self.store(meter.result_target, color, 2)
            else:
                self.emit(f"(void){color};", 2)
        profile = next((ap for pl in self.p.pipelines for ap in pl.action_profiles if ap.name == t.action_profile), None)
        selector = profile.selector if profile is not None else None
        # a hit runs its entry's action, or with an action profile the member its entry names or its group picks by
        # the selector's hash; a miss runs the default action, with a profile nothing (as BMv2: no default action)
        if profile is None:
            self.emit("act = e->action; A = e->args;", 2)
            self.emit("} else { act = T->def_action; A = T->def_args; }", 1)
        else:
            self.emit("u64 h = 0;", 2)
            if selector is not None:
                self.emit("if (e->group >= 0) {", 2)
                self.emit(f"h = {self.hash_of(selector.algo, selector.input, 3)};", 3)
                self.emit("}", 2)
            self.emit("const member_t *M = profile_member(p->E, e, h);", 2)
            self.emit("act = M ? M->action : -1; A = M ? M->args : NULL;", 2)
            self.emit("} else { act = -1; A = NULL; }", 1)
        self.emit("p->act = act;", 1)
        self.emit("switch (act) {", 1)
        for aid in t.action_ids:
            a = self.actions[aid]
            self.emit(f"case {self.cp.actions[a.name]}: {self.action_fn(a)}(p, A); break;", 1)
        self.emit("default: break;", 1)
        self.emit("}", 1)
        self.emit("if (p->rc) return -1;", 1)
        if selector is not None:
            self.emit("if (e && act < 0) return -1; /* an empty group: the pipeline ends, as in the Python engine */", 1)
        if "__HIT__" in t.next_tables or "__MISS__" in t.next_tables:
            self.emit(f"return e ? {node(t.next_tables.get('__HIT__'))} : {node(t.next_tables.get('__MISS__'))};", 1)
        else:
            self.emit("switch (act) {", 1)
            for name, target in t.next_tables.items():
                if name in self.cp.actions:
                    self.emit(f"case {self.cp.actions[name]}: return {node(target)};", 1)
            self.emit(f"default: return {node(t.base_default_next)};", 1)
            self.emit("}", 1)
        self.emit("}", 0)

    # -- the whole program

    def generate(self) -> CProgram:
        for a in self.p.actions:
            self.gen_action(a)
        self.gen_parser(self.p.parsers[0])
        pipelines = {pl.name: pl for pl in self.p.pipelines}
        for fname, name in (("g_ingress", "ingress"), ("g_egress", "egress")):
            if name in pipelines:
                self.gen_pipeline(fname, pipelines[name])
            else:
                self.emit(f"static void {fname}(pk_t *p) {{ (void)p; }}", 0)
        c_checksums(self, "g_verify", verify=True)
        c_checksums(self, "g_compute", verify=False)
        hdr_max = self.gen_deparser(self.p.deparsers[0])
        self.cp.source = "\n".join([self.prelude(hdr_max), *self.out, "DEFINE_PROGRAM();", ""])
        check_source(self.cp.source, self.p.source)
        return self.cp

    def field_slots(self, f: m.Field) -> range:
        """Every slot of a field (one per 64-bit chunk)."""
        slot, ftype = self.L.field_slot(f)
        t = self.L.header_type(f.header)
        return range(slot, slot + (1 if ftype is None else self.L.chunks(t, ftype)))

    def prelude(self, hdr_max: int) -> str:
        """The descriptor's constants (DEFINE_PROGRAM in engine/program.h), the initial frame, stack arrays."""
        L = self.L
        init = []
        for v in L.initial:
            init.append("NONE64" if v is None else f"{int(v) if not isinstance(v, bytes) else 0}ULL")
        lines = [f"#define W_WORDS {self.w_words}", '#include "lowered.h"', f"#define NSLOTS {len(L.initial)}",
                 f"#define HDR_MAX {hdr_max}",
                 f"#define NTABLES {len(self.cp.tables)}", f"#define NREGS {len(self.cp.registers)}",
                 f"#define NCOUNTERS {len(self.cp.counters)}", f"#define NMETERS {len(self.cp.meters)}",
                 f"#define META_FIRST {L.meta_range[0]}", f"#define META_END {L.meta_range[1]}"]
        lines += [f"#define SM_{name.upper()} {L.sm.get(name, -1)}" for name in _SM_FIELDS]
        lines += [f"#define H_{name.upper()} {L.hidden[name]}" for name in _HIDDEN_C]
        lines.append(f"static const int SM_ALL[] = {{{', '.join(str(s) for s in L.sm.values())}}};")
        lines.append(f"#define SM_COUNT {len(L.sm)}")
        lines.append(f"static const u64 INIT[NSLOTS] = {{{', '.join(init)}}};")
        lines.append("static const int FL_EMPTY[1] = {0};")
        field_lists = {fl.id: [slot for f in fl.elements for slot in self.field_slots(f)] for fl in self.p.field_lists}
        for idx, slots in sorted(field_lists.items()):
            lines.append(f"static const int FL_{idx}[] = {{{', '.join(map(str, slots)) or '0'}}};")
        lines.append("static const int *field_list(u64 idx, int *n) {")
        lines.append("    switch (idx) {")
        for idx, slots in sorted(field_lists.items()):
            lines.append(f"    case {idx}: *n = {len(slots)}; return FL_{idx};")
        lines.append("    default: *n = 0; return FL_EMPTY;")
        lines.append("    }")
        lines.append("}")
        regs = [r.size * -(-r.bitwidth // MAX_BITS) for r in self.p.register_arrays] + \
            [value_set_cells(vs.max_size, self.vset_keys[vs.name]) for vs in self.p.parse_vsets]
        counters = list(self.counter_size.values())
        meters = [mt.size for mt in self.meters.values()]
        for name, sizes in (("REG_SIZE", regs), ("COUNTER_SIZE", counters), ("METER_SIZE", meters)):
            lines.append(f"static const u64 {name}[] = {{{', '.join(map(str, sizes or [0]))}}};")
        nkeys = [sum(len(self.key_codes(k)) for k in t.key) for pl in self.p.pipelines for t in pl.tables]
        lines.append(f"static const int TABLE_KEYS[] = {{{', '.join(map(str, nkeys or [0]))}}};")
        for arr, bases in self.stack_arrays.items():
            lines.append(f"static const u32 {arr}[] = {{{', '.join(map(str, bases))}}};")
        lines.append("static u32 g_parse(pk_t *p);")
        lines.append("static u32 g_deparse(pk_t *p, u8 *out);")
        lines += [f"static void {fname}(pk_t *p);" for fname in ("g_verify", "g_ingress", "g_egress", "g_compute")]
        lines += [f"static void {self.action_fn(a)}(pk_t *p, const u64 *A);" for a in self.p.actions]
        lines += [f"static int {self.table_fn(t)}(pk_t *p);" for pl in self.p.pipelines for t in pl.tables]
        return "\n".join(lines)


def generate_c(program: m.Program) -> CProgram:
    """The C for lowered `program` (raises Unsupported naming the first construct the native engine lacks)."""
    return _Printer(program).generate()
