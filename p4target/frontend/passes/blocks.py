"""Inline sub-parser and sub-control instances into the block that declares them (p4c's
Inline pass), innermost first, so back ends see only the six v1model blocks.

An instance's objects (tables, actions, externs, variables) move into the enclosing block;
the checker already named them for P4Info (`MyIngress.sub.t`). Each `inst.apply(args)`
becomes the instance's body (a parser's states, for a sub-parser) with its parameters
passed as p4c does: when every call site passes the same arguments and they do not
overlap, the parameters are replaced by the arguments themselves; otherwise each parameter
is a variable of the enclosing block, copied in before and out after the call. An `out`
parameter's headers are invalidated at each call. A sub-parser that accepts continues in a
new state holding the rest of the calling state; one that rejects rejects.
"""
from __future__ import annotations

from typing import TypeVar, cast

from ...errors import P4Error
from .. import ir
from .returns import remove_returns
from .walk import clone, flat_map_stmts, fresh_names, map_block_exprs, same_expr, walk

Block = ir.Parser | ir.Control
T = TypeVar("T")


def inline_blocks(block: Block) -> None:
    """Inline every instance declared in `block` (and, first, those inside them)."""
    instances = [d for d in block.locals if isinstance(d, ir.BlockInstance)]
    if not instances:
        return
    for inst in instances:
        inline_blocks(inst.block)
    # an instance passed to a later one as a constructor argument is applied from the later
    # one's body: inline the later ones first
    for inst in reversed(instances):
        if isinstance(block, ir.Control):
            _inline_control(block, inst)
        else:
            _inline_parser(block, inst)
    block.locals = [d for d in block.locals if not isinstance(d, ir.BlockInstance)]  # those never applied
    if isinstance(block, ir.Control):
        _in_declaration_order(block)


def _in_declaration_order(control: ir.Control) -> None:
    """The control's tables, actions and instances in the order of its locals, where each inlined
    block's objects took the place of its instance (p4c's order, which P4Info follows)."""
    position = {id(d): i for i, d in enumerate(control.locals)}

    def ordered(objects: dict[str, T]) -> dict[str, T]:
        return dict(sorted(objects.items(), key=lambda item: position.get(id(item[1]), len(position))))
    control.actions, control.tables = ordered(control.actions), ordered(control.tables)
    control.instances = ordered(control.instances)


# ---------------------------------------------------------------------- parameters


class _Params:
    """How one instance's parameters are passed: replaced by arguments or by variables."""

    def __init__(self, caller: Block, inst: ir.BlockInstance, calls: list[ir.ApplyCall]):
        self.params = inst.block.params
        first = calls[0].args
        self.substitute = (all(same_expr(c.args, first) for c in calls[1:]) and not _overlapping(first)
                           and all(_is_path(a) or isinstance(a, (ir.Constant, ir.BoolLiteral, ir.EnumMember))
                                   for a in first))
        self.value: dict[int, ir.Expr] = {}  # id(param) -> what replaces it
        for p, arg in zip(self.params, first):
            if self.substitute or p.direction == "" or isinstance(p.type, ir.ExternType):  # packet_in: never copied
                self.value[id(p)] = arg
            else:
                var = ir.VarDecl(f"{inst.name}_{p.name}", p.type, loc=p.loc)
                caller.locals.append(var)
                self.value[id(p)] = ir.VarRef(p.type, p.loc, var.name, var)

    def replace(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.VarRef) and id(e.decl) in self.value:
            return clone(self.value[id(e.decl)])
        return e

    def copy_in(self, call: ir.ApplyCall) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for p, arg in zip(self.params, call.args):
            target = self.value[id(p)]
            if isinstance(p.type, ir.ExternType):
                continue
            if p.direction == "out":
                out.extend(invalidate(clone(target), call.loc))
            elif p.direction == "inout" or p.direction == "in":
                if not self.substitute:
                    out.append(ir.Assign(call.loc, clone(target), arg))
        return out

    def copy_out(self, call: ir.ApplyCall) -> list[ir.Stmt]:
        if self.substitute:
            return []
        return [ir.Assign(call.loc, arg, clone(self.value[id(p)])) for p, arg in zip(self.params, call.args)
                if p.direction in ("out", "inout") and not isinstance(arg, ir.DontCare)
                and not isinstance(p.type, ir.ExternType)]


def invalidate(e: ir.Expr, loc: ir.Loc) -> list[ir.Stmt]:
    """Statements making every header inside `e` invalid (an `out` parameter's start)."""
    t = e.type
    if isinstance(t, ir.HeaderType):
        return [ir.MethodCallStmt(loc, ir.HeaderMethodCall(ir.VoidType(), loc, e, "setInvalid", []))]
    if isinstance(t, (ir.StructType, ir.HeaderUnionType)):
        return [s for f in t.fields for s in invalidate(ir.Member(f.type, loc, clone(e), f.name), loc)]
    if isinstance(t, ir.StackType):
        return [s for i in range(t.size)
                for s in invalidate(ir.ArrayIndex(t.element, loc, clone(e), ir.Constant(ir.BitsType(32), loc, i)), loc)]
    return []


def _is_path(e: ir.Expr) -> bool:
    while isinstance(e, (ir.Member, ir.ArrayIndex, ir.Slice)):
        e = e.expr
    return isinstance(e, (ir.VarRef, ir.DontCare))


