"""A test-only extern (tests/test_externs.py): add_to_field and subtract_from_field, simple_switch's primitives
adding a value to a field (or taking it away) in place, wrapping at the field's width. v1model.p4 does not
declare them and p4c refuses a program that does ("unknown extern function"), and so does the target until
this module is imported: one module registered with p4target.extern_registry is all an extern takes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import fail
from p4target.lowered.from_ir.storage import Scalar

if TYPE_CHECKING:
    from p4target.backends.primitives import Primitives as LoweredPrinter
    from p4target.lowered.from_ir.externs import Externs

_OP = {"add_to_field": "+", "subtract_from_field": "-"}


@register
class AddToField(Extern):
    functions = tuple(_OP)
    primitives = tuple(_OP)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        assert isinstance(c, ir.ExternFunctionCall)
        dst = x.v.store_of(c.args[0])
        if not (isinstance(dst, Scalar) and isinstance(dst.ref, m.Field)
                and isinstance(c.args[0].type, (ir.BitsType, ir.IntType))):
            raise fail(f"{c.name} needs a bit<W> or int<W> field to write", c.loc)
        out.append(m.Primitive(c.name, [dst.ref, x.v.data(c.args[1])]))

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        pr.p_assign([ps[0], m.Expr(_OP[op], ps[0], ps[1])], ind)
