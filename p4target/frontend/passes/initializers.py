"""Move the initializers of control-level variables to the start of the apply block (p4c's
MoveInitializers): they run every time the control does, in declaration order, and the
later passes see them as ordinary statements (an initializer may call a function)."""
from __future__ import annotations

from .. import ir


def move_initializers(control: ir.Control) -> None:
    """In place, for `control` and the controls instantiated in it."""
    moved: list[ir.Stmt] = []
    for d in control.locals:
        if isinstance(d, ir.VarDecl) and d.init is not None:
            moved.append(ir.Assign(d.loc, ir.VarRef(d.type, d.loc, d.name, d), d.init))
            d.init = None
        elif isinstance(d, ir.BlockInstance) and isinstance(d.block, ir.Control):
            move_initializers(d.block)
    control.body.stmts = moved + control.body.stmts
