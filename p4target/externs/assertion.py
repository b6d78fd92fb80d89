"""assert and assume: the packet is dropped with an error when the condition is false (BMv2 stops there)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.frontend import ir
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.primitives import Primitives as LoweredPrinter
    from p4target.lowered.from_ir.externs import Externs


@register
class Assertion(Extern):
    functions = ("assert", "assume")
    primitives = ("assert", "assume")

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternFunctionCall)
        out.append(m.Primitive(c.name, [x.v.cond(c.args[0])], str(c.loc)))

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        pr.fail_unless(pr.v.rv(ps[0]), op, ind)
