"""Statements as primitive lists: assignments, header and stack methods, `if` and loops as jumps, inlined actions."""
from __future__ import annotations

from p4target.frontend import ir
from p4target.frontend.passes.walk import walk
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import fail, type_width
from p4target.lowered.from_ir.externs import Externs
from p4target.lowered.from_ir.storage import (
    HeaderStore,
    Scalar,
    StackStore,
    Storage,
    Store,
    StructStore,
    UnionStore,
    headers_of,
    scalars_of,
)
from p4target.lowered.from_ir.values import Values


def _exits(stmts: list[ir.Stmt]) -> bool:
    """Whether an `exit` is among these statements (at any depth)."""
    return any(isinstance(n, ir.Exit) for n in walk(stmts))


def _needs_no_copies(p: ir.Param, a: ir.Action) -> bool:
    """A parameter the body never names needs no copy, as in p4c's JSON (reading the argument could be a stack
    element at an out-of-range index, where simple_switch aborts): an in parameter's copy in is dead; an inout
    one's copy out writes back what was copied in, a no-op when the body is empty, but not when the body writes
    the same place through another name (the copy out then undoes it, as P4 says). An out parameter's copy out
    stays, as p4c's does: it writes the argument."""
    if p.direction == "out" or any(isinstance(n, ir.VarRef) and n.decl is p for n in walk(a.body)):
        return False
    return p.direction != "inout" or not a.body.stmts


def _relocated(prim: m.Primitive, base: int) -> m.Primitive:
    """A primitive moved `base` places down its action: its jump targets move with it."""
    if prim.op == "_jump" and isinstance(prim.parameters[0], m.Const) and prim.parameters[0].value >= 0:
        return m.Primitive("_jump", [m.Const(prim.parameters[0].value + base)])
    if prim.op == "_jump_if_zero" and isinstance(prim.parameters[1], m.Const):
        return m.Primitive("_jump_if_zero", [prim.parameters[0], m.Const(prim.parameters[1].value + base)])
    return prim


