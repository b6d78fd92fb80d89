"""The lowered form printed as Python: the readable reference engine for p4c's BMv2 JSON.

Every packet is one list `F` of slots laid out by `p4target.backends.layout` (shared with the
C back end). Values are Python ints of unbounded precision, as BMv2's are: a value is
truncated to a field's width when it is written into the field, so an unsigned field's slot
always holds a value within its width (emitters and checksums do not mask it again).

The printed module has the functions `p4target.pipeline.Pipeline` calls: parse(F, data),
verify(F), ingress(F), egress(F), compute(F) and deparse(F). A control is its graph of
tables and conditionals: functions returning the next one (None at the end), each holding
the nodes that follow it alone (python_tables.py).

The printer is parts, each one concern, composed here (`_Printer`): the module's namespace
(python_module.py), values (python_values.py), primitives (python_primitives.py), the parser,
checksums and deparser (python_parser.py), the lane runs rerolled (vectorize.py), actions
(python_actions.py) and pipelines (python_tables.py); each part is given the parts it prints through.
"""
from __future__ import annotations

import collections
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4target import state as st
from p4target.backends.python_actions import PyActions
from p4target.backends.python_module import PyModule
from p4target.backends.python_parser import PyParsing
from p4target.backends.python_primitives import PyPrimitives
from p4target.backends.python_runtime import _constant
from p4target.backends.python_tables import PyTables
from p4target.backends.python_values import PyValues
from p4target.backends.source_text import check_source
from p4target.backends.vectorize import VECTOR_OP, Vectorizer
from p4target.lowered import model as m


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


class _Printer:
    """Lowered Program -> a loaded Python module bound to a State: the parts of one printing."""

    def __init__(self, p: m.Program, state: st.State, rng: random.Random, vectorize: bool):
        self.o = PyModule(p, state, rng)
        self.v = PyValues(self.o)
        self.s = PyPrimitives(self.o, self.v)
        self.ps = PyParsing(self.o, self.v, self.s)
        self.vec = Vectorizer(self.o, self.v, self.s) if vectorize else None
        if self.vec is not None:
            vec = self.vec
            self.s.pseudo[VECTOR_OP] = lambda ps, ind: vec.emit(_const(ps[0]), ind)
        self.a = PyActions(self.o, self.v, self.s, self.vec)
        self.t = PyTables(self.o, self.v, self.s, self.a, self.vec)

    def compile(self) -> Compiled:
        o = self.o
        for a in o.p.actions:
            self.a.gen_action(a)
        self.ps.gen_parser(o.p.parsers[0])
        pipelines = {pl.name: pl for pl in o.p.pipelines}
        empty = set()
        for fname in ("ingress", "egress"):
            if fname in pipelines and (fname == "ingress" or pipelines[fname].init_table is not None):
                self.t.gen_pipeline(fname, pipelines[fname])
            else:
                empty.add(fname)
        if not self.ps.gen_checksums("verify", verify=True):
            empty.add("verify")
        if not self.ps.gen_checksums("compute", verify=False):
            empty.add("compute")
        self.ps.gen_deparser(o.p.deparsers[0])
        source = "\n".join(o.codecs + o.out) + "\n"
        check_source(source, o.p.source)
        exec(compile(source, f"<p4 {o.p.source}>", "exec"), o.ns)  # noqa: S102 - our own generated code
        for key in list(o.ns):
            if key.startswith("_AM"):
                o.ns[key] = {name: o.ns[fn] for name, fn in o.ns[key].items()}
        node_names = {name: o.ns[fn] for name, fn in self.t.node_fns.items()}
        for var, (targets, fallback) in self.t.next_maps.items():  # action -> next node, as functions
            fallback_node = node_names.get(fallback) if fallback else None
            o.ns[var] = collections.defaultdict(functools.partial(_constant, fallback_node),
                                                {a: node_names[n] if n else None for a, n in targets.items()})
        field_lists = {fl.id: [o.L.field_slot(f)[0] for f in fl.elements] for fl in o.p.field_lists}
        return Compiled(source, o.ns, o.L.initial, o.L.sm, o.L.hidden, field_lists, o.L.meta_range, empty)


def _const(v: m.Value) -> int:
    """The run number of a `_vector` pseudo-primitive (see p4target.backends.vectorize)."""
    assert isinstance(v, m.Const)
    return v.value


def compile_program(program: m.Program, state: st.State, rng: random.Random, vectorize: bool = True) -> Compiled:
    """Print `program` as Python bound to `state` and load it (P4Error for what it cannot run); `vectorize`:
    numpy code for unrolled lane runs (off only to compare with plain code)."""
    return _Printer(program, state, rng, vectorize).compile()
