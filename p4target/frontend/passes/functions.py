"""Inline every call of a P4 function (p4c's InlineFunctions), after SideEffectOrdering left
calls only as `f(args);`, `x = f(args);` (and `return f(args);` inside functions).

A call becomes a block: one variable per parameter (initialized with the argument for
in/inout and directionless ones; an int parameter is its argument, a compile-time value,
wherever it is used), the function body with its variables renamed apart and
`return e` turned into an assignment of the result, then the copy-out of out/inout
parameters in order, then the assignment of the result.
"""
from __future__ import annotations

from .. import ir
from .returns import remove_returns
from .walk import clone, flat_map_stmts, map_block_stmts, map_exprs


def inline_calls(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """`stmts` with every function call statement replaced by the function's body."""
    return flat_map_stmts(stmts, _inline_stmt)


def inline_functions(block: ir.Parser | ir.Control) -> None:
    """Inline the function calls of a Parser or Control (and its actions)."""
    map_block_stmts(block, inline_calls)


def _inline_stmt(s: ir.Stmt) -> list[ir.Stmt]:
    if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.FunctionCall):
        return [_expand(s.call, None)]
    if isinstance(s, ir.Assign) and isinstance(s.rhs, ir.FunctionCall):
        return [_expand(s.rhs, s.lhs)]
    return [s]


def _expand(call: ir.FunctionCall, target: ir.Expr | None) -> ir.Block:
    f, loc = call.function, call.loc
    memo: dict = {}
    stmts: list[ir.Stmt] = []
    copy_out: list[ir.Stmt] = []
    ints: dict[int, ir.Expr] = {}  # id(int parameter) -> its argument, which the body uses in its place
    for p, arg in zip(f.params, call.args):
        if isinstance(p.type, ir.InfIntType):
            ints[id(p)] = arg
            continue
        init = clone(arg) if p.direction != "out" else None
        var = ir.VarDecl(f"{f.name}_{p.name}", p.type, init, loc=loc)
        memo[id(p)] = var
        stmts.append(ir.VarDeclStmt(loc, var))
        if p.direction in ("out", "inout") and not isinstance(arg, ir.DontCare):
            copy_out.append(ir.Assign(loc, clone(arg), ir.VarRef(p.type, loc, var.name, var)))
    result = None
    if not isinstance(f.return_type, ir.VoidType):
        result = ir.VarDecl(f"{f.name}_result", f.return_type, loc=loc)
        stmts.append(ir.VarDeclStmt(loc, result))
    body = clone(f.body, memo)
    if ints:
        map_exprs(body, lambda e: clone(ints[id(e.decl)]) if isinstance(e, ir.VarRef) and id(e.decl) in ints else e)
    stmts.extend(remove_returns(body.stmts, loc, result, f"{f.name}_returned"))
    stmts.extend(copy_out)
    if target is not None and result is not None:
        stmts.append(ir.Assign(loc, target, ir.VarRef(result.type, loc, result.name, result)))
    return ir.Block(loc, inline_calls(stmts))
