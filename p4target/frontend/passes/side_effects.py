"""Give every P4 function call its own statement, keeping P4's evaluation order (p4c's
SideEffectOrdering), so that inlining a call is a matter of statements.

After this pass a FunctionCall appears only as `f(args);`, `x = f(args);` or `return f(args);`,
with argument expressions free of calls; a lookahead of a header or struct type only as
`x = packet.lookahead<H>();` or a statement of its own. Within an expression that contains a call, every
operand evaluated before the call is first saved in a temporary (the call may change what
it reads); `a && f()`, `a || f()` and `c ? f() : g()` become `if` statements so the call
runs only when P4's short-circuit rules say so.
"""
from __future__ import annotations

from .. import ir
from ..typing import BOOL
from .walk import clone, flat_map_stmts, map_exprs, walk

_CONSTANT = (ir.Constant, ir.BoolLiteral, ir.StringLiteral, ir.EnumMember, ir.ErrorMember, ir.DontCare)
_CALLS = (ir.FunctionCall, ir.ExternFunctionCall, ir.ExternMethodCall, ir.ActionCall, ir.ApplyCall)


def has_call(e: object) -> bool:
    """Whether code `e` contains a P4 function call, or a lookahead of a header or struct
    (whose value back ends only store: `x = packet.lookahead<H>()`)."""
    return any(isinstance(n, ir.FunctionCall) or _compound_lookahead(n) for n in walk(e))


def _compound_lookahead(n: object) -> bool:
    return (isinstance(n, ir.ExternMethodCall) and n.method == "lookahead"
            and isinstance(n.type, (ir.HeaderType, ir.StructType)))


