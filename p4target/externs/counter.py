"""counter and direct_counter: packets and bytes per index (count), or per table entry (counted on a hit)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4target import state as st
from p4target.externs.base import Call, Extern, bound_index, register
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.p4info import COUNTER, DIRECT_COUNTER

if TYPE_CHECKING:
    from p4target.backends.c import _Printer as CPrinter
    from p4target.backends.python import _Printer as PyPrinter
    from p4target.lowered.from_ir.externs import Externs
    from p4target.p4info import _P4InfoBuilder as P4InfoBuilder

UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}  # P4Info's CounterSpec.Unit


@register
class Counter(Extern):
    types = ("counter",)
    primitives = ("count",)
    p4info_prefix = COUNTER

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternMethodCall)
        if c.method != "count":
            super().lower(x, c, out)
        out.append(m.Primitive("count", [m.Named("counter_array", x.instance_name(c)), x.v.data(c.args[0])]))

    def instance(self, p: m.Program, inst: ir.ExternInstance) -> None:
        p.counter_arrays.append(m.CounterArray(inst.control_plane_name, len(p.counter_arrays), inst.size or 0, False,
                                               None, inst.kind or "packets_and_bytes"))

    def p4info(self, b: P4InfoBuilder, info: Any, inst: ir.ExternInstance) -> Any:
        msg = info.counters.add(size=inst.size or 0)
        msg.spec.unit = msg.spec.Unit.Value(UNITS[str(inst.kind)])
        return msg

    def schema(self, p: m.Program, schema: st.ProgramSchema) -> None:
        for c in p.counter_arrays:
            if not (c.is_direct and c.binding):
                schema.counters[c.name] = st.CounterSchema(c.name, c.size, c.type)

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        cnt = pr.state.counters[pr.named(ps[0], "counter_array")]
        i = bound_index(pr, ps[1], ind)
        pr.emit(f"if {i} < {cnt.schema.size}: {pr.global_of('_CP', cnt.packets)}[{i}] += 1; "
                f"{pr.global_of('_CB', cnt.bytes)}[{i}] += F[{pr.L.sm['packet_length']}]", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        name = pr.named(ps[0], "counter_array")
        cid, i = pr.cp.counters[name], pr.tmp("i")
        pr.emit("{{ {} {} = {};".format(*pr.index(ps[1], i)), ind)
        pr.emit(f"if ({i} >= 0 && {i} < {pr.counter_size[name]}) {{ p->E->cpk[{cid}][(u64){i}]++; "
                f"p->E->cby[{cid}][(u64){i}] += F[{pr.L.sm['packet_length']}]; }} }}", ind + 1)


@register
class DirectCounter(Extern):
    """Counted by its table on every hit (the back ends' table code); count() itself does nothing."""

    types = ("direct_counter",)
    p4info_prefix = DIRECT_COUNTER

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        pass

    def p4info(self, b: P4InfoBuilder, info: Any, inst: ir.ExternInstance) -> Any:
        msg = info.direct_counters.add(direct_table_id=b.direct_table_id(inst))
        msg.spec.unit = msg.spec.Unit.Value(UNITS[str(inst.kind)])
        return msg

    def schema(self, p: m.Program, schema: st.ProgramSchema) -> None:
        for c in p.counter_arrays:
            if c.is_direct and c.binding:
                schema.direct_counters[c.name] = st.DirectCounterSchema(c.name, c.binding, c.type)