class Statements:
    """Primitives of actions and of the statements between tables."""

    def __init__(self, storage: Storage, values: Values, externs: Externs):
        self.s, self.v, self.x = storage, values, externs
        self.actions: dict[int, m.Action] = {}  # id(ir.Action) -> lowered (table-called actions)
        self.loops: list[tuple[list[int], list[int]]] = []  # per enclosing Loop: its breaks' and continues' jumps

    def assign(self, out: list[m.Primitive], lhs: ir.Expr, rhs: ir.Expr, loc: ir.Loc) -> None:
        if isinstance(lhs, ir.Slice):
            self.v.assign_slice(out, lhs, self.v.data(rhs))
            return
        dst = self.v.store_of(lhs)
        self.assign_store(out, dst, rhs, loc)

    def assign_store(self, out: list[m.Primitive], dst: Store, rhs: ir.Expr, loc: ir.Loc) -> None:
        if isinstance(dst, Scalar):
            if isinstance(dst.type, ir.VarbitType):
                src = self.v.store_of(rhs)
                assert isinstance(src, Scalar)
                out.append(m.Primitive("assign_VL", [dst.ref, src.ref]))
                return
            out.append(m.Primitive("assign", [dst.ref, self.v.data(rhs)]))
            return
        if isinstance(rhs, ir.StructExpr):
            if isinstance(dst, HeaderStore):
                out.append(m.Primitive("add_header", [dst.ref]))
                for name, value in rhs.fields.items():
                    self.assign_store(out, self.v.header_field(dst, name, loc), value, loc)
                return
            if isinstance(dst, StructStore):
                for name, value in rhs.fields.items():
                    self.assign_store(out, dst.fields[name], value, loc)
                return
        if isinstance(rhs, ir.ExternMethodCall) and rhs.method == "lookahead":
            raise fail("a header or struct from packet.lookahead()", loc)
        src = self.v.store_of(rhs)
        self.copy(out, dst, src, loc)

    def copy(self, out: list[m.Primitive], dst: Store, src: Store, loc: ir.Loc) -> None:
        if isinstance(dst, HeaderStore) and isinstance(src, HeaderStore):
            out.append(m.Primitive("assign_header", [dst.ref, src.ref]))
        elif isinstance(dst, Scalar) and isinstance(src, Scalar):
            if isinstance(dst.type, ir.VarbitType):
                out.append(m.Primitive("assign_VL", [dst.ref, src.ref]))
            else:
                out.append(m.Primitive("assign", [dst.ref, src.ref]))
        elif isinstance(dst, StructStore) and isinstance(src, StructStore):
            for name in dst.fields:
                self.copy(out, dst.fields[name], src.fields[name], loc)
        elif isinstance(dst, UnionStore) and isinstance(src, UnionStore):
            if dst.name and src.name:
                out.append(m.Primitive("assign_union", [m.UnionRef(dst.name), m.UnionRef(src.name)]))
            else:  # one reached through a run-time index has no name: member by member, validity included
                for name in dst.members:
                    self.copy(out, dst.members[name], src.members[name], loc)
        elif isinstance(dst, StackStore) and isinstance(src, StackStore):
            if isinstance(dst.type.element, ir.HeaderType):
                out.append(m.Primitive("assign_header_stack", [m.StackRef(dst.name), m.StackRef(src.name)]))
            else:  # a stack of unions: union by union
                for d, s in zip(dst.elements, src.elements):
                    self.copy(out, d, s, loc)
        else:
            raise fail("an assignment between values of different shapes", loc)

    def prims(self, stmts: list[ir.Stmt], out: list[m.Primitive], ends: list[int]) -> None:
        """Append `stmts` as primitives; `ends` collects the indexes of jumps to the end (return)."""
        for s in stmts:
            self.prim(s, out, ends)

    def prim(self, s: ir.Stmt, out: list[m.Primitive], ends: list[int]) -> None:
        if isinstance(s, ir.Block):
            self.prims(s.stmts, out, ends)
        elif isinstance(s, ir.Assign):
            assert s.lhs is not None and s.rhs is not None
            self.assign(out, s.lhs, s.rhs, s.loc)
        elif isinstance(s, ir.MethodCallStmt):
            assert s.call is not None
            self.call(s.call, out, ends)
        elif isinstance(s, ir.If):
            assert s.cond is not None
            jz = len(out)
            out.append(m.Primitive("_jump_if_zero", [m.Expr("b2d", None, self.v.cond(s.cond)), m.Const(0)]))
            if s.then is not None:
                self.prim(s.then, out, ends)
            if s.else_ is not None:
                jmp = len(out)
                out.append(m.Primitive("_jump", [m.Const(0)]))
                out[jz].parameters[1] = m.Const(len(out))
                self.prim(s.else_, out, ends)
                out[jmp].parameters[0] = m.Const(len(out))
            else:
                out[jz].parameters[1] = m.Const(len(out))
        elif isinstance(s, ir.Switch):
            self.switch_prims(s, out, ends)
        elif isinstance(s, ir.Loop):
            self.loop_prims(s, out, ends)
        elif isinstance(s, ir.LoopJump):
            breaks, continues = self.loops[-1]
            (breaks if s.kind == "break" else continues).append(len(out))
            out.append(m.Primitive("_jump", [m.Const(0)]))
        elif isinstance(s, ir.Exit) and self.v.exiting is not None:  # in an inlined action: copy out first
            out.append(m.Primitive("assign", [self.v.exiting.ref, m.Const(1)]))
            ends.append(len(out))
            out.append(m.Primitive("_jump", [m.Const(-1)]))
        elif isinstance(s, ir.Exit):
            out.append(m.Primitive("exit", []))
        elif isinstance(s, ir.Return):
            ends.append(len(out))
            out.append(m.Primitive("_jump", [m.Const(-1)]))
        elif isinstance(s, ir.VarDeclStmt):
            assert s.decl is not None
            dst = self.s.storage(s.decl, s.loc)
            if s.decl.init is not None:
                self.assign_store(out, dst, s.decl.init, s.loc)
            else:
                self.reset(out, dst)
        else:
            raise fail(f"statement {type(s).__name__} is not lowered here", s.loc)

    def loop_prims(self, s: ir.Loop, out: list[m.Primitive], ends: list[int]) -> None:
        """A loop as p4c writes one: the body (its condition first), the update, a jump back to the body."""
        top = len(out)
        breaks: list[int] = []
        continues: list[int] = []
        self.loops.append((breaks, continues))
        self.prim(s.body, out, ends)
        self.loops.pop()
        for j in continues:
            out[j].parameters[0] = m.Const(len(out))
        self.prim(s.update, out, ends)
        out.append(m.Primitive("_jump", [m.Const(top)]))
        for j in breaks:
            out[j].parameters[0] = m.Const(len(out))

    def switch_prims(self, s: ir.Switch, out: list[m.Primitive], ends: list[int]) -> None:
        """A switch on a value inside an action: a chain of compare-and-jump."""
        assert s.subject is not None
        subject = self.v.data(s.subject)
        to_end: list[int] = []
        bodies: list[tuple[list[int], ir.Block | None]] = []
        for case in s.cases:
            tests = []
            for label in case.labels:
                if label is None:
                    tests.append(len(out))
                    out.append(m.Primitive("_jump", [m.Const(0)]))
                else:
                    tests.append(len(out))
                    out.append(m.Primitive("_jump_if_zero", [
                        m.Expr("b2d", None, m.Expr("!=", subject, self.v.data(label))), m.Const(0)]))
            bodies.append((tests, case.body))
        to_end.append(len(out))
        out.append(m.Primitive("_jump", [m.Const(0)]))
        pending: list[int] = []
        for tests, body in bodies:
            pending += tests
            if body is None:
                continue
            for t in pending:
                out[t].parameters[-1] = m.Const(len(out))
            pending = []
            self.prim(body, out, ends)
            to_end.append(len(out))
            out.append(m.Primitive("_jump", [m.Const(0)]))
        for j in to_end:
            out[j].parameters[0] = m.Const(len(out))

    def reset(self, out: list[m.Primitive], s: Store) -> None:
        for x in scalars_of(s):
            if not isinstance(x.type, ir.VarbitType):
                out.append(m.Primitive("assign", [x.ref, m.Const(0)]))
        for h in headers_of(s):
            out.append(m.Primitive("remove_header", [h.ref]))

    def call(self, c: ir.Expr, out: list[m.Primitive], ends: list[int]) -> None:
        if isinstance(c, ir.HeaderMethodCall):
            self.header_method(c, out)
        elif isinstance(c, ir.ExternFunctionCall):
            self.x.extern_function(c, out)
        elif isinstance(c, ir.ExternMethodCall):
            self.x.extern_method(c, out)
        elif isinstance(c, ir.ActionCall):
            self.inline_action(c, out)
        else:
            raise fail(f"{type(c).__name__} inside an action or between tables", c.loc)

    def header_method(self, c: ir.HeaderMethodCall, out: list[m.Primitive]) -> None:
        assert c.header is not None
        s = self.v.store_of(c.header)
        if c.method in ("setValid", "setInvalid") and isinstance(s, HeaderStore):
            out.append(m.Primitive("add_header" if c.method == "setValid" else "remove_header", [s.ref]))
        elif c.method in ("push_front", "pop_front") and isinstance(s, StackStore):
            out.append(m.Primitive("push" if c.method == "push_front" else "pop",
                                   [m.StackRef(s.name), self.v.data(c.args[0])]))
        elif c.method == "isValid":
            pass  # a value nobody reads
        else:
            raise fail(f"{c.method}() here", c.loc)

    def inline_action(self, c: ir.ActionCall, out: list[m.Primitive]) -> None:
        """A control calling an action directly: copy in, the body, copy out (also after `exit`)."""
        a = c.action
        assert a is not None
        saved_params, saved_bound = self.v.params, self.v.bound
        self.v.params, self.v.bound = {}, dict(self.v.bound or {})
        copies = []
        for p, arg in zip(a.params, c.args):
            if _needs_no_copies(p, a):
                continue
            s = self.s.alloc(f"{a.name}.{p.name}", p.type, p.loc)
            self.v.bound[id(p)] = s
            if p.direction in ("", "in", "inout"):
                self.assign_store(out, s, arg, c.loc)
            if p.direction in ("out", "inout"):
                copies.append((arg, s))
        saved_exiting = self.v.exiting
        exiting = self.v.exiting = self.s.tmp(ir.BitsType(1), c.loc) if copies and _exits(a.body.stmts) else None
        if exiting is not None:
            out.append(m.Primitive("assign", [exiting.ref, m.Const(0)]))
        body: list[m.Primitive] = []
        ends: list[int] = []
        self.prims(a.body.stmts, body, ends)
        self.v.exiting = saved_exiting
        base = len(out)
        out += [_relocated(prim, base) for prim in body]
        for i in ends:
            out[base + i] = m.Primitive("_jump", [m.Const(len(out))])
        for arg, s in copies:
            if isinstance(arg, ir.Slice):
                assert isinstance(s, Scalar)
                self.v.assign_slice(out, arg, s.ref)
            else:
                self.copy(out, self.v.store_of(arg), s, c.loc)
        if exiting is not None:
            out.append(m.Primitive("_jump_if_zero", [exiting.ref, m.Const(len(out) + 2)]))
            out.append(m.Primitive("exit", []))
        self.v.params, self.v.bound = saved_params, saved_bound

    def table_action(self, a: ir.Action) -> m.Action:
        got = self.actions.get(id(a))
        if got is not None:
            return got
        data = a.data_params
        self.v.params = {id(p): i for i, p in enumerate(data)}
        self.v.bound = {}
        prims: list[m.Primitive] = []
        ends: list[int] = []
        self.prims(a.body.stmts, prims, ends)
        for i in ends:
            prims[i].parameters[0] = m.Const(len(prims))
        self.v.params, self.v.bound = {}, None
        action = m.Action(a.control_plane_name, self.s.next_id("action"), [(p.name, type_width(p.type)) for p in data],
                          prims)
        self.actions[id(a)] = action
        self.s.p.actions.append(action)
        return action

    def synthesized_action(self, name: str, prims: list[m.Primitive]) -> m.Action:
        action = m.Action(self.s.unique(name), self.s.next_id("action"), [], prims)
        self.s.p.actions.append(action)
        return action
