"""random: a uniform number in [lo, hi] (modify_field_rng_uniform; lo itself when lo > hi, as BMv2)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.c_primitives import CPrimitives as CPrinter
    from p4target.backends.python_primitives import PyPrimitives as PyPrinter
    from p4target.lowered.from_ir.externs import Externs


@register
class Random(Extern):
    functions = ("random",)
    primitives = ("modify_field_rng_uniform",)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        a = c.args
        x.write_via(out, a[0], lambda dst: m.Primitive("modify_field_rng_uniform", [
            dst, x.v.data(a[1]), x.v.data(a[2])]))

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        lo, hi = pr.o.tmp(), pr.o.tmp()
        pr.o.emit(f"{lo} = {pr.v.rv(ps[1])}; {hi} = {pr.v.rv(ps[2])}", ind)
        pr.store(ps[0], f"(_rng.randint({lo}, {hi}) if {lo} <= {hi} else {lo})", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        lo, hi = pr.o.tmp("lo"), pr.o.tmp("hi")
        pr.o.emit(f"{{ i128 {lo} = {pr.v.rv(ps[1])}, {hi} = {pr.v.rv(ps[2])};", ind)
        pr.store(ps[0], f"({lo} <= {hi} ? (i128)rng_range(p->E, (u64){lo}, (u64){hi}) : {lo})", ind + 1)
        pr.o.emit("}", ind)
