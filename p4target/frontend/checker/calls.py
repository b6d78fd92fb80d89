"""Calls: arguments bound to parameters (named, positional, defaults; type arguments inferred),
extern methods and functions, header and stack methods, actions, functions (generic ones checked
per binding), parser/control apply."""
from __future__ import annotations

from typing import cast

from lark import Tree

from .. import ir
from ..typing import BIT32, BOOL, INFINT, VOID, same_type
from .expressions import Expressions
from .names import BlockDecl, Checking, GenericFunction, Names, Node, Scope
from .types import subst

HEADER_METHODS = {"isValid": BOOL, "setValid": VOID, "setInvalid": VOID}
STACK_METHODS = {"push_front", "pop_front"}


class Calls:
    """Call expressions and the binding of arguments."""

    def __init__(self, n: Names, e: Expressions, up: Checking):
        self.n, self.e, self.up = n, e, up

    def arg_nodes(self, node: Tree) -> list[tuple[str | None, Tree]]:
        """Arguments as (keyword or None, expression tree)."""
        out: list[tuple[str | None, Tree]] = []
        for a in node.children:
            if a is None:
                continue
            if isinstance(a, Tree) and a.data == "named_arg":
                out.append((self.n.name_of(a.children[0]), a.children[1]))
            else:
                out.append((None, a))
        return out

    def bind_args(self, params: list[ir.Param], args: list, scope: Scope, bindings: dict, node: Node, what: str) -> list[ir.Expr]:
        """Check call arguments against parameters; returns typed args in parameter order."""
        if any(k is not None for k, _ in args):
            if not all(k is not None for k, _ in args):
                raise self.n.error(node, f"{what}: mix of named and positional arguments")
            by_name = {k: n for k, n in args}
            unknown = set(by_name) - {p.name for p in params}
            if unknown:
                raise self.n.error(node, f"{what}: no parameter named {sorted(unknown)[0]}")
            missing = [p.name for p in params if p.name not in by_name and p.default is None]
            if missing:
                raise self.n.error(node, f"{what}: missing argument for parameter {missing[0]}")
            ordered = [(p, by_name.get(p.name)) for p in params]
        else:
            if len(args) > len(params) or len(args) < len([p for p in params if p.default is None]):
                raise self.n.error(node, f"{what}: expected {len(params)} arguments, got {len(args)}")
            ordered = [(p, args[i][1] if i < len(args) else None) for i, p in enumerate(params)]
        typed = []
        for p, n in ordered:
            if n is None:
                if p.default is None:
                    raise self.n.error(node, f"{what}: missing argument for parameter {p.name}")
                typed.append((p, None, p.default))
                continue
            expected = subst(p.type, bindings)
            e = self.e.expr(n, scope, expected if not isinstance(expected, ir.TypeVar) else None)
            typed.append((p, n, e))
            if isinstance(p.type, ir.TypeVar) and p.type.name not in bindings and not isinstance(e.type, ir.InfIntType):
                bindings[p.type.name] = e.type
        out = []
        for p, n, e in typed:
            if n is None:
                out.append(e)
                continue
            t = subst(p.type, bindings)
            if isinstance(t, ir.TypeVar):
                raise self.n.error(n, f"{what}: cannot infer the type of {self.n.text(n)}; give it a width, e.g. (bit<8>){self.n.text(n)}")
            if p.direction in ("out", "inout"):
                self.e.check_writable(e, n)
                if isinstance(e, ir.DontCare):
                    out.append(e)
                    continue
                if isinstance(t, ir.DontCareType) or not same_type(e.type, t):
                    raise self.n.error(n, f"{what}: argument {self.n.text(n)} of type {e.type} for {p.direction} parameter {p.name}: "
                                        f"Cannot unify {e.type} to {t}")
                out.append(e)
            else:
                out.append(self.e.coerce(e, t, n))
        return out

    def type_args(self, type_params: list[str], bindings: dict, node: Node, what: str) -> list[ir.Type]:
        """The type arguments of a call, each bound by now (explicitly or by an argument)."""
        missing = [t for t in type_params if bindings.get(t) is None]
        if missing:
            raise self.n.error(node, f"{what}: cannot infer type argument {missing[0]}")
        return [bindings[t] for t in type_params]

    def explicit_bindings(self, type_params: list[str], explicit: list | None, node: Node, what: str) -> dict:
        """Bindings from explicit type arguments `f<T1, T2>(...)`."""
        if explicit is None:
            return {}
        if len(explicit) != len(type_params):
            raise self.n.error(node, f"{what}: expected {len(type_params)} type arguments, got {len(explicit)}")
        return dict(zip(type_params, explicit))

    def call(self, callee: Tree, args_node: Tree, scope: Scope, node: Node, explicit: list | None = None) -> ir.Expr:
        loc = self.n.loc(node)
        args = self.arg_nodes(args_node)
        if callee.data == "member":
            base_node, name_node = callee.children
            method = self.n.name_of(name_node)
            if base_node.data == "name_ref":
                decl = scope.lookup(self.n.name_of(base_node.children[0]))
                if isinstance(decl, ir.Table):
                    if method != "apply":
                        raise self.n.error(name_node, f"table {decl.name} has no method {method}")
                    if args:
                        raise self.n.error(args_node, "apply() takes no arguments")
                    if self.n.ctx.kind not in ("control",):
                        raise self.n.error(node, f"table {decl.name} can only be applied in a control's apply block")
                    return ir.TableApply(ir.TableResultType(decl.name), loc, decl)
                if isinstance(decl, (BlockDecl, ir.BlockInstance)):
                    return self.block_apply(decl, name_node, args, scope, node)
            base = self.e.expr(base_node, scope)
            t = base.type
            if isinstance(t, ir.ExternType):
                overloads = [m for m in t.decl.methods.get(method, [])
                             if len(m.params) >= len(args) >= len([p for p in m.params if p.default is None])]
                if not overloads:
                    if method not in t.decl.methods:
                        raise self.n.error(name_node, f"{t.name} has no method {method}")
                    raise self.n.error(node, f"{self.n.text(callee)}: no overload of {method} takes {len(args)} arguments")
                m = overloads[0]
                bindings = dict(zip(t.decl.type_params, t.type_args))
                for tp in m.type_params:
                    bindings.pop(tp, None)
                bindings.update(self.explicit_bindings(m.type_params, explicit, node, f"{t.name}.{method}"))
                values = self.bind_args(m.params, args, scope, bindings, node, f"{t.name}.{method}")
                ret = subst(m.return_type, bindings)
                targs = self.type_args(m.type_params, bindings, node, f"{t.name}.{method}")
                if method == "extract" and len(values) == 1 and isinstance(values[0], ir.DontCare) and isinstance(targs[0], ir.HeaderType):
                    skip = ir.Constant(BIT32, loc, ir.width_of(targs[0]))  # extract<H>(_): skip an H
                    return ir.ExternMethodCall(VOID, loc, base, "advance", [skip], [], t.decl.methods["advance"][0])
                if method == "extract" and values and not isinstance(values[0].type, ir.HeaderType):
                    raise self.n.error(node, f"extract needs a header, {self.n.text(args[0][1])} has type {values[0].type}")
                emittable = (ir.HeaderType, ir.StackType, ir.StructType, ir.HeaderUnionType)
                if method == "emit" and values and not isinstance(values[0].type, emittable):
                    raise self.n.error(node, f"emit needs a header, stack or struct of headers, not {values[0].type}")
                return ir.ExternMethodCall(ret, loc, base, method, values, targs, m)
            if isinstance(t, (ir.HeaderType, ir.HeaderUnionType)) and method in HEADER_METHODS:
                if args:
                    raise self.n.error(args_node, f"{method}() takes no arguments")
                if method != "isValid":
                    self.e.check_writable(base, base_node)
                return ir.HeaderMethodCall(HEADER_METHODS[method], loc, base, method, [])
            if isinstance(t, ir.StackType) and method in STACK_METHODS:
                self.e.check_writable(base, base_node)
                values = self.bind_args([ir.Param("count", "in", INFINT)], args, scope, {}, node, method)
                if not isinstance(values[0], ir.Constant) or values[0].value < 0:
                    raise self.n.error(args_node, f"{method}: count must be a non-negative constant")
                return ir.HeaderMethodCall(VOID, loc, base, method, values)
            raise self.n.error(name_node, f"{self.n.text(base_node)} of type {t} has no method {method}")
        if callee.data == "name_ref":
            tok = callee.children[0].children[0]
            name = str(tok)
            decl = scope.lookup(name)
            if decl is None:
                raise self.n.error(tok, f"{name}: declaration not found")
            if isinstance(decl, ir.Action) and len(decl.params) != len(args) and isinstance(self.n.top.lookup(name), list):
                decl = self.n.top.lookup(name)  # as p4c resolves by arity: an action `hash` calling the extern hash
            if isinstance(decl, GenericFunction):
                return self.generic_call(decl, args, scope, node, explicit)
            if explicit is not None and not isinstance(decl, list):
                raise self.n.error(node, f"{name} takes no type arguments")
            if isinstance(decl, ir.Action):
                if self.n.ctx.kind not in ("control", "action"):
                    raise self.n.error(node, f"action {name} cannot be called here")
                values = self.bind_args(decl.params, args, scope, {}, node, f"action {name}")
                return ir.ActionCall(VOID, loc, decl, values)
            if isinstance(decl, ir.Function):
                values = self.bind_args(decl.params, args, scope, {}, node, f"function {name}")
                return ir.FunctionCall(decl.return_type, loc, decl, values)
            if isinstance(decl, list):  # extern function overloads
                functions = [f for f in decl if len(f.params) >= len(args) >= len([p for p in f.params if p.default is None])]
                if not functions:
                    raise self.n.error(node, f"{name}: expected {' or '.join(str(len(f.params)) for f in decl)} arguments, got {len(args)}")
                f = functions[0]
                if name == "verify" and self.n.ctx.kind != "state":
                    raise self.n.error(node, "verify can only be called in a parser")
                bindings = self.explicit_bindings(f.type_params, explicit, node, name)
                values = self.bind_args(f.params, args, scope, bindings, node, name)
                if name == "static_assert":
                    return self.static_assert(values, node)
                return ir.ExternFunctionCall(subst(f.return_type, bindings), loc, name, values,
                                             self.type_args(f.type_params, bindings, node, name), f)
            raise self.n.error(tok, f"{name} is not an action or function")
        raise self.n.error(node, f"unsupported: call of {self.n.text(callee)}")

    def static_assert(self, values: list[ir.Expr], node: Node) -> ir.BoolLiteral:
        """static_assert(check[, message]): checked now; its value is true."""
        check = values[0]
        if not isinstance(check, ir.BoolLiteral):
            raise self.n.error(node, f"{self.n.text(node)}: static_assert needs a compile-time constant condition")
        if not check.value:
            message = values[1].value if len(values) > 1 and isinstance(values[1], ir.StringLiteral) else "static_assert failed"
            raise self.n.error(node, f"{self.n.text(node)}: {message}")
        return check

    def block_apply(self, target: BlockDecl | ir.BlockInstance, name_node: Node, args: list, scope: Scope, node: Node) -> ir.ApplyCall:
        """`inst.apply(args)`, or `Type.apply(args)`: a direct invocation, which declares an
        implicit instance named after the type (as p4c's InstantiateDirectCalls does)."""
        method = self.n.name_of(name_node)
        if method != "apply":
            raise self.n.error(name_node, f"{target.name} has no method {method}")
        if isinstance(target, BlockDecl):
            if target.ctor_params or target.type_params:
                raise self.n.error(node, f"{target.name} has constructor or type parameters; instantiate it to apply it")
            self.check_apply_place(target.kind, target.name, node)
            block = cast(ir.Parser | ir.Control, self.n.ctx.block)  # a parser state's or a control's, as just checked
            target = self.up.instantiate(target, target.name, ir.Annotations(), {}, self.n.loc(node))
            block.locals.append(target)
        return self.apply_call(target, args, scope, node)

    def apply_call(self, inst: ir.BlockInstance, args: list, scope: Scope, node: Node) -> ir.ApplyCall:
        """`inst.apply(args)`: a control in a control's apply block, a parser in a parser state."""
        self.check_apply_place("parser" if isinstance(inst.block, ir.Parser) else "control", inst.name, node)
        values = self.bind_args(inst.block.params, args, scope, {}, node, f"{inst.name}.apply")
        return ir.ApplyCall(VOID, self.n.loc(node), inst, values)

    def check_apply_place(self, kind: str, name: str, node: Node) -> None:
        """A parser is applied in a parser state, a control in a control's apply block."""
        if kind == "parser" and self.n.ctx.kind != "state":
            raise self.n.error(node, f"parser {name} can only be applied in a parser state")
        if kind == "control" and self.n.ctx.kind != "control":
            raise self.n.error(node, f"control {name} can only be applied in a control's apply block")

    def generic_call(self, g: GenericFunction, args: list, scope: Scope, node: Node, explicit: list | None) -> ir.FunctionCall:
        """A call of a generic function: its type arguments (explicit or inferred from the
        arguments) pick the instance of the function checked for them."""
        bindings = self.explicit_bindings(g.type_params, explicit, node, g.name)
        self.bind_args(g.params, args, scope, bindings, node, f"function {g.name}")
        key = tuple(self.type_args(g.type_params, bindings, node, g.name))
        f = g.instances.get(key)
        if f is None:
            if key in g.building:
                raise self.n.error(node, f"{g.name}: recursive call")
            g.building.add(key)
            saved = self.n.ctx
            f = g.instances[key] = self.up.function(g.node, bindings)
            self.n.ctx = saved
            g.building.discard(key)
            self.n.program.functions[f"{g.name}<{', '.join(str(t) for t in key)}>"] = f
        values = self.bind_args(f.params, args, scope, {}, node, f"function {g.name}")
        return ir.FunctionCall(f.return_type, self.n.loc(node), f, values)
