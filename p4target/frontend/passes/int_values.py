"""Values of type int that inlining makes known: a sub-control's or sub-parser's directionless `int` parameter
(`control C(int a, inout bit<8> b)` applied as `C.apply(3, x)`), which the checker casts to the width it is used at,
as p4c casts it (`b == a` is `b == (bit<8>)a`). Once blocks and functions are inlined each should be a constant:
it is folded; one that is not stays unknown at compile time and is refused, as nothing at run time holds an int.

`(int)x` of a run-time x becomes 0, as p4c's BMv2 back end computes it (it writes `x & 0`: a mask of int's zero
bits), and what is computed from it is folded: `(int<32>)((int)i + 1)` is `32s1`. The checker keeps such casts (and
warns at each) for the parser unroller (passes/unroll.py), which runs first and takes `(int)x` as x's value, as
p4c's does."""
from __future__ import annotations

from ...errors import P4Error
from .. import ir
from ..typing import BOOL, COMPARE, fold_binary, is_numeric, wrap
from .bmv2_limits import describe
from .walk import map_block_exprs, map_exprs, walk


def fold_int_values(blocks: list[ir.Parser | ir.Control], actions: list[ir.Action]) -> None:
    """Fold, in place, what inlining made constant; P4Error at an int that is still not."""
    for b in blocks:
        map_block_exprs(b, _fold)
    for a in actions:
        map_exprs(a.body, _fold)
    code = [a.body for a in actions] + [b.body if isinstance(b, ir.Control) else list(b.states.values())
                                        for b in blocks]
    for n in walk(code):
        if isinstance(n, ir.Expr) and isinstance(n.type, ir.InfIntType) and not isinstance(n, ir.Constant):
            raise P4Error(f"{describe(n)}: an int value not known at compile time", n.loc.file, n.loc.line, n.loc.col)


def _fold(e: ir.Expr) -> ir.Expr:
    if isinstance(e, ir.Cast) and isinstance(e.type, ir.InfIntType) and not isinstance(e.expr, ir.Constant):
        return ir.Constant(e.type, e.loc, 0)
    if isinstance(e, ir.Cast) and is_numeric(e.type) and isinstance(e.expr, ir.Constant) \
            and isinstance(e.expr.type, ir.InfIntType):
        return ir.Constant(e.type, e.loc, wrap(e.expr.value, e.type))
    if isinstance(e, ir.Binary) and isinstance(e.left, ir.Constant) and isinstance(e.right, ir.Constant) \
            and isinstance(e.left.type, ir.InfIntType) and isinstance(e.right.type, ir.InfIntType):
        if e.op in COMPARE:
            return ir.BoolLiteral(BOOL, e.loc, COMPARE[e.op](e.left.value, e.right.value))
        return ir.Constant(e.type, e.loc, fold_binary(e.op, e.left.value, e.right.value, e.type))
    if isinstance(e, ir.Unary) and e.op == "-" and isinstance(e.expr, ir.Constant) \
            and isinstance(e.expr.type, ir.InfIntType):
        return ir.Constant(e.type, e.loc, -e.expr.value)
    return e
