"""The value of an expression at compile time, when the values of its leaves are known.

For the parser unroller (passes/unroll.py), which tracks a parser's variables state by state and computes
with values the checker could not fold. Values are Python ints (bit<W> unsigned, int<W> signed, as the checker keeps
constants) and bools.
"""
from __future__ import annotations

from collections.abc import Callable

from .. import ir
from ..typing import COMPARE, fold_binary, wrap

Value = int | bool
Known = Callable[[ir.Expr], "Value | None"]


def evaluate(e: ir.Expr, known: Known) -> Value | None:
    """The value of `e`, or None if it depends on something unknown. `known(leaf)` gives the value of a
    variable (or None); `(int)x` is x's value, as p4c's symbolic interpreter takes it."""
    if isinstance(e, (ir.Constant, ir.BoolLiteral)):
        return e.value
    if isinstance(e, (ir.VarRef, ir.Member)):
        return known(e)
    if isinstance(e, ir.Cast):
        v = evaluate(e.expr, known)
        return None if v is None else _cast(v, e.type)
    if isinstance(e, ir.Unary):
        v = evaluate(e.expr, known)
        if v is None:
            return None
        if e.op == "!":
            return not v
        return wrap(-v if e.op == "-" else ~v, e.type)
    if isinstance(e, ir.Slice):
        v = evaluate(e.expr, known)
        return None if v is None else (wrap(v, ir.BitsType(ir.width_of(e.expr.type))) >> e.lo) & ((1 << (e.hi - e.lo + 1)) - 1)
    if isinstance(e, ir.Mux):
        c = evaluate(e.cond, known)
        return None if c is None else evaluate(e.then if c else e.else_, known)
    if isinstance(e, ir.Binary):
        return _binary(e, known)
    return None


def _binary(e: ir.Binary, known: Known) -> Value | None:
    a = evaluate(e.left, known)
    if e.op in ("&&", "||") and a is not None and bool(a) == (e.op == "||"):
        return bool(a)  # short-circuit
    b = evaluate(e.right, known)
    if a is None or b is None:
        return None
    if e.op in ("&&", "||"):
        return bool(b)
    if e.op in COMPARE:
        return COMPARE[e.op](a, b)
    if e.op == "++":
        rw = ir.width_of(e.right.type)
        return wrap((wrap(a, ir.BitsType(ir.width_of(e.left.type))) << rw) | wrap(b, ir.BitsType(rw)), e.type)
    if e.op in ("/", "%") and b == 0:
        return None
    return fold_binary(e.op, int(a), int(b), e.left.type if e.op in ("<<", ">>") else e.type)


def _cast(v: Value, t: ir.Type) -> Value | None:
    if isinstance(t, ir.BoolType):
        return bool(v)
    if isinstance(t, (ir.BitsType, ir.IntType, ir.InfIntType)):
        return wrap(int(v), t)
    return None

