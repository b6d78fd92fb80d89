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
least significant first (p4target/native/store/words.py splits and joins the control plane's values the
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

The printer is parts, each one concern, composed here (`_Printer`): the program's ids and arrays
(c_module.py), values (c_values.py), primitives (c_primitives.py), the parser and deparser
(c_parser.py), actions (c_actions.py) and pipelines (c_tables.py); each part is given the parts it
prints through. This file prints the checksums and the descriptor's prelude.
"""
from __future__ import annotations

from p4target.backends.c_actions import CActions
from p4target.backends.c_module import MAX_BITS, CModule, CProgram, value_set_cells
from p4target.backends.c_parser import CParsing
from p4target.backends.c_primitives import CPrimitives
from p4target.backends.c_tables import CTables
from p4target.backends.c_values import CValues
from p4target.backends.source_text import c_string, check_source
from p4target.lowered import model as m

_SM_FIELDS = ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "enq_qdepth",
              "deq_qdepth", "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
              "parser_error", "checksum_error")
_HIDDEN_C = ("clone_session", "clone_type", "clone_fl", "resubmit", "recirculate", "truncate")


class _Printer:
    """Lowered Program -> C source and the ids the control plane addresses it by: the parts of one printing."""

    def __init__(self, p: m.Program):
        self.o = CModule(p)
        self.v = CValues(self.o)
        self.s = CPrimitives(self.o, self.v)
        self.ps = CParsing(self.o, self.v, self.s)
        self.a = CActions(self.o, self.s)
        self.t = CTables(self.o, self.v, self.s, self.a)

    def generate(self) -> CProgram:
        for a in self.o.p.actions:
            self.a.gen_action(a)
        self.ps.gen_parser(self.o.p.parsers[0])
        pipelines = {pl.name: pl for pl in self.o.p.pipelines}
        for fname, name in (("g_ingress", "ingress"), ("g_egress", "egress")):
            if name in pipelines:
                self.t.gen_pipeline(fname, pipelines[name])
            else:
                self.o.emit(f"static void {fname}(pk_t *p) {{ (void)p; }}", 0)
        self.gen_checksums("g_verify", verify=True)
        self.gen_checksums("g_compute", verify=False)
        hdr_max = self.ps.gen_deparser(self.o.p.deparsers[0])
        self.o.cp.source = "\n".join([self.prelude(hdr_max), *self.o.extern_code.values(), *self.o.out, "DEFINE_PROGRAM();", ""])
        check_source(self.o.cp.source, self.o.p.source)
        return self.o.cp

    def gen_checksums(self, fname: str, verify: bool) -> None:
        """Print the function of the verify (or update) checksums."""
        self.o.ctx = "node"
        self.o.emit(f"static void {fname}(pk_t *p) {{", 0)
        self.o.emit("u64 *F = p->F; (void)F;", 1)
        for c in self.o.p.checksums:
            if not (c.verify if verify else c.update):
                continue
            self.o.emit(f"if ({self.v.rv(c.if_cond) if c.if_cond is not None else '1'}) {{", 1)
            self.o.check(2)
            value = self.s.calc(c.calculation, 2)
            if verify:
                target, ftype = self.v.field_lv(c.target)
                self.o.emit(f"if ((i128){value} != {self.v.read(target, ftype)}) F[{self.o.L.sm['checksum_error']}] = 1;", 2)
            else:
                self.s.store(c.target, value, 2)
            self.o.emit("}", 1)
        self.o.emit("}", 0)

    def prelude(self, hdr_max: int) -> str:
        """The descriptor's constants (DEFINE_PROGRAM in engine/program.h), the initial frame, stack arrays."""
        L = self.o.L
        init = []
        for v in L.initial:
            init.append("NONE64" if v is None else f"{int(v) if not isinstance(v, bytes) else 0}ULL")
        lines = [f"#define W_WORDS {self.o.w_words}", '#include "lowered.h"', f"#define NSLOTS {len(L.initial)}",
                 f"#define HDR_MAX {hdr_max}",
                 f"#define NTABLES {len(self.o.cp.tables)}", f"#define NREGS {len(self.o.cp.registers)}",
                 f"#define NCOUNTERS {len(self.o.cp.counters)}", f"#define NMETERS {len(self.o.cp.meters)}",
                 f"#define NLOOPS {len(self.o.jump_limits)}",
                 f"#define META_FIRST {L.meta_range[0]}", f"#define META_END {L.meta_range[1]}"]
        lines += [f"#define SM_{name.upper()} {L.sm.get(name, -1)}" for name in _SM_FIELDS]
        lines += [f"#define H_{name.upper()} {L.hidden[name]}" for name in _HIDDEN_C]
        lines.append(f"static const int SM_ALL[] = {{{', '.join(str(s) for s in L.sm.values())}}};")
        lines.append(f"#define SM_COUNT {len(L.sm)}")
        lines.append(f"static const u64 INIT[NSLOTS] = {{{', '.join(init)}}};")
        lines.append("static const int FL_EMPTY[1] = {0};")
        field_lists = {fl.id: [slot for f in fl.elements for slot in self.o.field_slots(f)] for fl in self.o.p.field_lists}
        for idx, slots in sorted(field_lists.items()):
            lines.append(f"static const int FL_{idx}[] = {{{', '.join(map(str, slots)) or '0'}}};")
        lines.append("static const int *field_list(u64 idx, int *n) {")
        lines.append("    switch (idx) {")
        for idx, slots in sorted(field_lists.items()):
            lines.append(f"    case {idx}: *n = {len(slots)}; return FL_{idx};")
        lines.append("    default: *n = 0; return FL_EMPTY;")
        lines.append("    }")
        lines.append("}")
        regs = [r.size * -(-r.bitwidth // MAX_BITS) for r in self.o.p.register_arrays] + self.o.extern_cells + \
            [value_set_cells(vs.max_size, self.o.vset_keys[vs.name]) for vs in self.o.p.parse_vsets]
        counters = list(self.o.counter_size.values())
        meters = [mt.size for mt in self.o.meters.values()]
        for name, sizes in (("REG_SIZE", regs), ("COUNTER_SIZE", counters), ("METER_SIZE", meters)):
            lines.append(f"static const u64 {name}[] = {{{', '.join(map(str, sizes or [0]))}}};")
        nkeys = [sum(len(self.t.key_codes(k)) for k in t.key) for pl in self.o.p.pipelines for t in pl.tables]
        lines.append(f"static const int TABLE_KEYS[] = {{{', '.join(map(str, nkeys or [0]))}}};")
        lines.append(f"static const char *const JUMP_LIMITS[] = {{{', '.join(map(c_string, self.o.jump_limits)) or '0'}}};")
        for arr, bases in self.o.stack_arrays.items():
            lines.append(f"static const u32 {arr}[] = {{{', '.join(map(str, bases))}}};")
        lines.append("static u32 g_parse(pk_t *p);")
        lines.append("static u32 g_deparse(pk_t *p, u8 *out);")
        lines += [f"static void {fname}(pk_t *p);" for fname in ("g_verify", "g_ingress", "g_egress", "g_compute")]
        lines += [f"static void {self.a.action_fn(a)}(pk_t *p, const u64 *A);" for a in self.o.p.actions]
        lines += [f"static int {self.t.table_fn(t)}(pk_t *p);" for pl in self.o.p.pipelines for t in pl.tables]
        return "\n".join(lines)


def generate_c(program: m.Program) -> CProgram:
    """The C for lowered `program` (raises Unsupported naming the first construct the native engine lacks)."""
    return _Printer(program).generate()
