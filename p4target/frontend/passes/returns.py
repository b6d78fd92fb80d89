"""Remove `return` from code that is about to be inlined (a function body, a sub-control's
apply block), as p4c's RemoveReturns does: a returned value goes to a variable, and the
statements after a return that may have run are guarded by a `returned` flag. In a loop a
return also leaves the loop, and each loop around it (`if (returned) break;` after the inner)."""
from __future__ import annotations

from .. import ir
from ..typing import BOOL
from .walk import completes, walk


def remove_returns(stmts: list[ir.Stmt], loc: ir.Loc, result: ir.VarDecl | None = None,
                   name: str = "returned") -> list[ir.Stmt]:
    """`stmts` without Return: `return e` becomes `result = e` (and sets the flag when later
    statements need guarding). Returns the new statements, flag declaration first if used."""
    if not any(isinstance(n, ir.Return) for n in walk(stmts)):
        return stmts
    flag = ir.VarDecl(name, BOOL, ir.BoolLiteral(BOOL, loc, False), loc=loc)
    rewriter = _Rewriter(flag, result)
    body = rewriter.stmts(stmts)
    if not rewriter.flag_read:
        body = _drop_flag_writes(body, flag)
        return body
    return [ir.VarDeclStmt(loc, flag)] + body


class _Rewriter:
    def __init__(self, flag: ir.VarDecl, result: ir.VarDecl | None):
        self.flag = flag
        self.result = result
        self.flag_read = False
        self.loops = 0  # loops around the statements being rewritten

    def flag_ref(self, loc: ir.Loc) -> ir.VarRef:
        return ir.VarRef(BOOL, loc, self.flag.name, self.flag)

    def stmts(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for i, s in enumerate(stmts):
            out.extend(self.stmt(s))
            if not completes(s):
                break  # the rest is dead code
            rest = stmts[i + 1:]
            if self.loops and isinstance(s, ir.Loop) and any(isinstance(n, ir.Return) for n in walk(s.body)):
                self.flag_read = True  # a return left that loop: leave the one around it too
                out.append(ir.If(s.loc, self.flag_ref(s.loc), ir.LoopJump(s.loc, "break"), None))
            elif rest and not self.loops and any(isinstance(n, ir.Return) for n in walk(s)):
                self.flag_read = True
                guard = ir.Unary(BOOL, s.loc, "!", self.flag_ref(s.loc))
                out.append(ir.If(s.loc, guard, ir.Block(s.loc, self.stmts(rest)), None))
                break
        return out

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.Return):
            out: list[ir.Stmt] = []
            if s.value is not None and self.result is not None:
                out.append(ir.Assign(s.loc, ir.VarRef(self.result.type, s.loc, self.result.name, self.result), s.value))
            out.append(ir.Assign(s.loc, self.flag_ref(s.loc), ir.BoolLiteral(BOOL, s.loc, True)))
            if self.loops:
                out.append(ir.LoopJump(s.loc, "break"))
            return out
        if isinstance(s, ir.Loop):
            self.loops += 1
            body = ir.Block(s.body.loc, self.stmts(s.body.stmts))
            self.loops -= 1
            return [ir.Loop(s.loc, body, s.update)]
        if isinstance(s, ir.Block):
            return [ir.Block(s.loc, self.stmts(s.stmts))]
        if isinstance(s, ir.If):
            then = ir.Block(s.loc, self.stmts([s.then]))
            else_ = ir.Block(s.loc, self.stmts([s.else_])) if s.else_ is not None else None
            return [ir.If(s.loc, s.cond, then, else_)]
        if isinstance(s, ir.Switch):
            for case in s.cases:
                if case.body is not None:
                    case.body = ir.Block(case.body.loc, self.stmts(case.body.stmts))
            return [s]
        return [s]


def _drop_flag_writes(stmts: list[ir.Stmt], flag: ir.VarDecl) -> list[ir.Stmt]:
    out = []
    for s in stmts:
        if isinstance(s, ir.Assign) and isinstance(s.lhs, ir.VarRef) and s.lhs.decl is flag:
            continue
        if isinstance(s, ir.Block):
            s.stmts = _drop_flag_writes(s.stmts, flag)
        elif isinstance(s, ir.If):
            s.then = ir.Block(s.loc, _drop_flag_writes([s.then], flag))
            if s.else_ is not None:
                s.else_ = ir.Block(s.loc, _drop_flag_writes([s.else_], flag))
        elif isinstance(s, ir.Switch):
            for case in s.cases:
                if case.body is not None:
                    case.body.stmts = _drop_flag_writes(case.body.stmts, flag)
        elif isinstance(s, ir.Loop):
            s.body.stmts = _drop_flag_writes(s.body.stmts, flag)
        out.append(s)
    return out
