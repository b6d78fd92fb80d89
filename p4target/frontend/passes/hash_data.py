"""A computed value in `hash(...)`'s data list (`{ h.f ^ 0xFFFF }`, a slice) is first stored in a
temporary, as p4c does: the engines' calculations, like BMv2's, read fields and constants only."""
from __future__ import annotations

from .. import ir
from .walk import flat_map_stmts

_CONSTANT = (ir.Constant, ir.BoolLiteral, ir.EnumMember, ir.ErrorMember)


class HashData:
    """Rewrites statement lists; temporaries are declared just before the hash call."""

    def __init__(self) -> None:
        self.count = 0

    def run_stmts(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        return flat_map_stmts(stmts, self.stmt)

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        call = s.call if isinstance(s, ir.MethodCallStmt) else None
        if not (isinstance(call, ir.ExternFunctionCall) and call.name == "hash" and len(call.args) == 5
                and isinstance(call.args[3], ir.ListExpr)):
            return [s]
        pre: list[ir.Stmt] = []
        data = call.args[3]
        data.items = [x if is_plain(x) else self.temp(x, pre) for x in data.items]
        return pre + [s]

    def temp(self, e: ir.Expr, pre: list[ir.Stmt]) -> ir.VarRef:
        self.count += 1
        decl = ir.VarDecl(f"hash_data_{self.count}", e.type, None, loc=e.loc)
        pre += [ir.VarDeclStmt(e.loc, decl), ir.Assign(e.loc, ir.VarRef(decl.type, e.loc, decl.name, decl), e)]
        return ir.VarRef(decl.type, e.loc, decl.name, decl)


def is_plain(e: ir.Expr) -> bool:
    """A constant, or a variable, field or stack element with a constant index: what a calculation reads."""
    if isinstance(e, _CONSTANT):
        return True
    if isinstance(e, ir.ListExpr):
        return all(is_plain(x) for x in e.items)
    while isinstance(e, (ir.Member, ir.ArrayIndex)):
        if isinstance(e, ir.ArrayIndex) and not isinstance(e.index, ir.Constant):
            return False
        e = e.expr
    return isinstance(e, ir.VarRef)
