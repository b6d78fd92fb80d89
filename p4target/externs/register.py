"""register<T>: an array of cells the data plane reads and writes (register_read / register_write)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from p4target import state as st
from p4target.extern_registry import Extern, register
from p4target.externs.base import Call, bound_index, fail
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import type_width
from p4target.native.binding import Engine
from p4target.native.store.cells import NativeRegisterArray
from p4target.native.store.words import words
from p4target.p4info import REGISTER

if TYPE_CHECKING:
    from p4target.backends.c_module import CProgram
    from p4target.backends.c_primitives import CPrimitives as CPrinter
    from p4target.backends.primitives import Primitives as LoweredPrinter
    from p4target.backends.python_primitives import PyPrimitives as PyPrinter
    from p4target.lowered.from_ir.externs import Externs
    from p4target.p4info import _P4InfoBuilder as P4InfoBuilder
    from p4target.runtime.translate import Translator

MAX_BITS = 64  # the C engine's word


@register
class Register(Extern):
    types = ("register",)
    primitives = ("register_read", "register_write")
    p4info_prefix = REGISTER
    p4runtime_entity = "register_entry"

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternMethodCall)
        name, a = x.instance_name(c), c.args
        if c.method == "read":
            x.write_via(out, a[0], lambda dst: m.Primitive("register_read", [
                dst, m.Named("register_array", name), x.v.data(a[1])]))
        elif c.method == "write":
            out.append(m.Primitive("register_write", [m.Named("register_array", name), x.v.data(a[0]),
                                                      x.v.data(a[1])]))
        else:
            super().lower(x, c, out)

    def instance(self, p: m.Program, inst: ir.ExternInstance) -> None:
        p.register_arrays.append(m.RegisterArray(inst.control_plane_name, len(p.register_arrays), inst.size or 0,
                                                 type_width(inst.type_args[0])))

    def p4info(self, b: P4InfoBuilder, info: Any, inst: ir.ExternInstance) -> Any:
        msg = info.registers.add(size=inst.size or 0)
        b.type_spec(msg.type_spec, inst.type_args[0], info)
        return msg

    def schema(self, p: m.Program, schema: st.ProgramSchema) -> None:
        for r in p.register_arrays:
            schema.registers[r.name] = st.RegisterSchema(r.name, r.bitwidth, r.size)

    def storage(self, entry: st.RegisterSchema) -> st.RegisterArray:
        return st.RegisterArray(entry)

    def native_storage(self, entry: st.RegisterSchema, engine: Engine, ids: CProgram) -> NativeRegisterArray:
        return NativeRegisterArray(entry, engine.register(ids.registers[entry.name], entry.size * words(entry.bitwidth)))

    def p4runtime_write(self, tr: Translator, update_type: int, entry: Any) -> None:
        from p4target.runtime import codec
        from p4target.runtime.errors import invalid

        array, name = tr.cells_array("registers", entry.register_id, update_type)
        if entry.data.WhichOneof("data") != "bitstring":
            raise invalid(f"register {name}: data must be a bitstring")
        value = codec.decode(entry.data.bitstring, codec.bitwidth(array.type_spec), f"register {name}")
        tr.cells_write(array, entry, lambda index: tr.state.register_write(name, index, value))

    def p4runtime_read(self, tr: Translator, entry: Any) -> Iterator[Any]:
        from finsy.proto import p4d, p4r

        from p4target.runtime import codec
        from p4target.runtime.errors import state_call

        for array, index in tr.cells_read("registers", entry.register_id, entry):
            value = state_call(tr.state.register_read, array.preamble.name, index)
            yield p4r.Entity(register_entry=p4r.RegisterEntry(
                register_id=array.preamble.id, index=p4r.Index(index=index),
                data=p4d.P4Data(bitstring=codec.encode(value))))

    def check_instance(self, inst: ir.ExternInstance) -> None:
        cell = inst.type_args[0]
        if not (isinstance(cell, (ir.BitsType, ir.IntType)) or isinstance(cell, ir.EnumType) and cell.underlying):
            raise fail("register: Only registers with bit or int types are currently supported", inst.loc)

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        if op != "register_read":
            raise pr.o.fail(f"primitive {op} is not supported")
        pr.p_assign([ps[0], m.RegisterCell(pr.v.named(ps[1], "register_array"), ps[2])], ind)

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        if op == "register_read":
            self.emit(pr, op, ps, ind)
            return
        reg = pr.o.state.registers[pr.v.named(ps[0], "register_array")]
        i = bound_index(pr, ps[1], ind)
        value = pr.v.rv(ps[2]) if pr.v.fits(ps[2], reg.schema.bitwidth) else \
            f"({pr.v.rv(ps[2])}) & {(1 << reg.schema.bitwidth) - 1:#x}"
        pr.o.emit(f"if {i} < {reg.schema.size}: {pr.o.global_of('_R', reg.values)}[{i}] = {value}", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        if op == "register_read":
            self.emit(pr, op, ps, ind)
            return
        name = pr.v.named(ps[0], "register_array")
        reg = pr.o.reg_size[name]
        i, words, rid = pr.o.tmp("i"), -(-reg.bitwidth // MAX_BITS), pr.o.cp.registers[name]
        mask = f" & {(1 << reg.bitwidth) - 1:#x}ULL" if reg.bitwidth < 64 else ""
        pr.o.emit("{{ {} {} = {};".format(*pr.v.index(ps[1], i)), ind)
        if words > 1:  # a wide cell: `words` engine words
            pr.o.emit(f"if ({i} >= 0 && {i} < {reg.size}) w_store(&p->E->reg[{rid}][(u64){i} * {words}], {words}, "
                    f"{reg.bitwidth}, {pr.v.wide_rv(ps[2])}); }}", ind + 1)
            return
        pr.o.emit(f"if ({i} >= 0 && {i} < {reg.size}) {pr.v.reg_cells(name)}[(u64){i}] = "
                f"(u64)({pr.v.rv(ps[2])}){mask}; }}", ind + 1)
