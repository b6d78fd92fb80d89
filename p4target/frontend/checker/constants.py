"""Compile-time constants: literal syntax, which expressions are constants, folded values relocated."""
from __future__ import annotations

import copy
import re

from .. import ir

INT_LITERAL = re.compile(r"(?:(\d+)([ws]))?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|\d[0-9_]*)$")


def unquote(literal: str) -> str:
    """A string literal's text without its quotes, escapes resolved."""
    s = literal[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def is_constant(e: ir.Expr) -> bool:
    if isinstance(e, (ir.Constant, ir.BoolLiteral, ir.StringLiteral, ir.EnumMember, ir.ErrorMember)):
        return True
    if isinstance(e, ir.StructExpr):
        return all(is_constant(v) for v in e.fields.values())
    if isinstance(e, ir.ListExpr):
        return all(is_constant(v) for v in e.items)
    return False


def const_key(e: ir.Expr) -> tuple[str, object, object]:
    """What makes two constant switch labels the same label."""
    return (type(e).__name__, getattr(e, "value", None), getattr(e, "member", None))


def relocate(e: ir.Expr, loc: ir.Loc) -> ir.Expr:
    """A copy of a folded constant at the place it is used."""
    c = copy.copy(e)
    c.loc = loc
    return c
