"""The C printer's pipelines: a control as a loop over its nodes (tables and conditionals), each table a function
returning the next node (see p4target/backends/c.py)."""
from __future__ import annotations

from collections.abc import Callable

from p4target.backends.c_actions import CActions
from p4target.backends.c_module import MAX_BITS, CModule
from p4target.backends.c_primitives import CPrimitives
from p4target.backends.c_values import CValues
from p4target.lowered import model as m


class CTables:
    """Pipelines and their tables."""

    def __init__(self, o: CModule, v: CValues, s: CPrimitives, a: CActions):
        self.o, self.v, self.s, self.a = o, v, s, a

    def table_fn(self, t: m.Table) -> str:
        return self.o.names("tb", id(t), t.name)

    def gen_pipeline(self, fname: str, pl: m.Pipeline) -> None:
        nodes = {t.name: i for i, t in enumerate(pl.tables)}
        nodes.update({c.name: len(pl.tables) + i for i, c in enumerate(pl.conditionals)})

        def node(name: str | None) -> int:
            return -1 if name is None else nodes[name]

        for t in pl.tables:
            self.gen_table(t, node)
        self.o.ctx = "node"
        self.o.emit(f"static void {fname}(pk_t *p) {{", 0)
        self.o.emit("u64 *F = p->F; (void)F;", 1)
        self.o.emit(f"int n = {node(pl.init_table)};", 1)
        self.o.emit("while (n >= 0) {", 1)
        self.o.emit("switch (n) {", 2)
        for t in pl.tables:
            self.o.emit(f"case {nodes[t.name]}: n = {self.table_fn(t)}(p); break;", 2)
        for c in pl.conditionals:
            self.o.emit(f"case {nodes[c.name]}: n = {self.v.rv(c.expression)} ? {node(c.true_next)} : "
                      f"{node(c.false_next)}; break;", 2)
        self.o.emit("default: return;", 2)
        self.o.emit("}", 2)
        self.o.emit("if (p->rc) return;", 2)
        self.o.may_fail = False
        self.o.emit("}", 1)
        self.o.emit("}", 0)

    def key_codes(self, k: m.KeyElement) -> list[str]:
        """The engine words of a key element: one per 64-bit chunk, least significant first."""
        slot, mask = self.v.key_mask(k)
        if mask is None:
            return [f"F[{slot}]"]
        width = self.o.L.width(k.target) if isinstance(k.target, m.Field) else MAX_BITS
        full = (1 << MAX_BITS) - 1
        return [f"(F[{slot + i}] & {(mask >> (MAX_BITS * i)) & full:#x}ULL)" for i in range(-(-width // MAX_BITS))]

    def gen_table(self, t: m.Table, node: Callable[[str | None], int]) -> None:
        self.o.ctx = "table"
        tid = self.o.cp.tables[t.name]
        self.o.emit(f"static int {self.table_fn(t)}(pk_t *p) {{", 0)
        counted = any(c.is_direct and c.binding == t.name for c in self.o.p.counter_arrays)
        keys = [c for k in t.key for c in self.key_codes(k)]
        self.o.emit("u64 *F = p->F; (void)F;", 1)
        self.o.emit(f"table_t *T = &p->E->tables[{tid}];", 1)
        if keys:
            self.o.emit(f"const u64 K[] = {{{', '.join(keys)}}};", 1)
            self.o.emit("entry_t *e = table_lookup(T, K);", 1)
        else:
            self.o.emit("entry_t *e = NULL;", 1)
        self.o.emit("int act; const u64 *A;", 1)
        self.o.emit("if (e) {", 1)
        if t.support_timeout:
            self.o.emit("e->last_hit = mono();", 2)
        if counted:
            self.o.emit(f"e->packets++; e->bytes += F[{self.o.L.sm['packet_length']}];", 2)
        meter = next((mt for mt in self.o.p.meter_arrays if mt.name == t.direct_meters), None)
        if meter is not None:
            color = f"meter_exec(&e->meter, {self.s.meter_amount(meter.type)})"
            if meter.result_target is not None:
                self.s.store(meter.result_target, color, 2)
            else:
                self.o.emit(f"(void){color};", 2)
        profile = next((ap for pl in self.o.p.pipelines for ap in pl.action_profiles if ap.name == t.action_profile), None)
        selector = profile.selector if profile is not None else None
        # a hit runs its entry's action, or with an action profile the member its entry names or its group picks by
        # the selector's hash; a miss runs the default action, with a profile nothing (as BMv2: no default action)
        if profile is None:
            self.o.emit("act = e->action; A = e->args;", 2)
            self.o.emit("} else { act = T->def_action; A = T->def_args; }", 1)
        else:
            self.o.emit("u64 h = 0;", 2)
            if selector is not None:
                self.o.emit("if (e->group >= 0) {", 2)
                self.o.emit(f"h = {self.s.hash_of(selector.algo, selector.input, 3)};", 3)
                self.o.emit("}", 2)
            self.o.emit("const member_t *M = profile_member(p->E, e, h);", 2)
            self.o.emit("act = M ? M->action : -1; A = M ? M->args : NULL;", 2)
            self.o.emit("} else { act = -1; A = NULL; }", 1)
        self.o.emit("p->act = act;", 1)
        self.o.emit("switch (act) {", 1)
        for aid in t.action_ids:
            a = self.o.actions[aid]
            self.o.emit(f"case {self.o.cp.actions[a.name]}: {self.a.action_fn(a)}(p, A); break;", 1)
        self.o.emit("default: break;", 1)
        self.o.emit("}", 1)
        self.o.emit("if (p->rc) return -1;", 1)
        if selector is not None:
            self.o.emit("if (e && act < 0) return -1; /* an empty group: the pipeline ends, as in the Python engine */", 1)
        if "__HIT__" in t.next_tables or "__MISS__" in t.next_tables:
            self.o.emit(f"return e ? {node(t.next_tables.get('__HIT__'))} : {node(t.next_tables.get('__MISS__'))};", 1)
        else:
            self.o.emit("switch (act) {", 1)
            for name, target in t.next_tables.items():
                if name in self.o.cp.actions:
                    self.o.emit(f"case {self.o.cp.actions[name]}: return {node(target)};", 1)
            self.o.emit(f"default: return {node(t.base_default_next)};", 1)
            self.o.emit("}", 1)
        self.o.emit("}", 0)
