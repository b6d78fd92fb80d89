"""The lowered form printed as Python: the readable reference engine for p4c's BMv2 JSON.

Every packet is one list `F` of slots laid out by `p4target.backends.layout` (shared with the
C back end). Values are Python ints of unbounded precision, as BMv2's are: a value is
truncated to a field's width when it is written into the field, so an unsigned field's slot
always holds a value within its width (emitters and checksums do not mask it again).

The printed module has the functions `p4target.pipeline.Pipeline` calls: parse(F, data),
verify(F), ingress(F), egress(F), compute(F) and deparse(F). A control is its graph of
tables and conditionals: functions returning the next one (None at the end), each holding
the nodes that follow it alone (`_Printer.gen_pipeline`).
"""
from __future__ import annotations

import collections
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4target import state as st
from p4target.backends import hashes
from p4target.backends.layout import Unsupported
from p4target.backends.python_parser import PyParsing
from p4target.backends.python_runtime import _constant
from p4target.backends.source_text import check_source, hint
from p4target.backends.vectorize import VECTOR_OP
from p4target.externs.checksum import python_checksums
from p4target.lowered import model as m

MAX_INLINE_INDENT = 40  # deeper, a node is a function of its own (Python's parser nests at most 100 blocks)


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


class _Printer(PyParsing):
    """Lowered Program -> a loaded Python module bound to a State."""

    # -- actions

    def action_fn(self, a: m.Action) -> str:
        return self.names("ac", a.id, a.name)

    def gen_action(self, a: m.Action) -> None:
        if self.vectorizer is not None:
            a = self.vectorizer.reroll(a)
        args = "".join(f", a{i}" for i in range(len(a.runtime_data)))
        self.param_widths = [width for _, width in a.runtime_data]
        self.emit(f"def {self.action_fn(a)}(F{args}):", 0)
        # p4c lowers `if` inside an action to jumps; printed back as if/else where they nest as an `if` does
        printed = len(self.out)
        self.dead = self.dead_stores(a.primitives)
        done = self.structured(a.primitives, 0, len(a.primitives), 1)
        self.dead = set()
        if done:
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
            elif i not in self.dead:
                self.primitive(prim, ind)
            i += 1
        return True

    def dead_stores(self, prims: list[m.Primitive]) -> set[int]:
        """Indexes of field assignments that the primitives after them, before any jump, overwrite before they
        read the field (the lowering's zeroing of locals an action sets next): left out of the printed code."""
        effects = [self.slot_effects(prim) for prim in prims]
        dead = set()
        for i, effect in enumerate(effects):
            if effect is None or prims[i].op == VECTOR_OP:
                continue
            (slot,) = effect[1]
            for later in effects[i + 1:]:
                if later is None or slot in later[0]:
                    break
                if slot in later[1]:
                    dead.add(i)
                    break
        return dead

    def slot_effects(self, prim: m.Primitive) -> tuple[set[int], set[int]] | None:
        """(slots read, slots written first) of an assignment, register read or vector run; None for the rest."""
        if prim.op == VECTOR_OP:
            assert self.vectorizer is not None and isinstance(prim.parameters[0], m.Const)
            run = self.vectorizer.runs[prim.parameters[0].value]
            written, reads = run.written - set(run.reductions), m.field_reads(run.prims)
        elif prim.op in ("assign", "modify_field", "register_read") and isinstance(prim.parameters[0], m.Field):
            written, reads = {self.L.field_slot(prim.parameters[0])[0]}, m.field_reads(prim)
        else:
            return None
        if any(f.field == "*" for f in reads):
            return None  # a whole header: its slots are not told apart here
        read = {self.L.field_slot(f)[0] for f in reads}
        return (read - written if prim.op == VECTOR_OP else read), written

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
        return f"({true} if {self.rv(c.expression)} else {false})"

    def successors(self, name: str) -> set[str | None]:
        """The nodes that may follow a node."""
        c = self.conditionals.get(name)
        if c is not None:
            return {c.true_next, c.false_next}
        t = self.tables[name]
        if _by_hit(t):
            return {t.next_tables.get("__HIT__"), t.next_tables.get("__MISS__")}
        return {t.next_tables.get(self.actions[aid].name, t.base_default_next) for aid in t.action_ids} \
            | set(t.next_tables.values()) | {t.base_default_next}

    def tail(self, name: str | None, depth: int = 3) -> bool:
        """Whether node `name` ends the control in a few fixed steps (action-less lookups, p4c's "tbl_act"
        tables): printed wherever it follows, since a copy costs less than a call per packet."""
        t = self.tables.get(name or "")
        if t is None or t.key or t.default_entry is None or not t.default_entry.action_entry_const \
                or self.state.tables[t.name].profile is not None or depth == 0:
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
            self.emit(f"# {hint(name)}", ind)
            self.emit(f"if {self.rv(c.expression)}:", ind)
            self.continue_at(c.true_next, ind + 1)
            self.emit("else:", ind)
            self.continue_at(c.false_next, ind + 1)
        else:
            self.emit(f"return {self.node_fn(name)}", ind)

    def gen_pipeline(self, fname: str, pl: m.Pipeline) -> None:
        """A control as its graph: a node that follows one node only is printed inside it; the others are
        functions returning the next one, run by a loop (`continue_at`)."""
        self.conditionals = {c.name: c for c in pl.conditionals}
        self.tables = {t.name: t for t in pl.tables}
        self.wanted: list[str] = []  # nodes whose functions are still to print
        self.nodes = {t.name: self.names("tb", id(t), t.name) for t in pl.tables}
        self.nodes.update({c.name: self.names("cd", id(c), c.name) for c in pl.conditionals})
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
            self.emit(f"def {self.nodes[name]}(F):", 0)
            c = self.conditionals.get(name)
            if c is None:
                self.table_code(self.tables[name], 1)
            else:
                self.emit(f"return {self.node_fn(c.true_next)} if {self.rv(c.expression)} "
                          f"else {self.node_fn(c.false_next)}", 1)
        self.conditionals = {}
        self.emit(f"def {fname}(F):", 0)
        self.emit(f"F[{self.L.hidden['exit']}] = False", 1)
        self.emit(f"n = {first}", 1)
        self.emit("while n is not None:", 1)
        self.emit("n = n(F)", 2)

    def key_code(self, k: m.KeyElement) -> str:
        slot, mask = self.key_mask(k)
        if mask is None:
            return f"int(F[{slot}])"
        if isinstance(k.target, m.Field) and self.fits(k.target, mask.bit_length()) and mask & (mask + 1) == 0:
            return f"F[{slot}]"  # the mask keeps every value the field can hold
        return f"(F[{slot}] & {mask:#x})"

    def table_code(self, t: m.Table, ind: int) -> None:
        """A table's lookup and action call, then on to the next node (`continue_at`)."""
        obj = self.state.tables[t.name]
        amap = self.names("_AM", id(t))
        self.ns[amap] = {self.actions[aid].name: self.action_fn(self.actions[aid]) for aid in t.action_ids}  # filled
        tv = self.names("_T", id(t))  # with functions after exec
        self.ns[tv] = obj
        by_hit = _by_hit(t)
        nexts = self.successors(t.name)
        self.emit(f"# table {hint(t.name)}", ind)
        default = t.default_entry
        if not t.key and default is not None and default.action_entry_const and obj.profile is None:
            # a keyless table whose action nobody can change (p4c's synthesized "tbl_act"): call it directly
            action = self.actions[default.action_id]
            target = t.next_tables.get("__MISS__") if by_hit else t.next_tables.get(action.name, t.base_default_next)
            if not action.runtime_data and all(p.op not in ("_jump", "_jump_if_zero", "exit") for p in action.primitives):
                # straight-line, cannot exit: its primitives right here (a call fewer per packet)
                for prim in (action if self.vectorizer is None else self.vectorizer.reroll(action)).primitives:
                    self.primitive(prim, ind)
            else:
                args = "".join(f", {v}" for v in default.action_data)
                self.emit(f"{self.action_fn(action)}(F{args})", ind)
                if self.exited:
                    self.emit(f"if {self.exited}: return None", ind)
            self.continue_at(target, ind)
            return

        hit_next, miss_next = t.next_tables.get("__HIT__"), t.next_tables.get("__MISS__")
        if not by_hit:
            hit_next = miss_next = next(iter(nexts)) if len(nexts) == 1 else t.base_default_next
        # one way on, whether the table hit or not: the code after it is printed once, below both
        join = not self.dispatched(t.name) and hit_next == miss_next

        def leave(action: str, target: str | None, ind: int) -> None:
            if self.exited:
                self.emit(f"if {self.exited}: return None", ind)
            if not self.dispatched(t.name):
                self.continue_at(target, ind)
                return
            var = self.names("_NX", id(t))  # where to go depends on the action
            self.next_maps[var] = (t.next_tables, t.base_default_next)
            for name in nexts:
                self.node_fn(name, 0)
            self.emit(f"return {var}[{action}]", ind)

        if t.key:
            values = ", ".join(self.key_code(k) for k in t.key)
            self.emit(f"_e = {tv}.lookup(({values},))", ind)
            self.emit("if _e is not None:", ind)
            if t.support_timeout:
                self.emit("_e.last_hit = _now()", ind + 1)
            if obj.schema.direct_counter is not None:
                self.emit(f"_e.packets += 1; _e.bytes += F[{self.L.sm['packet_length']}]", ind + 1)
            if obj.schema.direct_meter is not None:
                meter = next(mt for mt in self.p.meter_arrays if mt.name == obj.schema.direct_meter)
                color = f"_e.meter.execute({self.meter_amount(meter.type)}, _now())"
                if meter.result_target is not None:
                    self.store(meter.result_target, color, ind + 1)
            if obj.profile is None:
                self.emit(f"{amap}[_e.action](F, *_e.args)", ind + 1)
            else:
                self.indirect_hit(t, obj.profile, amap, ind + 1)
            if join:
                if self.exited:
                    self.emit(f"if {self.exited}: return None", ind + 1)
                if obj.profile is None:
                    self.emit("else:", ind)
            else:
                leave("_e.action" if obj.profile is None else "_m.action", hit_next, ind + 1)
        if obj.profile is None:
            miss = ind + bool(t.key and join)
            self.emit(f"_d = {tv}.default", miss)
            self.emit(f"{amap}[_d.action](F, *_d.args)", miss)
            if join:
                if self.exited:
                    self.emit(f"if {self.exited}: return None", miss)
                self.continue_at(miss_next, ind)
            else:
                leave("_d.action", miss_next, ind)
        else:
            self.continue_at(miss_next if by_hit else t.base_default_next, ind)

    def indirect_hit(self, t: m.Table, profile: st.ActionProfile, amap: str, ind: int) -> None:
        pv = self.names("_P", id(t))
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

    def compile(self) -> Compiled:
        for a in self.p.actions:
            self.gen_action(a)
        self.gen_parser(self.p.parsers[0])
        pipelines = {pl.name: pl for pl in self.p.pipelines}
        empty = set()
        for fname in ("ingress", "egress"):
            if fname in pipelines and (fname == "ingress" or pipelines[fname].init_table is not None):
                self.gen_pipeline(fname, pipelines[fname])
            else:
                empty.add(fname)
        if not python_checksums(self, "verify", verify=True):
            empty.add("verify")
        if not python_checksums(self, "compute", verify=False):
            empty.add("compute")
        self.gen_deparser(self.p.deparsers[0])
        source = "\n".join(self.codecs + self.out) + "\n"
        check_source(source, self.p.source)
        exec(compile(source, f"<p4 {self.p.source}>", "exec"), self.ns)  # noqa: S102 - our own generated code
        for key in list(self.ns):
            if key.startswith("_AM"):
                self.ns[key] = {name: self.ns[fn] for name, fn in self.ns[key].items()}
        node_names = {name: self.ns[fn] for name, fn in self.node_fns.items()}
        for var, (targets, fallback) in self.next_maps.items():  # action -> next node, as functions
            fallback_node = node_names.get(fallback) if fallback else None
            self.ns[var] = collections.defaultdict(functools.partial(_constant, fallback_node),
                                                   {a: node_names[n] if n else None for a, n in targets.items()})
        field_lists = {fl.id: [self.L.field_slot(f)[0] for f in fl.elements] for fl in self.p.field_lists}
        return Compiled(source, self.ns, self.L.initial, self.L.sm, self.L.hidden, field_lists,
                        self.L.meta_range, empty)


def _by_hit(t: m.Table) -> bool:
    """Whether a table goes on by hit or miss (BMv2's `__HIT__`/`__MISS__`), not by the action it ran."""
    return "__HIT__" in t.next_tables or "__MISS__" in t.next_tables


def _target(prim: m.Primitive, k: int) -> int:
    """The primitive index a jump's parameter k names."""
    target = prim.parameters[k]
    if not isinstance(target, m.Const):
        raise Unsupported(f"a {prim.op} whose target is not a constant")
    return target.value




def compile_program(program: m.Program, state: st.State, rng: random.Random, vectorize: bool = True) -> Compiled:
    """Print `program` as Python bound to `state` and load it (P4Error for what it cannot run); `vectorize`:
    numpy code for unrolled lane runs (off only to compare with plain code)."""
    return _Printer(program, state, rng, vectorize).compile()

