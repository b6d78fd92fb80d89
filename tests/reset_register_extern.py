"""A test-only stateful extern (tests/test_extern_reset_register.py), added the registry's way: reset_register<T>, a
register whose cell the data plane's read() also resets to zero; the control plane sees its instances as registers
(P4Info, P4Runtime, BMv2's Thrift API, STF), read and written as they are. Its storage is the register's: the Python
engine's cells and the native engine's (cells the C printer numbers through `cells`), and its engine code is one C
file (reset_register.c) its printed reads call. This module and that file are all it takes; the program declares it
(v1model.p4 does not), and the target refuses the program ("... is not lowered") until the test imports this."""
from __future__ import annotations

from pathlib import Path

from p4target import state as st
from p4target.backends.c_module import CProgram
from p4target.backends.c_primitives import CPrimitives as CPrinter
from p4target.backends.python_primitives import PyPrimitives as PyPrinter
from p4target.extern_registry import Extern, register
from p4target.externs.base import Call, bound_index
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import type_width
from p4target.lowered.from_ir.externs import Externs
from p4target.native.binding import Engine
from p4target.native.store.cells import NativeRegisterArray
from p4target.native.store.words import words
from p4target.p4info import REGISTER, _P4InfoBuilder

TYPE = "reset_register"
READ, WRITE = "_reset_register_read", "_reset_register_write"  # BMv2's JSON names an extern's method `_TYPE_METHOD`


@register
class ResetRegister(Extern):
    types = (TYPE,)
    primitives = (READ, WRITE)
    p4info_prefix = REGISTER  # the control plane addresses its instances as registers
    c_source = Path(__file__).with_name("reset_register.c")

    # -- lowering: a method call -> its primitive on the instance (an extern instance of the lowered form)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternMethodCall)
        cells, a = m.Named("extern", x.instance_name(c)), c.args
        if c.method == "read":
            x.write_via(out, a[0], lambda dst: m.Primitive(READ, [cells, dst, x.v.data(a[1])]))
        elif c.method == "write":
            out.append(m.Primitive(WRITE, [cells, x.v.data(a[0]), x.v.data(a[1])]))
        else:
            super().lower(x, c, out)

    def instance(self, p: m.Program, inst: ir.ExternInstance) -> None:
        p.extern_instances.append(m.ExternInstance(inst.control_plane_name, len(p.extern_instances), TYPE, {
            "size": m.Const(inst.size or 0), "bitwidth": m.Const(type_width(inst.type_args[0]))}))

    # -- what the control plane addresses, and the cells that keep it

    def schema(self, p: m.Program, schema: st.ProgramSchema) -> None:
        for size, width, name in _instances(p):
            schema.registers[name] = st.RegisterSchema(name, width, size, extern=TYPE)

    def storage(self, entry: st.RegisterSchema) -> st.RegisterArray:
        return st.RegisterArray(entry)

    def native_storage(self, entry: st.RegisterSchema, engine: Engine, ids: CProgram) -> NativeRegisterArray:
        return NativeRegisterArray(entry, engine.register(ids.registers[entry.name], entry.size * words(entry.bitwidth)))

    def cells(self, p: m.Program) -> list[tuple[str, int]]:
        return [(name, size * words(width)) for size, width, name in _instances(p)]

    def p4info(self, b: _P4InfoBuilder, info, inst: ir.ExternInstance):
        msg = info.registers.add(size=inst.size or 0)
        b.type_spec(msg.type_spec, inst.type_args[0], info)
        return msg

    # -- the printed code: a read takes the cell's value and leaves zero

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        cells = pr.o.state.registers[pr.v.named(ps[0], "extern")]
        values, size, width = pr.o.global_of("_R", cells.values), cells.schema.size, cells.schema.bitwidth
        i = bound_index(pr, ps[2] if op == READ else ps[1], ind)
        if op == WRITE:
            pr.o.emit(f"if {i} < {size}: {values}[{i}] = ({pr.v.rv(ps[2])}) & {(1 << width) - 1:#x}", ind)
            return
        pr.store(ps[1], f"({values}[{i}] if {i} < {size} else 0)", ind)
        pr.o.emit(f"if {i} < {size}: {values}[{i}] = 0", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        name = pr.v.named(ps[0], "extern")
        size, width = next((s, w) for s, w, n in _instances(pr.o.p) if n == name)
        cells, i = f"p->E->reg[{pr.o.cp.registers[name]}]", pr.o.tmp("i")
        pr.o.emit("{{ {} {} = {};".format(*pr.v.index(ps[2] if op == READ else ps[1], i)), ind)
        if op == WRITE:
            pr.o.emit(f"rr_write({cells}, {i}, {size}, (u64)({pr.v.rv(ps[2])}), {width}); }}", ind + 1)
            return
        pr.store(ps[1], f"rr_take({cells}, {i}, {size})", ind + 1)
        pr.o.emit("}", ind)


def _instances(p: m.Program) -> list[tuple[int, int, str]]:
    """(size, cell width, name) of every reset_register of lowered program `p`."""
    out = []
    for e in p.extern_instances:
        if e.type == TYPE:
            size, width = e.attribute_values["size"], e.attribute_values["bitwidth"]
            assert isinstance(size, m.Const) and isinstance(width, m.Const)
            out.append((size.value, width.value, e.name))
    return out
