"""Move the initializers of control-level variables to the start of the apply block, and those of
parser-level ones to the start of the start state (p4c's MoveInitializers): they run every time
the block does, in declaration order, and the later passes see them as ordinary statements (an
initializer may call a function)."""
from __future__ import annotations

from .. import ir


def move_initializers(block: ir.Control | ir.Parser) -> None:
    """In place, for `block` and the blocks instantiated in it."""
    moved: list[ir.Stmt] = []
    for d in block.locals:
        if isinstance(d, ir.VarDecl) and d.init is not None:
            moved.append(ir.Assign(d.loc, ir.VarRef(d.type, d.loc, d.name, d), d.init))
            d.init = None
        elif isinstance(d, ir.BlockInstance):
            move_initializers(d.block)
    if isinstance(block, ir.Control):
        block.body.stmts = moved + block.body.stmts
    else:
        block.states["start"].body[:0] = moved
