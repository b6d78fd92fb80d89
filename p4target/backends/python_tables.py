"""The Python printer's pipelines: a control's graph of tables and conditionals as functions returning the next
node, a node that follows one node only printed inside it (see p4target/backends/python.py)."""
from __future__ import annotations

import collections

from p4target import state as st
from p4target.backends import hashes
from p4target.backends.python_actions import PyActions
from p4target.backends.python_module import PyModule
from p4target.backends.python_primitives import PyPrimitives
from p4target.backends.python_values import PyValues
from p4target.backends.source_text import hint
from p4target.backends.vectorize import Vectorizer
from p4target.lowered import model as m

MAX_INLINE_INDENT = 40  # deeper, a node is a function of its own (Python's parser nests at most 100 blocks)


class PyTables:
    """Pipelines and their tables."""

    def __init__(self, o: PyModule, v: PyValues, s: PyPrimitives, a: PyActions, vec: Vectorizer | None):
        self.o, self.v, self.s, self.a, self.vec = o, v, s, a, vec
        self.next_maps: dict[str, tuple[dict[str, str | None], str | None]] = {}  # per table: action -> next node
        self.conditionals: dict[str, m.Conditional] = {}  # of the pipeline being printed
        self.node_fns: dict[str, str] = {}  # table or conditional -> its printed function

    def node_fn(self, name: str | None, depth: int = 3) -> str:
        """The function of the next node (printed because this asks for it); a conditional (and the conditionals
        it leads to, `depth` deep) is decided right there (a call fewer per packet each)."""
        if name is None:
            return "None"
        c = self.conditionals.get(name)
        if c is None or depth == 0:
            if name not in self.node_fns:
                self.node_fns[name] = self.nodes[name]
                self.wanted.append(name)
            return self.nodes[name]
        true, false = self.node_fn(c.true_next, depth - 1), self.node_fn(c.false_next, depth - 1)
        return f"({true} if {self.v.rv(c.expression)} else {false})"

    def successors(self, name: str) -> set[str | None]:
        """The nodes that may follow a node."""
        c = self.conditionals.get(name)
        if c is not None:
            return {c.true_next, c.false_next}
        t = self.tables[name]
        if _by_hit(t):
            return {t.next_tables.get("__HIT__"), t.next_tables.get("__MISS__")}
        return {t.next_tables.get(self.o.actions[aid].name, t.base_default_next) for aid in t.action_ids} \
            | set(t.next_tables.values()) | {t.base_default_next}

    def tail(self, name: str | None, depth: int = 3) -> bool:
        """Whether node `name` ends the control in a few fixed steps (action-less lookups, p4c's "tbl_act"
        tables): printed wherever it follows, since a copy costs less than a call per packet."""
        t = self.tables.get(name or "")
        if t is None or t.key or t.default_entry is None or not t.default_entry.action_entry_const \
                or self.o.state.tables[t.name].profile is not None or depth == 0:
            return False
        after = self.successors(t.name)
        return after == {None} or len(after) == 1 and self.tail(next(iter(after)), depth - 1)

    def dispatched(self, name: str) -> bool:
        """Whether the node after table `name` depends on the action it ran (a map of functions picks it)."""
        t = self.tables.get(name)
        return t is not None and not _by_hit(t) and len(self.successors(name)) > 1

    def continue_at(self, name: str | None, ind: int) -> None:
        """Continue at node `name`: its code right here when this is the only place it follows (and the code is
        not nested too deep), else return its function to the control's loop."""
        if name is not None and (name in self.inline or self.tail(name)) and ind < MAX_INLINE_INDENT:
            c = self.conditionals.get(name)
            if c is None:
                self.table_code(self.tables[name], ind)
                return
            self.o.emit(f"# {hint(name)}", ind)
            self.o.emit(f"if {self.v.rv(c.expression)}:", ind)
            self.continue_at(c.true_next, ind + 1)
            self.o.emit("else:", ind)
            self.continue_at(c.false_next, ind + 1)
        else:
            self.o.emit(f"return {self.node_fn(name)}", ind)

    def gen_pipeline(self, fname: str, pl: m.Pipeline) -> None:
        """A control as its graph: a node that follows one node only is printed inside it; the others are
        functions returning the next one, run by a loop (`continue_at`)."""
        self.conditionals = {c.name: c for c in pl.conditionals}
        self.tables = {t.name: t for t in pl.tables}
        self.wanted: list[str] = []  # nodes whose functions are still to print
        self.nodes = {t.name: self.o.names("tb", id(t), t.name) for t in pl.tables}
        self.nodes.update({c.name: self.o.names("cd", id(c), c.name) for c in pl.conditionals})
        preds: dict[str, list[str]] = collections.defaultdict(list)
        for name in self.nodes:
            c = self.conditionals.get(name)  # both branches of a conditional may lead to one node: it follows twice
            for succ in [c.true_next, c.false_next] if c is not None else self.successors(name):
                if succ is not None:
                    preds[succ].append(name)
        self.inline = {name for name, ps in preds.items() if len(ps) == 1 and not self.dispatched(ps[0])}
        first = self.node_fn(pl.init_table)
        while self.wanted:
            name = self.wanted.pop()
            self.o.emit(f"def {self.nodes[name]}(F):", 0)
            c = self.conditionals.get(name)
            if c is None:
                self.table_code(self.tables[name], 1)
            else:
                self.o.emit(f"return {self.node_fn(c.true_next)} if {self.v.rv(c.expression)} "
                          f"else {self.node_fn(c.false_next)}", 1)
        self.conditionals = {}
        self.o.emit(f"def {fname}(F):", 0)
        self.o.emit(f"F[{self.o.L.hidden['exit']}] = False", 1)
        self.o.emit(f"n = {first}", 1)
        self.o.emit("while n is not None:", 1)
        self.o.emit("n = n(F)", 2)

    def key_code(self, k: m.KeyElement) -> str:
        slot, mask = self.v.key_mask(k)
        if mask is None:
            return f"int(F[{slot}])"
        if isinstance(k.target, m.Field) and self.v.fits(k.target, mask.bit_length()) and mask & (mask + 1) == 0:
            return f"F[{slot}]"  # the mask keeps every value the field can hold
        return f"(F[{slot}] & {mask:#x})"

    def table_code(self, t: m.Table, ind: int) -> None:
        """A table's lookup and action call, then on to the next node (`continue_at`)."""
        obj = self.o.state.tables[t.name]
        amap = self.o.names("_AM", id(t))
        self.o.ns[amap] = {self.o.actions[aid].name: self.a.action_fn(self.o.actions[aid]) for aid in t.action_ids}  # filled
        tv = self.o.names("_T", id(t))  # with functions after exec
        self.o.ns[tv] = obj
        by_hit = _by_hit(t)
        nexts = self.successors(t.name)
        self.o.emit(f"# table {hint(t.name)}", ind)
        default = t.default_entry
        if not t.key and default is not None and default.action_entry_const and obj.profile is None:
            # a keyless table whose action nobody can change (p4c's synthesized "tbl_act"): call it directly
            action = self.o.actions[default.action_id]
            target = t.next_tables.get("__MISS__") if by_hit else t.next_tables.get(action.name, t.base_default_next)
            if not action.runtime_data and all(p.op not in ("_jump", "_jump_if_zero", "exit") for p in action.primitives):
                # straight-line, cannot exit: its primitives right here (a call fewer per packet)
                for prim in (action if self.vec is None else self.vec.reroll(action)).primitives:
                    self.s.primitive(prim, ind)
            else:
                args = "".join(f", {v}" for v in default.action_data)
                self.o.emit(f"{self.a.action_fn(action)}(F{args})", ind)
                if self.o.exited:
                    self.o.emit(f"if {self.o.exited}: return None", ind)
            self.continue_at(target, ind)
            return

        hit_next, miss_next = t.next_tables.get("__HIT__"), t.next_tables.get("__MISS__")
        if not by_hit:
            hit_next = miss_next = next(iter(nexts)) if len(nexts) == 1 else t.base_default_next
        # one way on, whether the table hit or not: the code after it is printed once, below both
        join = not self.dispatched(t.name) and hit_next == miss_next

        def leave(action: str, target: str | None, ind: int) -> None:
            if self.o.exited:
                self.o.emit(f"if {self.o.exited}: return None", ind)
            if not self.dispatched(t.name):
                self.continue_at(target, ind)
                return
            var = self.o.names("_NX", id(t))  # where to go depends on the action
            self.next_maps[var] = (t.next_tables, t.base_default_next)
            for name in nexts:
                self.node_fn(name, 0)
            self.o.emit(f"return {var}[{action}]", ind)

        if t.key:
            values = ", ".join(self.key_code(k) for k in t.key)
            self.o.emit(f"_e = {tv}.lookup(({values},))", ind)
            self.o.emit("if _e is not None:", ind)
            if t.support_timeout:
                self.o.emit("_e.last_hit = _now()", ind + 1)
            if obj.schema.direct_counter is not None:
                self.o.emit(f"_e.packets += 1; _e.bytes += F[{self.o.L.sm['packet_length']}]", ind + 1)
            if obj.schema.direct_meter is not None:
                meter = next(mt for mt in self.o.p.meter_arrays if mt.name == obj.schema.direct_meter)
                color = f"_e.meter.execute({self.s.meter_amount(meter.type)}, _now())"
                if meter.result_target is not None:
                    self.s.store(meter.result_target, color, ind + 1)
            if obj.profile is None:
                self.o.emit(f"{amap}[_e.action](F, *_e.args)", ind + 1)
            else:
                self.indirect_hit(t, obj.profile, amap, ind + 1)
            if join:
                if self.o.exited:
                    self.o.emit(f"if {self.o.exited}: return None", ind + 1)
                if obj.profile is None:
                    self.o.emit("else:", ind)
            else:
                leave("_e.action" if obj.profile is None else "_m.action", hit_next, ind + 1)
        if obj.profile is None:
            miss = ind + bool(t.key and join)
            self.o.emit(f"_d = {tv}.default", miss)
            self.o.emit(f"{amap}[_d.action](F, *_d.args)", miss)
            if join:
                if self.o.exited:
                    self.o.emit(f"if {self.o.exited}: return None", miss)
                self.continue_at(miss_next, ind)
            else:
                leave("_d.action", miss_next, ind)
        else:
            self.continue_at(miss_next if by_hit else t.base_default_next, ind)

    def indirect_hit(self, t: m.Table, profile: st.ActionProfile, amap: str, ind: int) -> None:
        pv = self.o.names("_P", id(t))
        self.o.ns[pv] = profile
        ap = next(a for pl in self.o.p.pipelines for a in pl.action_profiles if a.name == t.action_profile)
        if ap.selector is not None:
            if ap.selector.algo not in hashes.ALGORITHMS:
                raise self.o.fail(f"action selector hash {ap.selector.algo} is not supported")
            self.o.emit("if _e.group_id is not None:", ind)
            self.o.emit(f"_m = {pv}.pick(_e.group_id, _h_{ap.selector.algo}({self.v.calc_bytes(ap.selector.input)}))",
                      ind + 1)
            self.o.emit("if _m is None: return None", ind + 1)
            self.o.emit("else:", ind)
            self.o.emit(f"_m = {pv}.members[_e.member_id]", ind + 1)
        else:
            self.o.emit(f"_m = {pv}.members[_e.member_id]", ind)
        self.o.emit(f"{amap}[_m.action](F, *_m.args)", ind)


def _by_hit(t: m.Table) -> bool:
    """Whether a table goes on by hit or miss (BMv2's `__HIT__`/`__MISS__`), not by the action it ran."""
    return "__HIT__" in t.next_tables or "__MISS__" in t.next_tables
