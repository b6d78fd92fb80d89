"""Generic walking, rewriting and copying of IR code (statements, expressions, keysets).

"Code" nodes own their sub-nodes (an If owns its condition and branches); everything else a
code node points to is a reference, shared and never walked into: types, locations,
annotations, and the declarations named by fields `decl`, `table`, `action`, `function`,
`instance` (a VarRef points at its Param/VarDecl; a TableApply at its Table). The one
exception is `VarDeclStmt.decl`: a variable declared by a statement belongs to it.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .. import ir

CODE = (ir.Expr, ir.Stmt, ir.KeySet, ir.SwitchCase, ir.SelectCase, ir.Transition, ir.ParserState,
        ir.KeyElement, ir.TableEntry, ir.ActionBinding, ir.ActionRef)
T = TypeVar("T")
_NOT_OWNED = frozenset({"type", "loc", "annotations", "decl", "table", "action", "function", "instance"})


_OWNED: dict[type, tuple[str, ...]] = {}


def _owned(cls: type) -> tuple[str, ...]:
    names = _OWNED.get(cls)
    if names is None:
        names = _OWNED[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name not in _NOT_OWNED)
    return names


def _fields(node: object) -> Iterator[tuple[str, object]]:
    """(name, value) of the fields a code node owns."""
    for name in _owned(type(node)):
        yield name, getattr(node, name)


def fresh_names(taken: set[str], sep: str = "_") -> Callable[[str], str]:
    """`fresh(name)`: `name`, or `name_1`, `name_2`... (`sep` between) the first not in `taken` (which it joins)."""
    def fresh(name: str) -> str:
        n, i = name, 0
        while n in taken:
            i += 1
            n = f"{name}{sep}{i}"
        taken.add(n)
        return n
    return fresh


def walk(node: object) -> Iterator[object]:
    """Every code node in `node` (a code node, or a list/dict of them), pre-order."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(reversed(n))
        elif isinstance(n, dict):
            stack.extend(reversed(list(n.values())))
        elif isinstance(n, CODE):
            yield n
            if isinstance(n, ir.VarDeclStmt) and n.decl.init is not None:
                stack.append(n.decl.init)
            for name in reversed(_owned(type(n))):
                value = getattr(n, name)
                if isinstance(value, (list, dict, CODE)):
                    stack.append(value)


def map_exprs(node: object, fn: Callable[[ir.Expr], ir.Expr]) -> None:
    """Replace, in place, every expression e inside code node `node` by fn(e), innermost first."""
    for name, value in _fields(node):
        setattr(node, name, _map(value, fn))
    if isinstance(node, ir.VarDeclStmt) and node.decl.init is not None:
        node.decl.init = _map(node.decl.init, fn)


def _map(value: Any, fn: Callable[[ir.Expr], ir.Expr]) -> Any:
    """`value` (code, or a list/dict of it) with its expressions mapped: the same shape."""
    if isinstance(value, list):
        return [_map(x, fn) for x in value]
    if isinstance(value, dict):
        return {k: _map(x, fn) for k, x in value.items()}
    if isinstance(value, CODE):
        map_exprs(value, fn)
        return fn(value) if isinstance(value, ir.Expr) else value
    return value


def clone(node: T, memo: dict | None = None) -> T:
    """A deep copy of code `node`: code nodes and the variables its statements declare are
    copied, references are shared unless `memo` (id(old) -> new) maps them (e.g. a function's
    parameters to the temporaries of one inlined call)."""
    return _clone(node, {} if memo is None else memo)


def _clone(value: Any, memo: dict) -> Any:
    if isinstance(value, list) and not isinstance(value, ir.Annotations):
        return [_clone(x, memo) for x in value]
    if isinstance(value, dict):
        return {k: _clone(x, memo) for k, x in value.items()}
    if not isinstance(value, CODE):
        return memo.get(id(value), value)
    new = copy.copy(value)
    for f in dataclasses.fields(value):
        if f.name in ("type", "loc", "annotations"):
            continue
        old = getattr(value, f.name)
        if f.name == "decl" and isinstance(new, ir.VarDeclStmt):
            decl = copy.copy(old)
            decl.init = _clone(old.init, memo)
            memo[id(old)] = decl
            new.decl = decl
        else:
            setattr(new, f.name, _clone(old, memo))
    if isinstance(new, ir.VarRef) and isinstance(value, ir.VarRef) and new.decl is not value.decl:
        new.name = new.decl.name
    return new


