"""Statements: blocks, variables, assignments, if/switch, returns and exits; for loops unrolled, or in an action or
function kept as loops when their trip count is not known at compile time."""
from __future__ import annotations

from lark import Token, Tree

from ...errors import P4Error
from .. import ir
from ..passes.walk import walk
from ..typing import BOOL, is_numeric
from .annotations import Annotations
from .calls import Calls
from .constants import const_key, is_constant
from .expressions import Expressions
from .names import HIDDEN, BlockDecl, Checking, Names, Node, Scope
from .types import Types

MAX_UNROLL = 1024  # iterations of one for loop: unrolling copies the body that many times
NO_UNROLL = "(outside an action BMv2 runs no loops: only loops with a constant trip count unroll)"


class NotUnrollable(P4Error):
    """A for loop whose trip count is not known at compile time: an error outside an action, a Loop inside one."""


def has_jump(s: ir.Stmt | None) -> bool:
    """Whether a break or continue of the loop being unrolled is in `s` (one of a Loop inside belongs to it)."""
    if isinstance(s, ir.LoopJump):
        return True
    if isinstance(s, ir.Block):
        return any(has_jump(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return has_jump(s.then) or has_jump(s.else_)
    if isinstance(s, ir.Switch):
        return any(has_jump(c.body) for c in s.cases)
    return False


class Statements:
    """Statement trees -> ir.Stmt, in the Context of the enclosing block."""

    def __init__(self, n: Names, e: Expressions, an: Annotations, ty: Types, ca: Calls, up: Checking):
        self.n, self.e, self.an, self.ty, self.ca, self.up = n, e, an, ty, ca, up

    def block(self, node: Tree, scope: Scope) -> ir.Block:
        inner = Scope(scope)
        return ir.Block(self.n.loc(node), [self.statement(s, inner) for s in node.children])

    def var_decl(self, node: Tree, scope: Scope) -> ir.VarDecl:
        ann, type_node, name_node, init = node.children
        t = self.ty.resolve_type(type_node, scope)
        if isinstance(t, (ir.ExternType, ir.VoidType, ir.InfIntType, ir.StringType)):
            raise self.n.error(type_node, f"cannot declare a variable of type {t}")
        if isinstance(t, ir.TupleType):
            t = self.tuple_struct(t)
        value = self.e.coerce(self.e.expr(init, scope, t), t, init) if init is not None else None
        name = self.n.name_of(name_node)
        decl = ir.VarDecl(name, t, value, self.an.annotations(ann), self.n.loc(name_node))
        self.n.declare(scope, name, decl, name_node)
        return decl

    def tuple_struct(self, t: ir.TupleType) -> ir.StructType:
        """The struct (fields f0, f1, ...) standing for a tuple type in variables: stored and
        initialized like any struct, so back ends need no tuples."""
        s = self.n.tuple_structs.get(t)
        if s is None:
            s = ir.StructType(str(t), [ir.Field(f"f{i}", e) for i, e in enumerate(t.elements)])
            self.n.tuple_structs[t] = s
        return s

    def statement(self, node: Tree, scope: Scope) -> ir.Stmt:
        loc = self.n.loc(node)
        kind = node.data
        in_parser = self.n.ctx.kind == "state"
        if kind == "block":
            return self.block(node, scope)
        if kind == "annotated_block":  # `@atomic { ... }`: BMv2 runs every block atomically anyway
            return self.block(node.children[1], scope)
        if kind == "var_decl":
            return ir.VarDeclStmt(loc, self.var_decl(node, scope))
        if kind == "const_decl":
            self.up.decl_const_decl(node, scope)
            return ir.Block(loc, [])
        if kind == "empty_stmt":
            return ir.Block(loc, [])
        if kind == "assignment":
            lhs = self.e.lvalue(node.children[0], scope)
            rhs = self.e.coerce(self.e.expr(node.children[1], scope, lhs.type), lhs.type, node.children[1], node)
            return ir.Assign(loc, lhs, rhs)
        if kind == "compound_assignment":
            return self.compound_assignment(node, scope)
        if kind == "call_stmt":
            call = self.ca.call(node.children[0], node.children[1], scope, node)
            if isinstance(call, ir.BoolLiteral):  # a static_assert that held: nothing to run
                return ir.Block(loc, [])
            return ir.MethodCallStmt(loc, call)
        if kind == "type_call_stmt":
            type_node, name_node, args = node.children
            decl = self.n.top.lookup(self.n.name_of(type_node))
            if not isinstance(decl, BlockDecl):
                raise self.n.error(type_node, f"{self.n.text(type_node)}: only parsers and controls can be applied directly")
            return ir.MethodCallStmt(loc, self.ca.block_apply(decl, name_node, self.ca.arg_nodes(args), scope, node))
        if kind == "generic_call_stmt":
            lv, targs, _, args = node.children
            explicit = [self.ty.resolve_type(t, scope) for t in targs.children]
            return ir.MethodCallStmt(loc, self.ca.call(lv, args, scope, node, explicit))
        if kind == "if_stmt":
            cond_node, then_node, else_node = node.children
            cond = self.e.expr(cond_node, scope)
            if not isinstance(cond.type, ir.BoolType):
                raise self.n.error(cond_node, f"if condition {self.n.text(cond_node)} has type {cond.type}, not bool")
            then = self.statement(then_node, Scope(scope))
            else_ = self.statement(else_node, Scope(scope)) if else_node is not None else None
            return ir.If(loc, cond, then, else_)
        if in_parser:
            raise self.n.error(node, f"{kind.replace('_stmt', '')} statements are not allowed in a parser")
        if kind == "exit_stmt" and self.n.ctx.kind == "function":
            raise self.n.error(node, "exit is not allowed in a function")
        if kind == "exit_stmt":
            return ir.Exit(loc)
        if kind == "return_stmt":
            return self.return_stmt(node, scope)
        if kind == "switch_stmt":
            return self.switch(node, scope)
        if kind == "for_stmt":
            return self.for_loop(node, scope)
        if kind == "for_in_stmt":
            raise self.n.error(node, "BMV2 does not support for-in loops")
        if kind in ("break_stmt", "continue_stmt"):
            if not self.n.loops:
                raise self.n.error(node, f"{kind.removesuffix('_stmt')} outside a loop")
            return ir.LoopJump(loc, kind.removesuffix("_stmt"))
        raise self.n.error(node, f"unsupported: {kind.replace('_', ' ')}")

    def compound_assignment(self, node: Tree, scope: Scope) -> ir.Assign:
        """`a op= b` is `a = a op b`, typed as that binary expression (so `a` is read once more). An `a` that
        calls a function (`s[f()] |= b`) is evaluated once: the value's operand is `a` itself, the one node
        side-effect ordering evaluates (passes/side_effects.py)."""
        lhs = self.e.lvalue(node.children[0], scope)
        value = self.compound_value(node, scope)
        if isinstance(value, ir.Binary) and any(isinstance(n, ir.FunctionCall) for n in walk(lhs)):
            value.left = lhs
        return ir.Assign(self.n.loc(node), lhs, self.e.coerce(value, lhs.type, node.children[2], node))

    def compound_value(self, node: Tree, scope: Scope) -> ir.Expr:
        """The `a op b` of `a op= b`."""
        lv_node, op_node, rhs_node = node.children
        if len(op_node.children) == 2:  # `>>=`: R_ANGLE_SHIFT then ">="
            shift, eq = op_node.children
            if not (isinstance(shift, Token) and isinstance(eq, Token) and shift.end_pos == eq.start_pos):
                raise self.n.error(eq, "syntax error, unexpected '>='")
            op = ">>"
        else:
            op = str(op_node.children[0])[:-1]
        return self.e.binary(node, op, lv_node, rhs_node, scope)

    def for_loop(self, node: Tree, scope: Scope) -> ir.Block:
        """`for (init; cond; update) body`, unrolled where its trip count is known at compile time (BMv2 runs
        loops only in actions, as backward jumps, and p4c unrolls the others); in an action or a function, a loop
        that does not unroll stays a Loop, as p4c 1.2.5.16 writes it (p4lang/p4c#5552); check_lowered refuses one
        a function brings outside an action."""
        loops = self.n.loops
        try:
            return self.unrolled(node, scope)
        except NotUnrollable:
            self.n.loops = loops
            if self.n.ctx.kind not in ("action", "function"):
                raise
            return self.runtime_loop(node, scope)

    def unrolled(self, node: Tree, scope: Scope) -> ir.Block:
        """The loop unrolled: its variables must be compile-time constants in every iteration; the body is
        checked once per iteration with them bound as constants. A variable declared outside the loop holds
        its final value after it; one declared in the loop's header is, as in p4c, a duplicate of any other
        in the enclosing block but not visible after the loop."""
        inits_node, cond_node, updates_node, body_node = node.children
        values: dict[str, ir.Expr] = {}
        outer: dict[str, ir.Expr] = {}  # loop variables declared outside: name -> l-value
        for init in inits_node.children if inits_node is not None else []:
            if init.data == "for_var":
                type_node, name_node, value_node = init.children
                t, name = self.ty.resolve_type(type_node, scope), self.n.name_of(name_node)
                self.n.declare(scope, name, HIDDEN, name_node)
            else:
                lv_node, value_node = init.children
                if lv_node.data != "name_ref":
                    raise self.n.error(lv_node, f"unsupported: for loop initializing {self.n.text(lv_node)}, not a variable")
                lhs = self.e.lvalue(lv_node, scope)
                t, name = lhs.type, self.n.text(lv_node).lstrip(".")
                outer[name] = lhs
            values[name] = self.loop_constant(self.e.coerce(self.e.expr(value_node, scope), t, value_node), value_node)
        updates = updates_node.children if updates_node is not None else []
        stmts: list[ir.Stmt] = []
        while True:
            bound = Scope(scope)
            bound.names.update({n: ir.ConstDecl(n, v.type, v, loc=v.loc) for n, v in values.items()})
            cond = self.e.expr(cond_node, bound)
            if not isinstance(cond, ir.BoolLiteral):
                raise self.not_unrollable(cond_node, f"unsupported: for loop condition {self.n.text(cond_node)} is not "
                                                     f"known at compile time {NO_UNROLL}")
            if not cond.value:
                break
            if len(stmts) == MAX_UNROLL:
                raise self.not_unrollable(node, f"for loop runs more than {MAX_UNROLL} times: too many to unroll")
            self.n.loops += 1
            body = self.loop_body(body_node, bound, values)
            self.n.loops -= 1
            body, jump = self.cut_at_jump(body)
            stmts.append(body)
            if jump == "break":
                break
            for u in updates:
                lv_node = u.children[0]
                if not self.sets_loop_variable(u, values):
                    raise self.n.error(lv_node, f"unsupported: for loop update of {self.n.text(lv_node)}, not a loop variable")
                self.rebind(u, bound, values)
        stmts += [ir.Assign(self.n.loc(node), lhs, values[name]) for name, lhs in outer.items()]
        return ir.Block(self.n.loc(node), stmts)

    def loop_body(self, body_node: Tree, bound: Scope, values: dict[str, ir.Expr]) -> ir.Stmt:
        """One iteration's body, the loop variables bound as constants. An assignment to one directly in
        the body (`i = i + 1;`, issue4739.p4) gives it its next constant for the rest of the iteration,
        as P4 lets the body change it; before a break or continue that cannot unroll."""
        if body_node.data != "block":
            return self.statement(body_node, Scope(bound))
        inner = Scope(bound)
        stmts: list[ir.Stmt] = []
        for s in body_node.children:
            if self.sets_loop_variable(s, values):
                if any(has_jump(x) for x in stmts):
                    raise self.not_unrollable(s, f"unsupported: a loop variable set after a break or continue {NO_UNROLL}")
                self.rebind(s, bound, values)
            else:
                stmts.append(self.statement(s, inner))
        return ir.Block(self.n.loc(body_node), stmts)

    def sets_loop_variable(self, node: Tree, values: dict[str, ir.Expr]) -> bool:
        """Whether `node` is an assignment (plain or compound) to one of the loop's variables."""
        return (isinstance(node, Tree) and node.data in ("assignment", "compound_assignment")
                and node.children[0].data == "name_ref" and self.n.text(node.children[0]).lstrip(".") in values)

    def rebind(self, node: Tree, bound: Scope, values: dict[str, ir.Expr]) -> None:
        """A loop variable's next constant, from an assignment to it (the update or one in the body)."""
        name = self.n.text(node.children[0]).lstrip(".")
        t = values[name].type
        if node.data == "assignment":
            value = self.e.coerce(self.e.expr(node.children[1], bound), t, node.children[1])
        else:
            value = self.e.coerce(self.compound_value(node, bound), t, node.children[2])
        values[name] = self.loop_constant(value, node)
        bound.names[name] = ir.ConstDecl(name, t, values[name], loc=values[name].loc)

    def cut_at_jump(self, s: ir.Stmt) -> tuple[ir.Stmt, str | None]:
        """`s` up to the first break/continue it reaches for sure (conditions on loop variables are
        constants here), and which one; a jump under a run-time condition cannot unroll."""
        if isinstance(s, ir.LoopJump):
            return ir.Block(s.loc, []), s.kind
        if isinstance(s, ir.Block):
            kept: list[ir.Stmt] = []
            for x in s.stmts:
                x, jump = self.cut_at_jump(x)
                kept.append(x)
                if jump:
                    return ir.Block(s.loc, kept), jump
            return ir.Block(s.loc, kept), None
        if isinstance(s, ir.If) and isinstance(s.cond, ir.BoolLiteral):
            taken = s.then if s.cond.value else s.else_
            return self.cut_at_jump(taken) if taken is not None else (ir.Block(s.loc, []), None)
        if has_jump(s):
            raise self.not_unrollable(s.loc, f"unsupported: break or continue under a condition not known at compile time "
                                             f"{NO_UNROLL}")
        return s, None

    def loop_constant(self, value: ir.Expr, node: Node) -> ir.Expr:
        if not is_constant(value):
            raise self.not_unrollable(node, f"unsupported: for loop variable set from {self.n.text(node)}, which is not "
                                            f"known at compile time {NO_UNROLL}")
        return value

    def not_unrollable(self, node: Node | ir.Loc, message: str) -> NotUnrollable:
        e = self.n.error(node, message)
        return NotUnrollable(e.message, e.file, e.line, e.col)

    def runtime_loop(self, node: Tree, scope: Scope) -> ir.Block:
        """The loop as it runs: its initializers, then a Loop whose body starts with `if (!cond) break;`. The
        variables its header declares are visible in it only (the failed unrolling hid them from `scope`)."""
        inits_node, cond_node, updates_node, body_node = node.children
        inner = Scope(scope)
        stmts: list[ir.Stmt] = []
        for init in inits_node.children if inits_node is not None else []:
            if init.data == "for_var":
                type_node, name_node, value_node = init.children
                t = self.ty.resolve_type(type_node, scope)
                decl = ir.VarDecl(self.n.name_of(name_node), t, self.e.coerce(self.e.expr(value_node, inner, t), t, value_node),
                                  loc=self.n.loc(name_node))
                self.n.declare(inner, decl.name, decl, name_node)
                stmts.append(ir.VarDeclStmt(self.n.loc(init), decl))
            else:
                stmts.append(self.statement(init, inner))
        cond = self.e.expr(cond_node, inner)
        if not isinstance(cond.type, ir.BoolType):
            raise self.n.error(cond_node, f"for loop condition {self.n.text(cond_node)} has type {cond.type}, not bool")
        loc = self.n.loc(cond_node)
        self.n.loops += 1
        body = [ir.If(loc, ir.Unary(BOOL, loc, "!", cond), ir.LoopJump(loc, "break")), self.statement(body_node, Scope(inner))]
        self.n.loops -= 1
        update = [self.statement(u, inner) for u in (updates_node.children if updates_node is not None else [])]
        loc = self.n.loc(node)
        return ir.Block(loc, [*stmts, ir.Loop(loc, ir.Block(loc, body), ir.Block(loc, update))])

    def return_stmt(self, node: Tree, scope: Scope) -> ir.Return:
        value_node = node.children[0]
        f = self.n.ctx.function
        if f is None:
            if value_node is not None:
                raise self.n.error(node, "return with a value outside a function")
            return ir.Return(self.n.loc(node))
        rt = f.return_type
        if value_node is None:
            if not isinstance(rt, ir.VoidType):
                raise self.n.error(node, f"{f.name}: return without a value in a function returning {rt}")
            return ir.Return(self.n.loc(node))
        if isinstance(rt, ir.VoidType):
            raise self.n.error(value_node, f"{f.name}: return with a value in a void function")
        value = self.e.coerce(self.e.expr(value_node, scope, rt), rt, value_node)
        return ir.Return(self.n.loc(node), value)

    def switch(self, node: Tree, scope: Scope) -> ir.Switch:
        subject_node, *cases = node.children
        subject = self.e.expr(subject_node, scope)
        is_action_run = isinstance(subject, ir.ActionRun)
        if not is_action_run and not (is_numeric(subject.type) or isinstance(subject.type, (ir.EnumType, ir.ErrorType))):
            raise self.n.error(subject_node, f"switch subject {self.n.text(subject_node)} has type {subject.type}")
        if sum(c.children[0].data == "default_label" for c in cases) > 1:
            raise self.n.error(node, "switch has multiple 'default' labels")  # where p4c says it: the switch
        out: list[ir.SwitchCase] = []
        pending: list = []
        seen: list = []
        for i, c in enumerate(cases):
            label_node = c.children[0]
            body_node = c.children[1] if len(c.children) > 1 else None
            label: ir.Action | ir.Expr | None
            if label_node.data == "default_label":
                label = None
                if i != len(cases) - 1:
                    raise self.n.error(label_node, "default label must be the last switch case")
            elif isinstance(subject, ir.ActionRun):
                if label_node.data != "name_ref":
                    raise self.n.error(label_node, "switch on action_run: labels must be action names")
                aname = self.n.name_of(label_node.children[0])
                ref = next((r for r in subject.table.actions if r.action.name == aname), None)
                if ref is None:
                    raise self.n.error(label_node, f"{aname}: not an action of table {subject.table.name}")
                label = ref.action
            else:
                label = self.e.coerce(self.e.expr(label_node, scope), subject.type, label_node)
                if not is_constant(label):
                    raise self.n.error(label_node, "switch labels must be compile-time constants")
            key = const_key(label) if isinstance(label, ir.Expr) else label
            if any(k is key or (not is_action_run and k == key and key is not None) for k in seen):
                raise self.n.error(label_node, f"duplicate switch label {self.n.text(label_node)}")
            seen.append(key)
            pending.append(label)
            if body_node is not None:
                out.append(ir.SwitchCase(pending, self.block(body_node, scope), self.n.loc(c)))
                pending = []
        if pending:
            out.append(ir.SwitchCase(pending, None, self.n.loc(cases[-1])))
        return ir.Switch(self.n.loc(node), subject, out)
