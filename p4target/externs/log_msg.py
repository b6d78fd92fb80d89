"""log_msg: a line in the switch's log, its `{}`s filled with values."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.frontend import ir
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.primitives import Primitives as LoweredPrinter
    from p4target.lowered.from_ir.externs import Externs

from p4target.lowered.from_ir.values import Typed


@register
class LogMsg(Extern):
    functions = ("log_msg",)
    primitives = ("log_msg",)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        a = c.args
        values = tuple(v.value if isinstance(v, Typed) else v for v in x.v.flat(a[1])) if len(a) > 1 else ()
        fmt = a[0].value if isinstance(a[0], ir.StringLiteral) else ""
        out.append(m.Primitive("log_msg", [m.String(fmt), m.ValueList(values)]))

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        msg = ps[0].value if isinstance(ps[0], m.String) else ""
        values = ps[1].items if len(ps) > 1 and isinstance(ps[1], m.ValueList) else ()
        pr.log(msg, [pr.v.rv(v) for v in values], ind)
