"""Specialize actions whose directional parameters a table binds in its actions list
(`actions = { a(hdr.x); }`), as p4c's RemoveActionParameters does: the table gets its own
copy of the action whose directional parameters are local variables, copied in from the
bound arguments before the body and out to them after. The copy keeps the action's name,
so the control plane sees one action with only its directionless parameters. A bound argument
that calls a function (`a(f(x))`) calls it in the copy, each time the action runs."""
from __future__ import annotations

from .. import ir
from .functions import inline_calls
from .returns import remove_returns
from .side_effects import SideEffectOrdering, has_call
from .walk import clone


def bind_table_action_args(control: ir.Control) -> None:
    """Give each table of `control` specialized copies of the actions it binds arguments to."""
    for table in list(control.tables.values()):
        for ref in table.actions:
            if not any(p.direction for p in ref.action.params):
                continue
            original = ref.action
            ref.action = _specialize(original, ref.args)
            ref.args = []
            _declare_after(control, original, ref.action, f"{original.name}@{table.name}")
            bindings = [table.default_action] + [e.action for e in table.entries]
            for b in bindings:
                if b is not None and b.action is original:
                    b.action = ref.action
                    b.args = b.args[len(b.args) - len(ref.action.params):]


def _declare_after(control: ir.Control, original: ir.Action, copy: ir.Action, key: str) -> None:
    """Declare `copy` where `original` is (P4Info lists a control's actions in declaration
    order); a top-level original puts it first."""
    at = next((i + 1 for i, d in enumerate(control.locals) if d is original), 0)
    control.locals.insert(at, copy)
    order = [d for d in control.locals if isinstance(d, ir.Action)]
    keys = {id(a): k for k, a in control.actions.items()}
    keys[id(copy)] = key
    control.actions = {keys[id(a)]: a for a in order}


def _specialize(action: ir.Action, args: list[ir.Expr]) -> ir.Action:
    loc = action.loc
    memo: dict = {}
    data = []
    for p in action.params:
        if p.direction == "":
            q = ir.Param(p.name, p.direction, p.type, p.annotations, p.loc, p.default)
            memo[id(p)] = q
            data.append(q)
    stmts: list[ir.Stmt] = []
    copy_out: list[ir.Stmt] = []
    for p, arg in zip([p for p in action.params if p.direction], args):
        var = ir.VarDecl(p.name, p.type, clone(arg) if p.direction != "out" else None, loc=p.loc)
        memo[id(p)] = var
        stmts.append(ir.VarDeclStmt(loc, var))
        if p.direction in ("out", "inout") and not isinstance(arg, ir.DontCare):
            copy_out.append(ir.Assign(loc, clone(arg), ir.VarRef(p.type, loc, var.name, var)))
    body = clone(action.body, memo)
    stmts.extend(remove_returns(body.stmts, body.loc, None, f"{action.name}_returned"))
    stmts.extend(copy_out)
    if has_call(args):  # `a(f(x))`: f runs each time the action does, as in p4c's copy of the action
        stmts = inline_calls(SideEffectOrdering().run_stmts(stmts))
    return ir.Action(action.name, data, ir.Block(body.loc, stmts), action.annotations, loc, action.control)
