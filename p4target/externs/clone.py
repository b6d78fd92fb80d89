"""clone, clone3, clone_preserving_field_list: a copy of the packet to a mirroring session (I2E or E2E)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.frontend import ir
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.primitives import Primitives as LoweredPrinter
    from p4target.lowered.from_ir.externs import Externs

from p4target.externs.base import fail as bmv2_rule
from p4target.externs.base import field_list_id
from p4target.lowered.from_ir.common import fail

_KIND = {"clone_ingress_pkt_to_egress": "I2E", "clone_egress_pkt_to_egress": "E2E"}


@register
class Clone(Extern):
    functions = ("clone", "clone3", "clone_preserving_field_list")
    primitives = tuple(_KIND)

    def check_call(self, c: Call) -> None:
        if isinstance(c, ir.ExternFunctionCall) and c.name == "clone3":
            raise bmv2_rule("clone3: unknown extern function (use clone_preserving_field_list)", c.loc)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternFunctionCall)
        a = c.args
        kind = a[0].member if isinstance(a[0], ir.EnumMember) else None
        if kind not in ("I2E", "E2E"):
            raise fail("the clone type must be CloneType.I2E or CloneType.E2E", a[0].loc)
        fl = x.field_list_arg(a[2] if c.name == "clone_preserving_field_list" else None)
        op = "clone_ingress_pkt_to_egress" if kind == "I2E" else "clone_egress_pkt_to_egress"
        out.append(m.Primitive(op, [x.v.data(a[1]), fl]))

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        hid = pr.o.L.hidden
        fl = field_list_id(ps[1] if len(ps) > 1 else None, pr.NOT_SET)
        pr.set_slots([(hid["clone_session"], pr.v.rv(ps[0])), (hid["clone_type"], pr.CLONE[_KIND[op]]),
                      (hid["clone_fl"], fl)], ind)
