"""meter and direct_meter: a colour per index (execute_meter), or per table entry (read on a hit)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from p4target import state as st
from p4target.extern_registry import Extern, register
from p4target.externs.base import Call, bound_index
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.native.binding import Engine
from p4target.native.store.cells import NativeMeterArray
from p4target.p4info import DIRECT_METER, METER

if TYPE_CHECKING:
    from p4target.backends.c_module import CProgram
    from p4target.backends.c_primitives import CPrimitives as CPrinter
    from p4target.backends.python_primitives import PyPrimitives as PyPrinter
    from p4target.lowered.from_ir.externs import Externs
    from p4target.p4info import _P4InfoBuilder as P4InfoBuilder
    from p4target.runtime.translate import Translator


@register
class Meter(Extern):
    types = ("meter",)
    primitives = ("execute_meter",)
    p4info_prefix = METER
    p4runtime_entity = "meter_entry"

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternMethodCall)
        if c.method != "execute_meter":
            super().lower(x, c, out)
        name, a = x.instance_name(c), c.args
        x.write_via(out, a[1], lambda dst: m.Primitive("execute_meter", [
            m.Named("meter_array", name), x.v.data(a[0]), dst]))

    def instance(self, p: m.Program, inst: ir.ExternInstance) -> None:
        p.meter_arrays.append(m.MeterArray(inst.control_plane_name, len(p.meter_arrays), inst.size or 0,
                                           inst.kind or "bytes", 2, False, None, None))

    def p4info(self, b: P4InfoBuilder, info: Any, inst: ir.ExternInstance) -> Any:
        msg = info.meters.add(size=inst.size or 0)
        msg.spec.unit = msg.spec.Unit.Value(str(inst.kind).upper())
        return msg

    def schema(self, p: m.Program, schema: st.ProgramSchema) -> None:
        for mt in p.meter_arrays:
            if not (mt.is_direct and mt.binding):
                schema.meters[mt.name] = st.MeterSchema(mt.name, mt.size, mt.type)

    def storage(self, entry: st.MeterSchema) -> st.MeterArray:
        return st.MeterArray(entry)

    def native_storage(self, entry: st.MeterSchema, engine: Engine, ids: CProgram) -> NativeMeterArray:
        return NativeMeterArray(entry, engine, ids.meters[entry.name])

    def p4runtime_write(self, tr: Translator, update_type: int, entry: Any) -> None:
        from p4target.runtime.codec import meter_config_in
        from p4target.runtime.errors import unimplemented

        meter, name = tr.cells_array("meters", entry.meter_id, update_type)
        if entry.HasField("counter_data"):
            raise unimplemented(f"meter {name}: meter counters are not supported")
        config = meter_config_in(entry.config, f"meter {name}") if entry.HasField("config") else None
        tr.cells_write(meter, entry, lambda index: tr.state.meter_set(name, index, config))

    def p4runtime_read(self, tr: Translator, entry: Any) -> Iterator[Any]:
        from finsy.proto import p4r

        from p4target.runtime.codec import meter_config_out
        from p4target.runtime.errors import state_call

        for meter, index in tr.cells_read("meters", entry.meter_id, entry):
            out = p4r.MeterEntry(meter_id=meter.preamble.id, index=p4r.Index(index=index))
            config = state_call(tr.state.meter_get, meter.preamble.name, index)
            if config is not None:
                out.config.CopyFrom(meter_config_out(config))
            yield p4r.Entity(meter_entry=out)

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        meter = pr.o.state.meters[pr.v.named(ps[0], "meter_array")]
        i = bound_index(pr, ps[1], ind)
        amount = pr.meter_amount(meter.schema.type)
        pr.store(ps[2], f"({pr.o.global_of('_M', meter.cells)}[{i}].execute({amount}, _now()) "
                        f"if {i} < {meter.schema.size} else 0)", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        name = pr.v.named(ps[0], "meter_array")
        meter = pr.o.meters[name]
        i = pr.o.tmp("i")
        pr.o.emit("{{ {} {} = {};".format(*pr.v.index(ps[1], i)), ind)
        pr.store(ps[2], f"({i} >= 0 && {i} < {meter.size} ? meter_exec(&p->E->meters[{pr.o.cp.meters[name]}]"
                        f"[(u64){i}], {pr.meter_amount(meter.type)}) : 0)", ind + 1)
        pr.o.emit("}", ind)


@register
class DirectMeter(Extern):
    """Executed by its table on every hit, its colour written where read() names (the back ends' table code)."""

    types = ("direct_meter",)
    p4info_prefix = DIRECT_METER
    p4runtime_entity = "direct_meter_entry"

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        pass

    def p4info(self, b: P4InfoBuilder, info: Any, inst: ir.ExternInstance) -> Any:
        msg = info.direct_meters.add(direct_table_id=b.direct_table_id(inst))
        msg.spec.unit = msg.spec.Unit.Value(str(inst.kind).upper())
        return msg

    def schema(self, p: m.Program, schema: st.ProgramSchema) -> None:
        for mt in p.meter_arrays:
            if mt.is_direct and mt.binding:
                schema.direct_meters[mt.name] = st.DirectMeterSchema(mt.name, mt.binding, mt.type)

    def p4runtime_write(self, tr: Translator, update_type: int, entry: Any) -> None:
        from finsy.proto import p4r

        from p4target.runtime.codec import meter_config_in
        from p4target.runtime.errors import invalid, state_call, unimplemented

        table = tr.by_id("tables", entry.table_entry.table_id)
        direct = tr.info.direct_meter_of(table.preamble.id)
        if direct is None:
            raise invalid(f"table {table.preamble.name} has no direct meter")
        if update_type != p4r.Update.MODIFY:
            raise invalid(f"table {table.preamble.name}: direct meter cells can only be modified")
        if entry.table_entry.is_default_action:
            raise invalid(f"table {table.preamble.name}: the default entry has no direct meter cell")
        if entry.HasField("counter_data"):
            raise unimplemented(f"table {table.preamble.name}: meter counters are not supported")
        match = tr.match_in(table, entry.table_entry.match)
        what = f"direct meter {direct.preamble.name}"
        config = meter_config_in(entry.config, what) if entry.HasField("config") else None
        state_call(tr.state.direct_meter_set, direct.preamble.name, match, entry.table_entry.priority, config)

    def p4runtime_read(self, tr: Translator, entry: Any) -> Iterator[Any]:
        from finsy.proto import p4r

        from p4target.runtime.codec import meter_config_out

        for table, stored in tr.direct_entries_read(entry.table_entry, "direct meter", tr.info.direct_meter_of,
                                                    tr.info.p4info.direct_meters):
            out = p4r.DirectMeterEntry(table_entry=tr.entry_out(table, stored, False))
            out.table_entry.ClearField("action")
            out.table_entry.ClearField("idle_timeout_ns")
            cell = stored.meter
            assert cell is not None, "entries of a table with a direct meter each have a cell"
            if cell.config is not None:
                out.config.CopyFrom(meter_config_out(cell.config))
            yield p4r.Entity(direct_meter_entry=out)
