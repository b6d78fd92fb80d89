"""Type rules shared by the checker: equality, literal adaptation, constant folding."""
from __future__ import annotations

from typing import TypeGuard

from . import ir

BOOL = ir.BoolType()
INFINT = ir.InfIntType()
STRING = ir.StringType()
VOID = ir.VoidType()
ERROR = ir.ErrorType()
MATCH_KIND = ir.MatchKindType()
BIT32 = ir.BitsType(32)


def is_numeric(t: ir.Type) -> TypeGuard[ir.BitsType | ir.IntType]:
    """bit<w> or int<w> (fixed width)."""
    return isinstance(t, (ir.BitsType, ir.IntType))


def is_serializable_as(t: ir.Type, target: ir.Type) -> bool:
    """Whether `t` is a serializable enum over `target`: the one implicit cast P4 makes besides an
    untyped literal's (spec 8.11.2), so `E.A` goes where its `bit<W>` is expected."""
    return isinstance(t, ir.EnumType) and t.underlying is not None and same_type(t.underlying, target)


def as_underlying(e: ir.Expr, t: ir.Type) -> ir.Expr:
    """A serializable enum's value as its underlying type `t`: a member folds to its constant."""
    if isinstance(e, ir.EnumMember) and e.value is not None:
        return ir.Constant(t, e.loc, wrap(e.value, t))
    return ir.Cast(t, e.loc, e)


def is_key(t: ir.Type) -> bool:
    """A type a table key or select key may have."""
    if isinstance(t, ir.NewType):
        return is_key(t.underlying)
    return is_numeric(t) or isinstance(t, (ir.BoolType, ir.EnumType, ir.ErrorType))


def wrap(value: int, t: ir.Type) -> int:
    """Reduce `value` into the range of `t` (modulo for bit<w>, two's complement for int<w>)."""
    if isinstance(t, ir.BitsType):
        return value & ((1 << t.width) - 1)
    if isinstance(t, ir.IntType):
        value &= (1 << t.width) - 1
        return value - (1 << t.width) if value >> (t.width - 1) else value
    return value


def same_type(a: ir.Type, b: ir.Type) -> bool:
    """P4 type equality (named types by identity, bit/int/stacks/tuples structurally)."""
    if a is b:
        return True
    if isinstance(a, ir.TupleType) and isinstance(b, ir.TupleType):
        return len(a.elements) == len(b.elements) and all(same_type(x, y) for x, y in zip(a.elements, b.elements))
    if isinstance(a, ir.StackType) and isinstance(b, ir.StackType):
        return a.size == b.size and same_type(a.element, b.element)
    if isinstance(a, (ir.StructLikeType, ir.EnumType, ir.NewType)) or isinstance(b, (ir.StructLikeType, ir.EnumType, ir.NewType)):
        return False
    return a == b


def fold_binary(op: str, a: int, b: int, t: ir.Type) -> int:
    """Value of `a op b` for constants of type t (an arithmetic, bitwise or shift operator)."""
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "/":
        r = a // b
    elif op == "%":
        r = a % b
    elif op == "&":
        r = a & b
    elif op == "|":
        r = a | b
    elif op == "^":
        r = a ^ b
    elif op == "<<":
        r = a << b
    elif op == ">>":
        r = a >> b
    elif op in ("|+|", "|-|"):
        r = a + b if op == "|+|" else a - b
        if isinstance(t, ir.BitsType):
            return max(0, min(r, (1 << t.width) - 1))
        if isinstance(t, ir.IntType):
            return max(-(1 << (t.width - 1)), min(r, (1 << (t.width - 1)) - 1))
        return r
    else:
        raise ValueError(f"fold_binary: {op} is not an arithmetic operator")
    return wrap(r, t)


COMPARE = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
