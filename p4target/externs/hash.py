"""hash: a calculation over data, offset into [base, base + max) (modify_field_with_hash_based_offset)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call, fail
from p4target.frontend import ir
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.c_primitives import CPrimitives as CPrinter
    from p4target.backends.python_primitives import PyPrimitives as PyPrinter
    from p4target.lowered.from_ir.externs import Externs

from p4target.lowered.from_ir.common import hash_algorithm


@register
class Hash(Extern):
    functions = ("hash",)
    primitives = ("modify_field_with_hash_based_offset",)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        a = c.args
        calc = x.calculation(hash_algorithm(a[1]), x.v.calc_inputs(a[3], c.loc))
        x.write_via(out, a[0], lambda dst: m.Primitive("modify_field_with_hash_based_offset", [
            dst, x.v.data(a[2]), m.Named("calculation", calc), x.v.data(a[4])]))

    def check_call(self, c: Call) -> None:
        """p4c's BMv2 back end hashes a list or a struct-like value only, never a bare field."""
        data = c.args[3]
        if not isinstance(data, (ir.ListExpr, ir.StructExpr)) and not isinstance(data.type, (ir.StructLikeType, ir.TupleType)):
            raise fail("hash data: expected a struct (a list { ... } or a struct or header value)", data.loc)

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        dst, base, calc, size = ps
        h, n = pr.o.tmp(), pr.o.tmp()
        pr.o.emit(f"{h} = {pr.v.calc(pr.v.named(calc, 'calculation'))}; {n} = {pr.v.rv(size)}", ind)
        pr.store(dst, f"({pr.v.rv(base)} + ({h} % {n} if {n} else {h}))", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        dst, base, calc, size = ps
        h, n = pr.o.tmp("h"), pr.o.tmp("n")
        pr.o.emit("{", ind)
        pr.o.emit(f"i128 {h} = (i128){pr.calc(pr.v.named(calc, 'calculation'), ind + 1)}, {n} = {pr.v.rv(size)};",
                ind + 1)
        pr.store(dst, f"l_add({pr.v.rv(base)}, {n} ? {h} % {n} : {h})", ind + 1)
        pr.o.emit("}", ind)
