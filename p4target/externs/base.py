"""What the extern modules share: the IR calls they lower, a BMv2 rule's error, helpers for printing.

The hooks an extern fills in, and its registration, are the registry's (p4target/extern_registry.py).
"""
from __future__ import annotations

from p4target.backends.python_primitives import PyPrimitives as PyPrinter
from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.lowered import model as m

Call = ir.ExternCall


def fail(message: str, loc: ir.Loc) -> P4Error:
    """A BMv2 rule broken at `loc` (what the lowering cannot lower is a NotLowered: from_ir.common.fail)."""
    return P4Error(message, loc.file, loc.line, loc.col)


def field_list_id(v: m.Value | None, absent: str) -> str:
    """A clone/resubmit/recirculate field list's id as printed (`absent` where the primitive has none)."""
    return str(v.value) if isinstance(v, m.Const) else absent


def bound_index(pr: PyPrinter, v: m.Value, ind: int) -> str:
    """A Python name for an array index, computed once (the array's cells are guarded by it)."""
    i = pr.o.tmp()
    pr.o.emit(f"{i} = {pr.v.rv(v)}", ind)
    return i
