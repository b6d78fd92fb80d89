"""resubmit and recirculate (each also _preserving_field_list): the packet goes round again, carrying a
field list (resubmit: back to the ingress at the end of it; recirculate: after the egress's deparser)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.frontend import ir
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.primitives import Primitives as LoweredPrinter
    from p4target.lowered.from_ir.externs import Externs

from p4target.externs.base import fail, field_list_id


@register
class Resubmit(Extern):
    functions = ("resubmit", "resubmit_preserving_field_list", "recirculate", "recirculate_preserving_field_list")
    primitives = ("resubmit", "recirculate")

    def check_call(self, c: Call) -> None:
        if isinstance(c, ir.ExternFunctionCall) and c.name in ("resubmit", "recirculate"):
            raise fail(f"{c.name}: unknown extern function (use {c.name}_preserving_field_list)", c.loc)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternFunctionCall)
        fl = x.field_list_arg(c.args[0] if c.name.endswith("field_list") else None)
        out.append(m.Primitive(c.name.split("_")[0], [fl]))

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        pr.set_slots([(pr.o.L.hidden[op], field_list_id(ps[0] if ps else None, pr.NO_FIELD_LIST))], ind)
