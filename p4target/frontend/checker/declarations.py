"""Top-level declarations in source order (P4 requires declaration before use): constants, types,
errors and match kinds, externs and their instances, functions, block types, actions."""
from __future__ import annotations

from lark import Tree

from ...errors import P4Error
from .. import ir
from ..passes.walk import completes
from ..typing import VOID, is_numeric
from .constants import is_constant
from .names import Context, GenericFunction, GenericType, Scope
from .statements import StatementRules


class DeclarationRules(StatementRules):
    """The program's declarations, one `decl_<rule>` method per grammar rule."""

    def run(self, tree: Tree) -> ir.Program:
        for decl in tree.children:
            self.declaration(decl)
        if self.program.main is None:
            last_line = self.source.line_map[-1][0] if self.source.line_map else None
            raise P4Error("no main package instantiation (V1Switch(...) main;)", last_line)
        return self.program

    def declaration(self, node: Tree) -> None:
        handler = getattr(self, "decl_" + node.data, None)
        if handler is None:
            raise self.error(node, f"unsupported: {node.data.replace('_', ' ')}")
        handler(node)

    def decl_empty(self, node: Tree) -> None:
        return None

    def decl_const_decl(self, node: Tree, scope: Scope | None = None) -> ir.ConstDecl:
        scope = scope or self.top
        ann, type_node, name_node, value_node = node.children
        t = self.resolve_type(type_node, scope)
        value = self.coerce(self.expr(value_node, scope), t, value_node)
        if not is_constant(value):
            raise self.error(value_node, f"{self.name_of(name_node)}: initializer is not a compile-time constant")
        decl = ir.ConstDecl(self.name_of(name_node), t, value, self.annotations(ann), self.loc(name_node))
        self.declare(scope, decl.name, decl, name_node)
        if scope is self.top:
            self.program.constants[decl.name] = decl
        return decl

    def decl_typedef_decl(self, node: Tree) -> None:
        ann, type_node, name_node = node.children
        t = self.resolve_type(type_node, self.top)
        name = self.name_of(name_node)
        self.declare(self.top, name, t, name_node)
        self.program.typedefs[name] = t

    def decl_newtype_decl(self, node: Tree) -> None:
        ann, type_node, name_node = node.children
        base = self.resolve_type(type_node, self.top)
        if not (is_numeric(base) or isinstance(base, (ir.BoolType, ir.NewType))):
            raise self.error(type_node, f"unsupported: type declaration over {base}")
        name = self.name_of(name_node)
        t = ir.NewType(name, base, self.annotations(ann), self.loc(name_node))
        self.declare(self.top, name, t, name_node)
        self.program.types[name] = t

    def _struct_like(self, node: Tree, cls: type[ir.StructLikeType]) -> None:
        ann, name_node, tp, *fields = node.children
        name = self.name_of(name_node)
        if tp is not None:
            params = [self.name_of(t) for t in tp.children[0].children]
            self.declare(self.top, name, GenericType(cls, name, node, params), name_node)
            return
        t = cls(name, [], self.annotations(ann), self.loc(name_node))
        self.declare(self.top, name, t, name_node)
        self._fields(t, fields, self.top)

    def decl_header_decl(self, node: Tree) -> None:
        self._struct_like(node, ir.HeaderType)

    def decl_struct_decl(self, node: Tree) -> None:
        self._struct_like(node, ir.StructType)

    def decl_header_union_decl(self, node: Tree) -> None:
        self._struct_like(node, ir.HeaderUnionType)

    def decl_enum_decl(self, node: Tree) -> None:
        ann, name_node, names = node.children
        name = self.name_of(name_node)
        t = ir.EnumType(name, [self.name_of(n) for n in names.children], None, {}, self.annotations(ann), self.loc(name_node))
        self.declare(self.top, name, t, name_node)
        self.program.types[name] = t

    def decl_ser_enum_decl(self, node: Tree) -> None:
        ann, base_node, name_node, *values = node.children
        base = self.resolve_type(base_node, self.top)
        if not is_numeric(base):
            raise self.error(base_node, "enum underlying type must be bit<W> or int<W>")
        name = self.name_of(name_node)
        t = ir.EnumType(name, [], base, {}, self.annotations(ann), self.loc(name_node))
        for v in values:
            member = self.name_of(v.children[0])
            value = self.coerce(self.expr(v.children[1], self.top), base, v.children[1])
            if not isinstance(value, ir.Constant):
                raise self.error(v.children[1], f"{member}: enum value must be a constant")
            t.members.append(member)
            t.values[member] = value.value
        self.declare(self.top, name, t, name_node)
        self.program.types[name] = t

    def decl_error_decl(self, node: Tree) -> None:
        self.declare_members(node, self.program.errors, "error.{}: duplicate declaration")

    def decl_match_kind_decl(self, node: Tree) -> None:
        self.declare_members(node, self.program.match_kinds, "{}: duplicate match_kind")

    def declare_members(self, node: Tree, names: list[str], duplicate: str) -> None:
        """Append each name an `error { ... }` or `match_kind { ... }` declares; `duplicate` words a repeat."""
        for n in node.children[0].children:
            name = self.name_of(n)
            if name in names:
                raise self.error(n, duplicate.format(name))
            names.append(name)

    def function_proto(self, node: Tree, scope: Scope, ann: Tree | None) -> ir.ExternFunction:
        ret_node, name_node, tp_node, params_node = node.children
        tps, inner = self.type_params(tp_node, scope)
        ret = self.resolve_type(ret_node, inner)
        return ir.ExternFunction(self.name_of(name_node), self.params(params_node, inner), ret, tps,
                                 self.annotations(ann), self.loc(name_node))

    def decl_extern_function(self, node: Tree) -> None:
        f = self.function_proto(node.children[1], self.top, node.children[0])
        existing = self.top.lookup(f.name)
        if existing is None:
            self.top.names[f.name] = [f]
        elif isinstance(existing, list):
            existing.append(f)
        else:
            raise self.error(node.children[1], f"{f.name}: duplicate declaration")
        self.program.extern_functions.setdefault(f.name, []).append(f)

    def decl_extern_object(self, node: Tree) -> None:
        ann, head, *members = node.children
        if head.data == "specialized_type":
            name_node = head.children[0]
            tps, inner = self.type_params(Tree("type_params", [head.children[1]]), self.top)
        else:
            name_node, tps, inner = head, [], Scope(self.top)
        name = self.name_of(name_node)
        decl = ir.ExternDecl(name, tps, [], {}, self.annotations(ann), self.loc(name_node))
        self.declare(self.top, name, decl, name_node)
        for m in members:
            if m.data == "constructor":
                if self.name_of(m.children[1]) != name:
                    raise self.error(m.children[1], f"constructor name must be {name}")
                decl.constructors.append(ir.ExternMethod(name, self.params(m.children[2], inner), VOID, [],
                                                         self.annotations(m.children[0]), self.loc(m.children[1])))
            else:
                f = self.function_proto(m.children[1], inner, m.children[0])
                decl.methods.setdefault(f.name, []).append(
                    ir.ExternMethod(f.name, f.params, f.return_type, f.type_params, f.annotations, f.loc))
        self.program.externs[name] = decl

    def decl_function_decl(self, node: Tree) -> None:
        ann, proto, body = node.children
        ret_node, name_node, tp_node, params_node = proto.children
        name = self.name_of(name_node)
        if tp_node is not None:  # checked for each binding of its type parameters, at the calls
            tps, inner = self.type_params(tp_node, self.top)
            self.declare(self.top, name, GenericFunction(name, node, tps, self.params(params_node, inner)), name_node)
            return
        f = self.function(node, {})
        self.declare(self.top, name, f, name_node)  # after the body: a function cannot call itself
        self.program.functions[name] = f

    def function(self, node: Tree, bindings: dict[str, ir.Type]) -> ir.Function:
        """Check a function declaration, its type parameters (if any) bound to `bindings`."""
        ann, proto, body = node.children
        ret_node, name_node, tp_node, params_node = proto.children
        name = self.name_of(name_node)
        scope = Scope(self.top)
        scope.names.update(bindings)
        ret = self.resolve_type(ret_node, scope)
        params = self.params(params_node, scope)
        for p in params:
            scope.names[p.name] = p
        f = ir.Function(name, params, ret, ir.Block(self.loc(body)), self.annotations(ann), self.loc(name_node))
        saved, self.ctx = self.ctx, Context("function", name, function=f)
        f.body = self.block(body, scope)
        self.ctx = saved
        if not isinstance(ret, ir.VoidType) and completes(f.body):
            raise self.error(name_node, f"Function '{name}' does not return a value on all paths")
        return f

    def decl_parser_type_decl(self, node: Tree) -> None:
        self._block_type(node, "parser")

    def decl_control_type_decl(self, node: Tree) -> None:
        self._block_type(node, "control")

    def decl_package_decl(self, node: Tree) -> None:
        self._block_type(node, "package")

    def _block_type(self, node: Tree, kind: str) -> None:
        name_node = node.children[1]
        tps, inner = self.type_params(node.children[2], self.top)
        params = self.params(node.children[3], inner)
        name = self.name_of(name_node)
        self.declare(self.top, name, ("blocktype", kind, name, params), name_node)

    def decl_action_decl(self, node: Tree, scope: Scope | None = None, prefix: str | None = None) -> ir.Action:
        scope = scope or self.top
        ann, name_node, params_node, body = node.children
        name = self.name_of(name_node)
        params = self.params(params_node, scope)
        seen_data = False
        for p in params:
            if p.direction == "":
                seen_data = True
            elif seen_data:
                raise self.error(params_node, f"{name}: directional parameters must come before directionless ones")
        action = ir.Action(name, params, ir.Block(self.loc(body)), self.annotations(ann), self.loc(name_node), prefix)
        self.declare(scope, name, action, name_node)
        inner = Scope(scope)
        for p in params:
            inner.names[p.name] = p
        saved, self.ctx = self.ctx, Context("action", name, self.ctx.block, prefix)
        action.body = self.block(body, inner)
        self.ctx = saved
        if scope is self.top:
            self.program.actions[name] = action
        return action

    def extern_instance(self, node: Tree, type_node: Tree, args_node: Tree, name: str, anns: ir.Annotations, loc: ir.Loc,
                        scope: Scope, control: str | None) -> ir.ExternInstance:
        """An extern object built by `type_node(args)`, checked against the extern's constructors."""
        base = type_node.children[0] if type_node.data == "specialized_type" else type_node
        if type_node.data not in ("type_name", "specialized_type"):
            raise self.error(type_node, f"{self.text(type_node)} cannot be instantiated")
        decl = self.top.lookup(self.name_of(base))
        if not isinstance(decl, ir.ExternDecl):
            raise self.error(type_node, f"unsupported: instantiating {self.text(type_node)} (only extern objects)")
        type_args = []
        if type_node.data == "specialized_type":
            type_args = [self.resolve_type(t, scope) for t in type_node.children[1].children]
        if len(type_args) != len(decl.type_params):
            raise self.error(type_node, f"{decl.name}: expected {len(decl.type_params)} type arguments, got {len(type_args)}")
        bindings = dict(zip(decl.type_params, type_args))
        args = self.arg_nodes(args_node)
        ctors = [c for c in decl.constructors if len(c.params) == len(args)]
        if not ctors:
            raise self.error(args_node if args else node, f"{decl.name}: no constructor with {len(args)} arguments")
        values = self.bind_args(ctors[0].params, args, scope, bindings, node, f"{decl.name} constructor")
        for a, n in zip(values, args):
            if not is_constant(a):
                raise self.error(n[1], f"{decl.name}: constructor argument must be a compile-time constant")
        etype = ir.ExternType(decl.name, tuple(type_args), decl)
        return ir.ExternInstance(name, decl.name, etype, type_args, values, anns, loc, control)
