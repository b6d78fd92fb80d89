"""Checksum16: declared by v1model.p4, but p4c cannot translate it for BMv2, so a call is refused."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call
from p4target.frontend import ir

if TYPE_CHECKING:
    pass

from p4target.externs.base import fail


@register
class Checksum16(Extern):
    types = ("Checksum16",)

    def check_call(self, c: Call) -> None:
        assert isinstance(c, ir.ExternMethodCall)
        raise fail(f"{getattr(c.target, 'name', 'expression')}.{c.method}(...): not supported", c.loc)
