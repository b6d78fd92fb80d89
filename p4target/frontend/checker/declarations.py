"""Top-level declarations in source order (P4 requires declaration before use): constants, types,
errors and match kinds, externs and their instances, functions, block types, actions."""
from __future__ import annotations

from lark import Tree

from .. import ir
from ..passes.walk import completes
from ..typing import VOID, is_numeric
from .annotations import Annotations
from .calls import Calls
from .constants import is_constant
from .expressions import Expressions
from .names import Context, GenericFunction, GenericType, Names, Scope
from .statements import Statements
from .types import Types


class Declarations:
    """The program's declarations, one `decl_<rule>` method per grammar rule."""

    def __init__(self, n: Names, e: Expressions, an: Annotations, ty: Types, ca: Calls, st: Statements):
        self.n, self.e, self.an, self.ty, self.ca, self.st = n, e, an, ty, ca, st

    def decl_empty(self, node: Tree) -> None:
        return None

    def decl_const_decl(self, node: Tree, scope: Scope | None = None) -> ir.ConstDecl:
        scope = scope or self.n.top
        ann, type_node, name_node, value_node = node.children
        t = self.ty.resolve_type(type_node, scope)
        value = self.e.coerce(self.e.expr(value_node, scope, t), t, value_node)
        if not is_constant(value):
            raise self.n.error(value_node, f"{self.n.name_of(name_node)}: initializer is not a compile-time constant")
        decl = ir.ConstDecl(self.n.name_of(name_node), t, value, self.an.annotations(ann), self.n.loc(name_node))
        self.n.declare(scope, decl.name, decl, name_node)
        if scope is self.n.top:
            self.n.program.constants[decl.name] = decl
        return decl

    def decl_typedef_decl(self, node: Tree) -> None:
        ann, type_node, name_node = node.children
        t = self.ty.resolve_type(type_node, self.n.top)
        name = self.n.name_of(name_node)
        self.n.declare(self.n.top, name, t, name_node)
        self.n.program.typedefs[name] = t

    def decl_newtype_decl(self, node: Tree) -> None:
        ann, type_node, name_node = node.children
        base = self.ty.resolve_type(type_node, self.n.top)
        if not (is_numeric(base) or isinstance(base, (ir.BoolType, ir.NewType))):
            raise self.n.error(type_node, f"unsupported: type declaration over {base}")
        name = self.n.name_of(name_node)
        t = ir.NewType(name, base, self.an.annotations(ann), self.n.loc(name_node))
        self.n.declare(self.n.top, name, t, name_node)
        self.n.program.types[name] = t

    def _struct_like(self, node: Tree, cls: type[ir.StructLikeType]) -> None:
        ann, name_node, tp, *fields = node.children
        name = self.n.name_of(name_node)
        if tp is not None:
            params = [self.n.name_of(t) for t in tp.children[0].children]
            self.n.declare(self.n.top, name, GenericType(cls, name, node, params), name_node)
            return
        t = cls(name, [], self.an.annotations(ann), self.n.loc(name_node))
        self.n.declare(self.n.top, name, t, name_node)
        self.ty._fields(t, fields, self.n.top)

    def decl_header_decl(self, node: Tree) -> None:
        self._struct_like(node, ir.HeaderType)

    def decl_struct_decl(self, node: Tree) -> None:
        self._struct_like(node, ir.StructType)

    def decl_header_union_decl(self, node: Tree) -> None:
        self._struct_like(node, ir.HeaderUnionType)

    def decl_enum_decl(self, node: Tree) -> None:
        ann, name_node, names = node.children
        name = self.n.name_of(name_node)
        t = ir.EnumType(name, [self.n.name_of(n) for n in names.children], None, {}, self.an.annotations(ann), self.n.loc(name_node))
        self.n.declare(self.n.top, name, t, name_node)
        self.n.program.types[name] = t

    def decl_ser_enum_decl(self, node: Tree) -> None:
        ann, base_node, name_node, *values = node.children
        base = self.ty.resolve_type(base_node, self.n.top)
        if not is_numeric(base):
            raise self.n.error(base_node, "enum underlying type must be bit<W> or int<W>")
        name = self.n.name_of(name_node)
        t = ir.EnumType(name, [], base, {}, self.an.annotations(ann), self.n.loc(name_node))
        for v in values:
            member = self.n.name_of(v.children[0])
            value = self.e.coerce(self.e.expr(v.children[1], self.n.top), base, v.children[1])
            if not isinstance(value, ir.Constant):
                raise self.n.error(v.children[1], f"{member}: enum value must be a constant")
            t.members.append(member)
            t.values[member] = value.value
        self.n.declare(self.n.top, name, t, name_node)
        self.n.program.types[name] = t

    def decl_error_decl(self, node: Tree) -> None:
        self.declare_members(node, self.n.program.errors, "error.{}: duplicate declaration")

    def decl_match_kind_decl(self, node: Tree) -> None:
        self.declare_members(node, self.n.program.match_kinds, "{}: duplicate match_kind")

    def declare_members(self, node: Tree, names: list[str], duplicate: str) -> None:
        """Append each name an `error { ... }` or `match_kind { ... }` declares; `duplicate` words a repeat."""
        for n in node.children[0].children:
            name = self.n.name_of(n)
            if name in names:
                raise self.n.error(n, duplicate.format(name))
            names.append(name)

    def function_proto(self, node: Tree, scope: Scope, ann: Tree | None) -> ir.ExternFunction:
        ret_node, name_node, tp_node, params_node = node.children
        tps, inner = self.ty.type_params(tp_node, scope)
        ret = self.ty.resolve_type(ret_node, inner)
        return ir.ExternFunction(self.n.name_of(name_node), self.ty.params(params_node, inner), ret, tps,
                                 self.an.annotations(ann), self.n.loc(name_node))

    def decl_extern_function(self, node: Tree) -> None:
        f = self.function_proto(node.children[1], self.n.top, node.children[0])
        existing = self.n.top.lookup(f.name)
        if existing is None:
            self.n.top.names[f.name] = [f]
        elif isinstance(existing, list):
            existing.append(f)
        else:
            raise self.n.error(node.children[1], f"{f.name}: duplicate declaration")
        self.n.program.extern_functions.setdefault(f.name, []).append(f)

    def decl_extern_object(self, node: Tree) -> None:
        ann, head, *members = node.children
        if head.data == "specialized_type":
            name_node = head.children[0]
            tps, inner = self.ty.type_params(Tree("type_params", [head.children[1]]), self.n.top)
        else:
            name_node, tps, inner = head, [], Scope(self.n.top)
        name = self.n.name_of(name_node)
        decl = ir.ExternDecl(name, tps, [], {}, self.an.annotations(ann), self.n.loc(name_node))
        self.n.declare(self.n.top, name, decl, name_node)
        for m in members:
            if m.data == "constructor":
                if self.n.name_of(m.children[1]) != name:
                    raise self.n.error(m.children[1], f"constructor name must be {name}")
                decl.constructors.append(ir.ExternMethod(name, self.ty.params(m.children[2], inner), VOID, [],
                                                         self.an.annotations(m.children[0]), self.n.loc(m.children[1])))
            else:
                f = self.function_proto(m.children[1], inner, m.children[0])
                decl.methods.setdefault(f.name, []).append(
                    ir.ExternMethod(f.name, f.params, f.return_type, f.type_params, f.annotations, f.loc))
        self.n.program.externs[name] = decl

    def decl_function_decl(self, node: Tree) -> None:
        ann, proto, body = node.children
        ret_node, name_node, tp_node, params_node = proto.children
        name = self.n.name_of(name_node)
        if tp_node is not None:  # checked for each binding of its type parameters, at the calls
            tps, inner = self.ty.type_params(tp_node, self.n.top)
            self.n.declare(self.n.top, name, GenericFunction(name, node, tps, self.ty.params(params_node, inner)), name_node)
            return
        f = self.function(node, {})
        self.n.declare(self.n.top, name, f, name_node)  # after the body: a function cannot call itself
        self.n.program.functions[name] = f

    def function(self, node: Tree, bindings: dict[str, ir.Type]) -> ir.Function:
        """Check a function declaration, its type parameters (if any) bound to `bindings`."""
        ann, proto, body = node.children
        ret_node, name_node, tp_node, params_node = proto.children
        name = self.n.name_of(name_node)
        scope = Scope(self.n.top)
        scope.names.update(bindings)
        ret = self.ty.resolve_type(ret_node, scope)
        params = self.ty.params(params_node, scope)
        for p in params:
            scope.names[p.name] = p
        f = ir.Function(name, params, ret, ir.Block(self.n.loc(body)), self.an.annotations(ann), self.n.loc(name_node))
        saved, self.n.ctx = self.n.ctx, Context("function", name, function=f)
        f.body = self.st.block(body, scope)
        self.n.ctx = saved
        if not isinstance(ret, ir.VoidType) and completes(f.body):
            raise self.n.error(name_node, f"Function '{name}' does not return a value on all paths")
        return f

    def decl_parser_type_decl(self, node: Tree) -> None:
        self._block_type(node, "parser")

    def decl_control_type_decl(self, node: Tree) -> None:
        self._block_type(node, "control")

    def decl_package_decl(self, node: Tree) -> None:
        self._block_type(node, "package")

    def _block_type(self, node: Tree, kind: str) -> None:
        name_node = node.children[1]
        tps, inner = self.ty.type_params(node.children[2], self.n.top)
        params = self.ty.params(node.children[3], inner)
        name = self.n.name_of(name_node)
        self.n.declare(self.n.top, name, ("blocktype", kind, name, params), name_node)

    def decl_action_decl(self, node: Tree, scope: Scope | None = None, prefix: str | None = None) -> ir.Action:
        scope = scope or self.n.top
        ann, name_node, params_node, body = node.children
        name = self.n.name_of(name_node)
        params = self.ty.params(params_node, scope)
        seen_data = False
        for p in params:
            self.an.check_translation(p.type, params_node)
            if isinstance(p.type, ir.InfIntType):  # p4c: an int is known at compile time, an action's data is not
                raise self.n.error(p.loc, f"{p.name}: actions cannot have parameters with type int")
            if p.direction == "":
                seen_data = True
            elif seen_data:
                raise self.n.error(params_node, f"{name}: directional parameters must come before directionless ones")
        action = ir.Action(name, params, ir.Block(self.n.loc(body)), self.an.annotations(ann), self.n.loc(name_node), prefix)
        self.n.declare(scope, name, action, name_node)
        inner = Scope(scope)
        for p in params:
            inner.names[p.name] = p
        saved, self.n.ctx = self.n.ctx, Context("action", name, self.n.ctx.block, prefix)
        action.body = self.st.block(body, inner)
        self.n.ctx = saved
        if scope is self.n.top:
            self.n.program.actions[name] = action
        return action

    def extern_instance(self, node: Tree, type_node: Tree, args_node: Tree, name: str, anns: ir.Annotations, loc: ir.Loc,
                        scope: Scope, control: str | None) -> ir.ExternInstance:
        """An extern object built by `type_node(args)`, checked against the extern's constructors."""
        base = type_node.children[0] if type_node.data == "specialized_type" else type_node
        if type_node.data not in ("type_name", "specialized_type"):
            raise self.n.error(type_node, f"{self.n.text(type_node)} cannot be instantiated")
        decl = self.n.top.lookup(self.n.name_of(base))
        type_args: list[ir.Type] = []
        if isinstance(decl, ir.ExternType) and type_node.data == "type_name":  # `typedef register<T> R;` then `R(n) r;`
            type_args, decl = list(decl.type_args), decl.decl
        if not isinstance(decl, ir.ExternDecl):
            raise self.n.error(type_node, f"unsupported: instantiating {self.n.text(type_node)} (only extern objects)")
        if type_node.data == "specialized_type":
            type_args = [self.ty.resolve_type(t, scope) for t in type_node.children[1].children]
        if len(type_args) != len(decl.type_params):
            raise self.n.error(type_node, f"{decl.name}: expected {len(decl.type_params)} type arguments, got {len(type_args)}")
        bindings = dict(zip(decl.type_params, type_args))
        args = self.ca.arg_nodes(args_node)
        ctors = [c for c in decl.constructors if len(c.params) == len(args)]
        if not ctors:
            raise self.n.error(args_node if args else node, f"{decl.name}: no constructor with {len(args)} arguments")
        values = self.ca.bind_args(ctors[0].params, args, scope, bindings, node, f"{decl.name} constructor")
        for a, n in zip(values, args):
            if not is_constant(a):
                raise self.n.error(n[1], f"{decl.name}: constructor argument must be a compile-time constant")
        etype = ir.ExternType(decl.name, tuple(type_args), decl)
        return ir.ExternInstance(name, decl.name, etype, type_args, values, anns, loc, control)
