"""Strength reduction of division and modulo, as p4c's StrengthReduction does before BMv2
sees them: `x / 2^k` is `x >> k`, `x % 2^k` is `x & (2^k - 1)`, and `0 / x`, `0 % x` are 0.
(BMv2 has no division: bmv2_limits rejects what is left.) Runs after side-effect ordering,
so dropping an operand drops no call."""
from __future__ import annotations

from .. import ir
from .walk import map_block_exprs, map_exprs


def reduce_strength(block: ir.Parser | ir.Control) -> None:
    """In place, over a Parser or Control."""
    map_block_exprs(block, _reduce)


def reduce_strength_in_action(action: ir.Action) -> None:
    map_exprs(action.body, _reduce)


def _reduce(e: ir.Expr) -> ir.Expr:
    if not (isinstance(e, ir.Binary) and e.op in ("/", "%")):
        return e
    left, right = e.left, e.right
    if isinstance(left, ir.Constant) and left.value == 0:
        return ir.Constant(e.type, e.loc, 0)
    if isinstance(right, ir.Constant) and right.value > 0 and right.value & (right.value - 1) == 0:
        k = right.value.bit_length() - 1
        if e.op == "/":
            return ir.Binary(e.type, e.loc, ">>", left, ir.Constant(ir.BitsType(32), right.loc, k))
        return ir.Binary(e.type, e.loc, "&", left, ir.Constant(e.type, right.loc, right.value - 1))
    return e
