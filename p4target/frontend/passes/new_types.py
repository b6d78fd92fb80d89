"""Erase `type` declarations once checked: a `type bit<32> T;` value is a bit<32> to every
back end (and to P4Info, which names T only for @p4runtime_translation, not supported here)."""
from __future__ import annotations

from .. import ir
from .walk import walk


def erase_new_types(program: ir.Program) -> None:
    """`type` declarations give way to their underlying types (in place)."""
    if not any(isinstance(t, ir.NewType) for t in program.types.values()):
        return
    for t in program.types.values():
        if isinstance(t, ir.StructLikeType):
            for f in t.fields:
                f.type = underlying(f.type)
    for c in program.constants.values():
        c.type = underlying(c.type)
        c.value.type = underlying(c.value.type)
    code: list = []
    for a in program.all_actions():
        _params(a.params)
        code.append(a.body)
    for b in list(program.parsers.values()) + list(program.controls.values()):
        _params(b.params)
        for d in b.locals:
            if isinstance(d, ir.VarDecl):
                d.type = underlying(d.type)
                if d.init is not None:
                    code.append(d.init)
            elif isinstance(d, ir.ExternInstance):
                d.type_args = [underlying(x) for x in d.type_args]
                d.type = _extern_underlying(d.type)
                code.append(d.args)
            elif isinstance(d, ir.Table):
                code += [d.keys, d.actions, d.entries, d.default_action]
        code.append(b.body if isinstance(b, ir.Control) else list(b.states.values()))
    for n in walk(code):
        if isinstance(n, ir.Expr):
            n.type = underlying(n.type)
            if isinstance(n, (ir.ExternMethodCall, ir.ExternFunctionCall)):
                n.type_args = [underlying(x) for x in n.type_args]
        elif isinstance(n, ir.VarDeclStmt):
            n.decl.type = underlying(n.decl.type)


def underlying(t: ir.Type) -> ir.Type:
    """`t` with new types replaced by what they are made of (also inside extern types)."""
    if isinstance(t, ir.NewType):
        return underlying(t.underlying)
    if isinstance(t, ir.ExternType):
        return _extern_underlying(t)
    if isinstance(t, ir.TupleType):
        return ir.TupleType(tuple(underlying(x) for x in t.elements))
    return t


def _extern_underlying(t: ir.ExternType) -> ir.ExternType:
    if t.type_args:
        return ir.ExternType(t.name, tuple(underlying(x) for x in t.type_args), t.decl)
    return t


def _params(params: list[ir.Param]) -> None:
    for p in params:
        p.type = underlying(p.type)
