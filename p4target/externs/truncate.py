"""truncate: the packet leaves cut to a length in bytes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.primitives import Primitives as LoweredPrinter
    from p4target.lowered.from_ir.externs import Externs


@register
class Truncate(Extern):
    functions = ("truncate",)
    primitives = ("truncate",)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        out.append(m.Primitive("truncate", [x.v.data(c.args[0])]))

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        pr.set_slots([(pr.o.L.hidden["truncate"], pr.v.rv(ps[0]))], ind)
