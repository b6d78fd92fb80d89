"""mark_to_drop (and BMv2's drop): egress_spec becomes the drop port and mcast_grp 0."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.c_primitives import CPrimitives as CPrinter
    from p4target.backends.python_primitives import PyPrimitives as PyPrinter
    from p4target.lowered.from_ir.externs import Externs

from p4target.constants import DROP_PORT
from p4target.externs.base import fail
from p4target.lowered.from_ir.common import STANDARD_METADATA


@register
class MarkToDrop(Extern):
    functions = ("mark_to_drop",)
    primitives = ("mark_to_drop", "drop")

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        out.append(m.Primitive("mark_to_drop", [m.HeaderRef(STANDARD_METADATA)]))

    def check_call(self, c: Call) -> None:
        if not c.args:
            raise fail("Expected 1 argument for mark_to_drop(). Are you using an up-to-date v1model.p4?", c.loc)

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        h = ps[0] if op == "mark_to_drop" else m.HeaderRef(STANDARD_METADATA)
        b = pr.o.L.base[h.name] if isinstance(h, m.HeaderRef) else pr.o.L.base[STANDARD_METADATA]
        k = {f.name: i for i, f in enumerate(pr.o.L.types[STANDARD_METADATA].fields)}
        pr.o.emit(f"F[{b + 1 + k['egress_spec']}] = {DROP_PORT}; F[{b + 1 + k['mcast_grp']}] = 0", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        sm = pr.o.L.sm
        pr.o.emit(f"F[{sm['egress_spec']}] = DROP_PORT; F[{sm['mcast_grp']}] = 0;", ind)
