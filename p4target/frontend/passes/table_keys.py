"""A table key that calls something (`f(x): exact`, `other.apply().hit: exact`) is computed into a
variable of the control just before each application of its table, and the table matches on the
variable, as p4c's SideEffectOrdering does (`key_0 = other.apply().hit; t.apply();`): the key's
calls then run once per application, in statements the other passes and the lowering know.

A table applied inside a larger expression (`a && t.apply().hit`) would have such a key computed
whether or not it is applied: that is refused.
"""
from __future__ import annotations

from ...errors import P4Error
from .. import ir
from .side_effects import SideEffectOrdering
from .walk import clone, flat_map_stmts, fresh_names, walk

_CALLS = (ir.FunctionCall, ir.ExternFunctionCall, ir.ExternMethodCall, ir.ApplyCall,
          ir.TableApply, ir.TableHitMiss, ir.ActionRun)
_APPLIES = (ir.TableApply, ir.TableHitMiss, ir.ActionRun)


def compute_table_keys(control: ir.Control) -> None:
    """Move the calling keys of `control`'s tables into variables set before each apply."""
    fresh = fresh_names({d.name for d in control.locals if isinstance(d, ir.VarDecl)})
    computed: dict[int, list[ir.Assign]] = {}  # id(table) -> the assignments to run before applying it
    for table in control.tables.values():
        for key in table.keys:
            if any(isinstance(n, _CALLS) for n in walk(key.expr)):
                var = ir.VarDecl(fresh("key"), key.expr.type, loc=key.loc)
                control.locals.append(var)
                ref = ir.VarRef(var.type, key.loc, var.name, var)
                computed.setdefault(id(table), []).append(ir.Assign(key.loc, ref, key.expr))
                key.expr = clone(ref)
    if not computed:
        return

    def before_applies(s: ir.Stmt) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for e in _own_exprs(s):
            top = e.expr if isinstance(e, ir.Unary) and e.op == "!" else e
            for n in walk(e):
                if isinstance(n, _APPLIES) and id(n.table) in computed:
                    if n is not top:
                        raise P4Error(f"unsupported: table {n.table.name}, whose key calls something, applied "
                                      "inside a larger expression", n.loc.file, n.loc.line, n.loc.col)
                    out += SideEffectOrdering().run_stmts([clone(a) for a in computed[id(n.table)]])
        return out + [s]

    control.body.stmts = flat_map_stmts(control.body.stmts, before_applies)


def _own_exprs(s: ir.Stmt) -> list[ir.Expr]:
    """The expressions a statement evaluates itself (not those of the statements inside it)."""
    if isinstance(s, ir.If):
        return [s.cond]
    if isinstance(s, ir.Switch):
        return [s.subject]
    if isinstance(s, ir.MethodCallStmt):
        return [s.call]
    if isinstance(s, ir.Assign):
        return [s.lhs, s.rhs]
    if isinstance(s, ir.VarDeclStmt) and s.decl.init is not None:
        return [s.decl.init]
    return []