def flat_map_stmts(stmts: list[ir.Stmt], fn: Callable[[ir.Stmt], list[ir.Stmt]]) -> list[ir.Stmt]:
    """Replace every statement s (nested ones first) by the statements fn(s)."""
    out: list[ir.Stmt] = []
    for s in stmts:
        if isinstance(s, ir.Block):
            s.stmts = flat_map_stmts(s.stmts, fn)
        elif isinstance(s, ir.If):
            s.then = as_stmt(flat_map_stmts([s.then], fn), s.then.loc)
            if s.else_ is not None:
                s.else_ = as_stmt(flat_map_stmts([s.else_], fn), s.else_.loc)
        elif isinstance(s, ir.Switch):
            for case in s.cases:
                if case.body is not None:
                    case.body.stmts = flat_map_stmts(case.body.stmts, fn)
        elif isinstance(s, ir.Loop):
            s.body.stmts = flat_map_stmts(s.body.stmts, fn)
            s.update.stmts = flat_map_stmts(s.update.stmts, fn)
        out.extend(fn(s))
    return out


def map_block_stmts(block: ir.Parser | ir.Control, fn: Callable[[list[ir.Stmt]], list[ir.Stmt]]) -> None:
    """Replace each statement list of a Parser or Control (its actions' bodies, the control's apply
    body, the parser's states) by fn(list)."""
    for d in block.locals:
        if isinstance(d, ir.Action):
            d.body.stmts = fn(d.body.stmts)
    if isinstance(block, ir.Control):
        block.body.stmts = fn(block.body.stmts)
    else:
        for state in block.states.values():
            state.body = fn(state.body)


def as_stmt(stmts: list[ir.Stmt], loc: ir.Loc) -> ir.Stmt:
    """One statement for a list of them."""
    return stmts[0] if len(stmts) == 1 else ir.Block(loc, stmts)


def completes(s: ir.Stmt) -> bool:
    """Whether execution can go on after `s` (False when every path returns or exits)."""
    if isinstance(s, (ir.Return, ir.Exit)):
        return False
    if isinstance(s, ir.Block):
        return all(completes(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return s.else_ is None or completes(s.then) or completes(s.else_)
    if isinstance(s, ir.Switch):
        has_default = any(label is None for c in s.cases for label in c.labels)
        return not has_default or any(c.body is None or completes(c.body) for c in s.cases)
    return True


def same_expr(a: object, b: object) -> bool:
    """Structural equality of two expressions (declarations compared by identity)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_expr(a[k], b[k]) for k in a)
    if not isinstance(a, CODE):
        return a is b or (not dataclasses.is_dataclass(a) and a == b)
    for f in dataclasses.fields(a):
        if f.name in ("loc", "annotations"):
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "type":
            if x is not y and x != y:
                return False
        elif not same_expr(x, y):
            return False
    return True


def map_block_exprs(block: ir.Parser | ir.Control, fn: Callable[[ir.Expr], ir.Expr]) -> None:
    """map_exprs over all the code a Parser or Control owns: variable initializers, extern
    constructor arguments, action bodies, table properties, the apply body or the states."""
    for d in block.locals:
        if isinstance(d, ir.VarDecl) and d.init is not None:
            d.init = _map(d.init, fn)
        elif isinstance(d, ir.ExternInstance):
            d.args = _map(d.args, fn)
        elif isinstance(d, ir.Action):
            map_exprs(d.body, fn)
        elif isinstance(d, ir.Table):
            for part in (d.keys, d.actions, d.entries):
                _map(part, fn)
            if d.default_action is not None:
                map_exprs(d.default_action, fn)
            d.other_properties = _map(d.other_properties, fn)
    if isinstance(block, ir.Control):
        map_exprs(block.body, fn)
    else:
        _map(list(block.states.values()), fn)
