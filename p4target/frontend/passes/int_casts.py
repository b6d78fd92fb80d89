"""`(int)x` of a run-time x becomes 0, as p4c's BMv2 back end computes it (it writes `x & 0`: a mask of
int's zero bits), and what is computed from it is folded: `(int<32>)((int)i + 1)` is `32s1`.

The checker keeps such casts (and warns at each): the parser unroller (passes/unroll.py), which runs
first, takes `(int)x` as x's value, as p4c's does. After this pass no run-time `int` is left.
"""
from __future__ import annotations

from .. import ir
from ..typing import INFINT
from .evaluate import as_constant, evaluate
from .walk import map_block_exprs, map_exprs


def fold_int_casts(blocks: list[ir.Parser | ir.Control], actions: list[ir.Action]) -> None:
    """In place, over the blocks and the (top-level) actions."""
    folded: set[int] = set()

    def fold(e: ir.Expr) -> ir.Expr:
        out: ir.Expr
        if isinstance(e, ir.Cast) and isinstance(e.type, ir.InfIntType) and not isinstance(e.expr, ir.Constant):
            out = ir.Constant(INFINT, e.loc, 0)
        elif any(id(c) in folded for c in _operands(e)):
            v = evaluate(e, lambda _: None)
            if v is None:
                return e
            out = as_constant(v, e.type, e.loc)
        else:
            return e
        folded.add(id(out))
        return out

    for b in blocks:
        map_block_exprs(b, fold)
    for a in actions:
        map_exprs(a.body, fold)


def _operands(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.Binary):
        return [e.left, e.right]
    if isinstance(e, (ir.Unary, ir.Cast, ir.Slice)):
        return [e.expr]
    if isinstance(e, ir.Mux):
        return [e.cond, e.then, e.else_]
    return []
