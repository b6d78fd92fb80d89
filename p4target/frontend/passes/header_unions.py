"""Make header-union validity explicit: at most one member of a union is valid, so making
one member valid (setValid, assigning a valid header) invalidates the others, as BMv2 does.
An extract into a member is left alone: the engines invalidate its siblings as BMv2 does on
p4c's JSON, which writes the extract alone (simple_switch crashes on an invalidation reached
through a union stack's last index)."""
from __future__ import annotations

from typing import TypeGuard, cast

from .. import ir
from .walk import clone, flat_map_stmts, map_block_stmts


def invalidate_union_siblings(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """`stmts` with sibling invalidations after every statement that validates a union member."""
    return flat_map_stmts(stmts, _rewrite)


def lower_header_unions(block: ir.Parser | ir.Control) -> None:
    """Apply invalidate_union_siblings to a Parser or Control and its actions."""
    map_block_stmts(block, invalidate_union_siblings)


def _rewrite(s: ir.Stmt) -> list[ir.Stmt]:
    if isinstance(s, ir.MethodCallStmt):
        c = s.call
        if isinstance(c, ir.HeaderMethodCall) and c.method == "setValid" and _member_of_union(c.header):
            return [s, *_siblings_invalid(c.header, s.loc)]
    if isinstance(s, ir.Assign) and _member_of_union(s.lhs):
        valid = ir.HeaderMethodCall(ir.BoolType(), s.loc, clone(s.lhs), "isValid", [])
        return [s, ir.If(s.loc, valid, ir.Block(s.loc, _siblings_invalid(s.lhs, s.loc)), None)]
    return [s]


def _member_of_union(e: ir.Expr) -> TypeGuard[ir.Member]:
    return isinstance(e, ir.Member) and isinstance(e.expr.type, ir.HeaderUnionType)


def _siblings_invalid(member: ir.Member, loc: ir.Loc) -> list[ir.Stmt]:
    union = member.expr
    fields = cast(ir.HeaderUnionType, union.type).fields  # _member_of_union checked it
    return [ir.MethodCallStmt(loc, ir.HeaderMethodCall(
        ir.VoidType(), loc, ir.Member(f.type, loc, clone(union), f.name), "setInvalid", []))
        for f in fields if f.name != member.member]