def _locations(e: ir.Expr) -> list[tuple]:
    """The storage `e` reads or writes, as (root declaration id, field path) with '*' for a
    run-time stack index."""
    if isinstance(e, ir.VarRef):
        return [(id(e.decl),)]
    if isinstance(e, ir.Member) and _is_path(e):
        return [loc + (e.member,) for loc in _locations(e.expr)]
    if isinstance(e, ir.ArrayIndex) and _is_path(e):
        index = e.index.value if isinstance(e.index, ir.Constant) else "*"
        return [loc + (index,) for loc in _locations(e.expr)] + _locations(e.index)
    if isinstance(e, ir.Slice) and _is_path(e):
        return _locations(e.expr)
    return [loc for n in walk(e) if n is not e and isinstance(n, ir.VarRef) for loc in _locations(n)]


def _overlapping(args: list[ir.Expr]) -> bool:
    sets = [_locations(a) for a in args]
    for i, a in enumerate(sets):
        for b in sets[i + 1:]:
            if any(_prefix(x, y) for x in a for y in b):
                return True
    return False


def _prefix(a: tuple, b: tuple) -> bool:
    """Whether one location contains the other ('*' matches any index)."""
    return all(x == y or "*" in (x, y) for x, y in zip(a, b))


def _apply_calls(code: object, inst: ir.BlockInstance) -> list[ir.ApplyCall]:
    return [n for n in walk(code) if isinstance(n, ir.ApplyCall) and n.instance is inst]


def _move_objects(caller: Block, callee: Block, inst: ir.BlockInstance) -> None:
    """The callee's declarations become the caller's, in its instance's place, keyed `inst.name` + the callee's own key: an
    object the callee got from a block inlined into it keeps that block's prefix, so two inner
    blocks' `on_miss` stay two actions."""
    at = next(i for i, d in enumerate(caller.locals) if d is inst)
    caller.locals[at:at + 1] = callee.locals
    if isinstance(caller, ir.Control) and isinstance(callee, ir.Control):
        def prefixed(objects: dict[str, T]) -> dict[str, T]:
            return {f"{inst.name}.{key}": d for key, d in objects.items()}
        caller.actions.update(prefixed(callee.actions))
        caller.tables.update(prefixed(callee.tables))
        caller.instances.update(prefixed(callee.instances))


# ---------------------------------------------------------------------- controls


def _inline_control(caller: ir.Control, inst: ir.BlockInstance) -> None:
    calls = _apply_calls(caller.body, inst)
    if not calls:
        return  # never applied: p4c drops it and its objects
    callee = cast(ir.Control, inst.block)  # applied in a control: the checker allows only a control there
    params = _Params(caller, inst, calls)
    map_block_exprs(callee, params.replace)
    _move_objects(caller, callee, inst)
    body = remove_returns(callee.body.stmts, callee.body.loc, None, f"{inst.name}_returned")
    remaining = [len(calls)]

    def expand(s: ir.Stmt) -> list[ir.Stmt]:
        if not (isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ApplyCall) and s.call.instance is inst):
            return [s]
        remaining[0] -= 1
        code = body if remaining[0] == 0 else clone(body)
        return [ir.Block(s.loc, params.copy_in(s.call) + code + params.copy_out(s.call))]

    caller.body.stmts = flat_map_stmts(caller.body.stmts, expand)
    if remaining[0]:
        raise P4Error(f"{inst.name}.apply() can only be a statement of its own",
                      inst.loc.file, inst.loc.line, inst.loc.col)


# ---------------------------------------------------------------------- parsers


def _inline_parser(caller: ir.Parser, inst: ir.BlockInstance) -> None:
    calls = _apply_calls(list(caller.states.values()), inst)
    if not calls:
        return
    for state in caller.states.values():
        for s in state.body:
            for n in walk(s):
                if isinstance(n, ir.ApplyCall) and n.instance is inst and not (
                        isinstance(s, ir.MethodCallStmt) and s.call is n):
                    raise P4Error(f"unsupported: {inst.name}.apply() inside a conditional statement",
                                  n.loc.file, n.loc.line, n.loc.col)
    callee = cast(ir.Parser, inst.block)  # applied in a parser state: the checker allows only a parser there
    params = _Params(caller, inst, calls)
    map_block_exprs(callee, params.replace)
    _move_objects(caller, callee, inst)
    fresh = fresh_names(set(caller.states) | {"accept", "reject"})

    states: dict[str, ir.ParserState] = {}
    for state in caller.states.values():
        name, body, annotations = state.name, [], state.annotations
        for s in state.body:
            if not (isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ApplyCall) and s.call.instance is inst):
                body.append(s)
                continue
            after = fresh(f"{state.name}_after_{inst.name}")
            renamed = {"accept": after, "reject": "reject"}
            renamed.update({n: fresh(f"{inst.name}_{n}") for n in callee.states})
            start = ir.DirectTransition(renamed["start"], s.loc)
            states[name] = ir.ParserState(name, body + params.copy_in(s.call), start, annotations, state.loc)
            for sub in clone(list(callee.states.values())):
                _rename_transitions(sub, renamed)
                sub.name = renamed[sub.name]
                states[sub.name] = sub
            name, body, annotations = after, params.copy_out(s.call), ir.Annotations()
        states[name] = ir.ParserState(name, body, state.transition, annotations, state.loc)
    caller.states = states


def _rename_transitions(state: ir.ParserState, renamed: dict[str, str]) -> None:
    tr = state.transition
    if isinstance(tr, ir.DirectTransition):
        tr.next = renamed[tr.next]
    else:
        for case in tr.cases:
            case.next = renamed[case.next]

