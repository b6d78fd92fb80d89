"""counter and direct_counter: packets and bytes per index (count), or per table entry (counted on a hit)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from p4target import state as st
from p4target.externs.base import Call, Extern, bound_index, register
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.p4info import COUNTER, DIRECT_COUNTER

if TYPE_CHECKING:
    from p4target.backends.c import _Printer as CPrinter
    from p4target.backends.python_values import PyValues as PyPrinter
    from p4target.lowered.from_ir.externs import Externs
    from p4target.p4info import _P4InfoBuilder as P4InfoBuilder
    from p4target.runtime.translate import Translator

UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}  # P4Info's CounterSpec.Unit


@register
class Counter(Extern):
    types = ("counter",)
    primitives = ("count",)
    p4info_prefix = COUNTER
    p4runtime_entity = "counter_entry"

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

    def p4runtime_write(self, tr: Translator, update_type: int, entry: Any) -> None:
        counter, name = tr.cells_array("counters", entry.counter_id, update_type)
        tr.cells_write(counter, entry, lambda index: tr.state.counter_write(
            name, index, entry.data.packet_count, entry.data.byte_count))

    def p4runtime_read(self, tr: Translator, entry: Any) -> Iterator[Any]:
        from finsy.proto import p4r

        from p4target.runtime.errors import state_call

        for counter, index in tr.cells_read("counters", entry.counter_id, entry):
            packets, nbytes = state_call(tr.state.counter_read, counter.preamble.name, index)
            yield p4r.Entity(counter_entry=p4r.CounterEntry(
                counter_id=counter.preamble.id, index=p4r.Index(index=index),
                data=p4r.CounterData(packet_count=packets, byte_count=nbytes)))

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
    p4runtime_entity = "direct_counter_entry"

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

    def p4runtime_write(self, tr: Translator, update_type: int, entry: Any) -> None:
        from finsy.proto import p4r

        from p4target.runtime.errors import invalid, state_call

        table = tr.by_id("tables", entry.table_entry.table_id)
        if update_type != p4r.Update.MODIFY:
            raise invalid(f"table {table.preamble.name}: direct counter cells can only be modified")
        if tr.info.direct_counter_of(table.preamble.id) is None:
            raise invalid(f"table {table.preamble.name} has no direct counter")
        match = tr.match_in(table, entry.table_entry.match)
        counts = state_call(st.counter_values, f"table {table.preamble.name} direct counter", entry.data.packet_count,
                            entry.data.byte_count)
        stored = state_call(tr.state.table(table.preamble.name).find, match, entry.table_entry.priority)
        stored.packets, stored.bytes = counts

    def p4runtime_read(self, tr: Translator, entry: Any) -> Iterator[Any]:
        from finsy.proto import p4r

        for table, stored in tr.direct_entries_read(entry.table_entry, "direct counter", tr.info.direct_counter_of,
                                                    tr.info.p4info.direct_counters):
            out = p4r.DirectCounterEntry(table_entry=tr.entry_out(table, stored, False),
                                         data=p4r.CounterData(packet_count=stored.packets, byte_count=stored.bytes))
            out.table_entry.ClearField("action")
            yield p4r.Entity(direct_counter_entry=out)