class SideEffectOrdering:
    """Rewrites statement lists; temporaries are declared by statements just before their use."""

    def __init__(self) -> None:
        self.count = 0

    def run_stmts(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        """A statement list with its calls ordered."""
        return flat_map_stmts(stmts, self.stmt)

    def run(self, block: ir.Parser | ir.Control | ir.Function) -> None:
        """Order the calls in a Parser, Control (its actions and instances too) or Function."""
        if not _block_has_call(block):
            return
        if isinstance(block, ir.Function):
            block.body.stmts = self.run_stmts(block.body.stmts)
            return
        for d in block.locals:
            if isinstance(d, ir.Action):
                d.body.stmts = self.run_stmts(d.body.stmts)
            elif isinstance(d, ir.BlockInstance):
                self.run(d.block)
        if isinstance(block, ir.Control):
            block.body.stmts = self.run_stmts(block.body.stmts)
            return
        for state in block.states.values():
            state.body = self.run_stmts(state.body)
            tr = state.transition
            if isinstance(tr, ir.SelectTransition) and has_call(tr.keys):
                pre: list[ir.Stmt] = []
                tr.keys = self.operands(tr.keys, pre)
                state.body.extend(pre)

    # ------------------------------------------------------------------ statements

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        pre: list[ir.Stmt] = []
        if isinstance(s, ir.Assign) and (has_call(s.lhs) or has_call(s.rhs)):
            s.lhs = self.lvalue(s.lhs, pre)
            s.rhs = self.expr(s.rhs, pre, top=True)
            lhs = s.lhs

            def unshared(e: ir.Expr) -> ir.Expr:
                return clone(e) if e is lhs else e

            for code in (*pre, s):  # a compound assignment's value reads its l-value itself: now ordered, a copy
                map_exprs(code, unshared)
        elif isinstance(s, ir.MethodCallStmt) and has_call(s.call):
            s.call = self.expr(s.call, pre, top=True)
        elif isinstance(s, ir.If) and has_call(s.cond):
            s.cond = self.expr(s.cond, pre)
        elif isinstance(s, ir.Switch) and has_call(s.subject):
            s.subject = self.expr(s.subject, pre)
        elif isinstance(s, ir.Return) and s.value is not None and has_call(s.value):
            s.value = self.expr(s.value, pre, top=True)
        elif isinstance(s, ir.VarDeclStmt) and s.decl.init is not None and has_call(s.decl.init):
            init, s.decl.init = s.decl.init, None
            init = self.expr(init, pre, top=True)
            return pre + [s, ir.Assign(s.loc, self.ref(s.decl, s.loc), init)]
        return pre + [s]

    # ------------------------------------------------------------------ expressions

    def expr(self, e: ir.Expr, pre: list[ir.Stmt], top: bool = False) -> ir.Expr:
        """`e` without calls; the statements computing its calls are appended to `pre`.
        With `top`, a call at the root of `e` stays (its arguments are ordered)."""
        if not has_call(e):
            return e
        if isinstance(e, _CALLS):
            e.args = self.args(_params(e), e.args, pre)
            return e if top or isinstance(e.type, ir.VoidType) else self.temp(e, pre)
        if isinstance(e, ir.Binary) and e.op in ("&&", "||") and has_call(e.right):
            return self.short_circuit(e, pre)
        if isinstance(e, ir.Mux) and (has_call(e.then) or has_call(e.else_)):
            return self.conditional(e, pre)
        if isinstance(e, ir.ListExpr):
            e.items = self.operands(e.items, pre)
        elif isinstance(e, ir.StructExpr):
            e.fields = dict(zip(e.fields, self.operands(list(e.fields.values()), pre)))
        elif isinstance(e, ir.Binary):
            e.left, e.right = self.operands([e.left, e.right], pre)
        elif isinstance(e, ir.Mux):
            e.cond = self.expr(e.cond, pre)
        elif isinstance(e, ir.ArrayIndex):
            e.expr, e.index = self.operands([e.expr, e.index], pre)
        elif isinstance(e, (ir.Unary, ir.Cast, ir.Slice, ir.Member)):
            e.expr = self.expr(e.expr, pre)
        elif isinstance(e, ir.HeaderMethodCall):
            e.header = self.expr(e.header, pre)
        else:
            raise TypeError(f"side-effect ordering: unexpected {type(e).__name__}")
        return e

    def operands(self, items: list[ir.Expr], pre: list[ir.Stmt]) -> list[ir.Expr]:
        """Operands evaluated left to right: those before the last one holding a call are saved."""
        last = max((i for i, x in enumerate(items) if has_call(x)), default=-1)
        return [self.saved(self.expr(x, pre), pre) if i < last else self.expr(x, pre) for i, x in enumerate(items)]

    def args(self, params: list[ir.Param], args: list[ir.Expr], pre: list[ir.Stmt]) -> list[ir.Expr]:
        """Call arguments: `in` ones like operands; out/inout ones stay l-values."""
        last = max((i for i, x in enumerate(args) if has_call(x)), default=-1)
        out = []
        for i, (p, a) in enumerate(zip(params, args)):
            if p.direction in ("out", "inout"):
                out.append(self.lvalue(a, pre))
            elif i < last:
                out.append(self.saved(self.expr(a, pre), pre))
            else:
                out.append(self.expr(a, pre))
        return out + args[len(params):]

    def lvalue(self, e: ir.Expr, pre: list[ir.Stmt]) -> ir.Expr:
        """An l-value whose stack indexes may hold calls: only those are ordered."""
        if isinstance(e, (ir.Member, ir.Slice)):
            e.expr = self.lvalue(e.expr, pre)
        elif isinstance(e, ir.ArrayIndex):
            e.expr = self.lvalue(e.expr, pre)
            e.index = self.expr(e.index, pre)
        return e

    def short_circuit(self, e: ir.Binary, pre: list[ir.Stmt]) -> ir.Expr:
        result = self.temp(self.expr(e.left, pre), pre)
        inner: list[ir.Stmt] = []
        inner.append(ir.Assign(e.loc, self.ref(result.decl, e.loc), self.expr(e.right, inner)))
        cond: ir.Expr = self.ref(result.decl, e.loc)
        if e.op == "||":
            cond = ir.Unary(BOOL, e.loc, "!", cond)
        pre.append(ir.If(e.loc, cond, ir.Block(e.loc, inner), None))
        return self.ref(result.decl, e.loc)

    def conditional(self, e: ir.Mux, pre: list[ir.Stmt]) -> ir.Expr:
        cond = self.expr(e.cond, pre)
        decl = self.declare(e.type, e.loc, pre)
        branches = []
        for branch in (e.then, e.else_):
            inner: list[ir.Stmt] = []
            inner.append(ir.Assign(e.loc, self.ref(decl, e.loc), self.expr(branch, inner)))
            branches.append(ir.Block(e.loc, inner))
        pre.append(ir.If(e.loc, cond, *branches))
        return self.ref(decl, e.loc)

    # ------------------------------------------------------------------ temporaries

    def saved(self, e: ir.Expr, pre: list[ir.Stmt]) -> ir.Expr:
        """`e`'s value as of now: a temporary unless it is a constant (lists item by item)."""
        if isinstance(e, _CONSTANT):
            return e
        if isinstance(e, ir.ListExpr):
            e.items = [self.saved(x, pre) for x in e.items]
            return e
        if isinstance(e, ir.StructExpr):
            e.fields = {k: self.saved(x, pre) for k, x in e.fields.items()}
            return e
        return self.temp(e, pre)

    def temp(self, e: ir.Expr, pre: list[ir.Stmt]) -> ir.VarRef:
        decl = self.declare(e.type, e.loc, pre, None)
        pre.append(ir.Assign(e.loc, self.ref(decl, e.loc), e))
        return self.ref(decl, e.loc)

    def declare(self, t: ir.Type, loc: ir.Loc, pre: list[ir.Stmt], init: ir.Expr | None = None) -> ir.VarDecl:
        self.count += 1
        decl = ir.VarDecl(f"tmp_{self.count}", t, init, loc=loc)
        pre.append(ir.VarDeclStmt(loc, decl))
        return decl

    @staticmethod
    def ref(decl: ir.Param | ir.VarDecl, loc: ir.Loc) -> ir.VarRef:
        return ir.VarRef(decl.type, loc, decl.name, decl)


def _block_has_call(block: ir.Parser | ir.Control | ir.Function) -> bool:
    if isinstance(block, ir.Function):
        return has_call(block.body)
    code: list = [block.body] if isinstance(block, ir.Control) else list(block.states.values())
    for d in block.locals:
        if isinstance(d, ir.BlockInstance):
            return True
        if isinstance(d, ir.Action):
            code.append(d.body)
    return has_call(code)


def _params(call: ir.FunctionCall | ir.ActionCall | ir.ApplyCall | ir.ExternMethodCall | ir.ExternFunctionCall) -> list[ir.Param]:
    """The parameters of whatever `call` calls (their directions say how arguments pass)."""
    if isinstance(call, ir.FunctionCall):
        return call.function.params
    if isinstance(call, ir.ActionCall):
        return call.action.params
    if isinstance(call, ir.ApplyCall):
        return call.instance.block.params
    return call.decl.params
