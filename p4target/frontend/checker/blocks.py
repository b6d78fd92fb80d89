"""Parsers and controls: declared once, checked per instance (constructor arguments bound, the
instance's control-plane prefix); parser states, value sets; instantiations."""
from __future__ import annotations

from lark import Tree

from .. import ir
from ..typing import is_key, is_numeric, same_type
from .annotations import Annotations
from .calls import Calls
from .constants import is_constant
from .declarations import Declarations
from .expressions import Expressions
from .names import BlockDecl, Checking, Context, Names, Node, Scope
from .statements import Statements
from .tables import Tables
from .types import Types


class Blocks:
    """Parser and control declarations and their instances."""

    def __init__(self, n: Names, e: Expressions, an: Annotations, ty: Types, ca: Calls, st: Statements,
                 de: Declarations, tb: Tables, up: Checking):
        self.n, self.e, self.an, self.ty, self.ca, self.st, self.de, self.tb, self.up = n, e, an, ty, ca, st, de, tb, up

    def decl_parser_decl(self, node: Tree) -> None:
        self.block_decl(node, "parser")

    def decl_control_decl(self, node: Tree) -> None:
        self.block_decl(node, "control")

    def block_decl(self, node: Tree, kind: str) -> None:
        """Declare a parser/control; check it now unless it has constructor parameters
        (then each instance is checked with its arguments bound)."""
        ann, name_node, tp, _, ctor = node.children[:5]
        name = self.n.name_of(name_node)
        tps, scope = self.ty.type_params(tp, self.n.top)
        ctor_params = self.ty.params(ctor.children[0], scope) if ctor is not None else []
        for p in ctor_params:
            if p.direction:
                raise self.n.error(p.loc, f"{p.name}: constructor parameters cannot have a direction")
        decl = BlockDecl(kind, name, node, ctor_params, tps)
        self.n.declare(self.n.top, name, decl, name_node)
        if not ctor_params and not tps:
            decl.checked = self.build_block(decl, name, {})
            self.add_block(name, decl.checked)

    def add_block(self, name: str, block: ir.Parser | ir.Control) -> None:
        """A checked parser/control into the program."""
        if isinstance(block, ir.Parser):
            self.n.program.parsers[name] = block
        else:
            self.n.program.controls[name] = block

    def build_block(self, decl: BlockDecl, prefix: str, bindings: dict) -> ir.Parser | ir.Control:
        """Check a parser/control declaration for one instance."""
        if decl.building:
            raise self.n.error(self.n.loc(decl.node.children[1]), f"{decl.name}: recursive instantiation")
        decl.building = True
        try:
            build = self.build_parser if decl.kind == "parser" else self.build_control
            return build(decl.node, prefix, bindings)
        finally:
            decl.building = False

    def ctor_bindings(self, decl: BlockDecl, args_node: Tree, scope: Scope, node: Node) -> dict:
        """Constructor arguments of a parser/control instance: name -> ConstDecl (values)
        or the ExternInstance / BlockInstance passed."""
        args = self.ca.arg_nodes(args_node)
        if any(k is not None for k, _ in args):
            by_name = dict(args)
            ordered = [(p, by_name.get(p.name)) for p in decl.ctor_params]
        else:
            if len(args) > len(decl.ctor_params):
                raise self.n.error(node, f"{decl.name}: expected {len(decl.ctor_params)} constructor arguments, got {len(args)}")
            ordered = [(p, args[i][1] if i < len(args) else None) for i, p in enumerate(decl.ctor_params)]
        out: dict = {}
        for p, n in ordered:
            if n is None:
                if p.default is None:
                    raise self.n.error(node, f"{decl.name}: missing constructor argument {p.name}")
                out[p.name] = ir.ConstDecl(p.name, p.type, p.default, loc=p.loc)
            elif isinstance(p.type, (ir.ParserOrControlType, ir.ExternType)):
                obj = scope.lookup(self.n.name_of(n.children[0])) if n.data == "name_ref" else None
                ok = (isinstance(obj, ir.BlockInstance) and isinstance(p.type, ir.ParserOrControlType)) or (
                    isinstance(obj, ir.ExternInstance) and isinstance(p.type, ir.ExternType) and obj.type == p.type)
                if not ok:
                    raise self.n.error(n, f"{decl.name}: argument {self.n.text(n)} for {p.name} must name an instance of {p.type}")
                out[p.name] = obj
            else:
                v = self.e.coerce(self.e.expr(n, scope, p.type), p.type, n)
                if not is_constant(v):
                    raise self.n.error(n, f"{decl.name}: constructor argument {p.name} must be a compile-time constant")
                out[p.name] = ir.ConstDecl(p.name, p.type, v, loc=p.loc)
        return out

    def instantiate(self, decl: BlockDecl, name: str, anns: ir.Annotations, bindings: dict, loc: ir.Loc) -> ir.BlockInstance:
        """A parser/control instance declared in the block being built; p4c names its objects
        `<enclosing prefix>.<instance name or @name>.<object>`."""
        external = anns.get_str("name") or name
        prefix = external[1:] if external.startswith(".") else f"{self.n.ctx.prefix}.{external}"
        saved = self.n.ctx
        block = self.build_block(decl, prefix, bindings)
        self.n.ctx = saved
        return ir.BlockInstance(name, block, anns, loc)

    def build_parser(self, node: Tree, prefix: str, bindings: dict) -> ir.Parser:
        ann, name_node, tp, params_node, ctor, *rest = node.children
        name = self.n.name_of(name_node)
        scope = Scope(self.n.top)
        scope.names.update(bindings)
        params = self.ty.params(params_node, scope)
        parser = ir.Parser(name, params, [], {}, self.an.annotations(ann), self.n.loc(name_node))
        for p in params:
            scope.names[p.name] = p
        saved, self.n.ctx = self.n.ctx, Context("parser", name, parser, prefix)
        states = [r for r in rest if r.data == "parser_state"]
        for local in rest:
            if local.data == "parser_state":
                continue
            if local.data == "var_decl":
                parser.locals.append(self.st.var_decl(local, scope))
            elif local.data == "const_decl":
                self.de.decl_const_decl(local, scope)
            elif local.data == "instantiation":
                parser.locals.append(self.decl_instantiation(local, scope, prefix))
            elif local.data == "value_set_decl":
                parser.locals.append(self.value_set(local, scope, prefix))
            else:
                raise self.n.error(local, f"unsupported: {local.data.replace('_', ' ')}")
        names: set[str] = set()
        for s in states:
            sname = self.n.name_of(s.children[1])
            if sname in names or sname in ("accept", "reject"):
                raise self.n.error(s.children[1], f"state {sname}: duplicate declaration")
            names.add(sname)
        self.n.ctx = Context("state", name, parser, prefix)
        for s in states:
            st = self.parser_state(s, scope)
            parser.states[st.name] = st
        self.n.ctx = saved
        if "start" not in parser.states:
            raise self.n.error(name_node, f"parser {name}: no start state")
        for st in parser.states.values():
            targets = [st.transition.next] if isinstance(st.transition, ir.DirectTransition) else [c.next for c in st.transition.cases]
            loc = st.transition.loc
            for t in targets:
                if t not in parser.states and t not in ("accept", "reject"):
                    raise self.n.error(loc, f"{t}: no such parser state")
        return parser

    def value_set(self, node: Tree, scope: Scope, prefix: str) -> ir.ValueSet:
        """`value_set<T>(size) name;`: T is bit<W>/int<W> or a struct of them (one field per select key)."""
        ann, targs, *_, size_node, name_node = node.children
        if len(targs.children) != 1:
            raise self.n.error(targs, "value_set takes one type argument")
        t = self.ty.resolve_type(targs.children[0], scope)
        if isinstance(t, ir.EnumType) and t.underlying is not None:
            raise self.n.error(targs, f"unsupported: value_set<{t}> of a serializable enum (p4c's P4Info gives it one "
                                    "match field per enum member)")
        fields = t.fields if isinstance(t, ir.StructType) else [ir.Field("", t)]
        bad = next((f for f in fields if not is_numeric(f.type)), None)
        if bad is not None and isinstance(t, ir.StructType):  # p4c blames the field
            raise self.n.error(bad.loc, "Unsupported type argument for Value Set; this version of P4Runtime requires "
                               "that when the type parameter of a Value Set is a struct, all the fields of the struct "
                               f"must be of type bit<W>, but {bad.name} is not")
        if not fields or bad is not None:
            raise self.n.error(targs, f"value_set<{t}>: Unsupported type argument for Value Set; P4Runtime requires the "
                                    "type parameter of a Value Set to be a bit<W> or a struct of bit<W> fields")
        size = self.e.expr(size_node, scope)
        if not (isinstance(size, ir.Constant) and size.value >= 0):
            raise self.n.error(size_node, f"value_set size {self.n.text(size_node)} must be a compile-time constant")
        name = self.n.name_of(name_node)
        vs = ir.ValueSet(name, t, size.value, self.an.annotations(ann), self.n.loc(name_node), prefix)
        self.n.declare(scope, name, vs, name_node)
        return vs

    def value_set_case(self, node: Tree, keys: list[ir.Expr], scope: Scope) -> list[ir.KeySet] | None:
        """A select case that names a value set: its one KsValueSet, checked against the keys; else None."""
        if node.data != "ks_value" or node.children[0].data != "name_ref":
            return None
        vs = scope.lookup(self.n.name_of(node.children[0].children[0]))
        if not isinstance(vs, ir.ValueSet):
            return None
        fields = vs.fields
        if len(fields) != len(keys) or not all(same_type(f.type, k.type) for f, k in zip(fields, keys)):
            raise self.n.error(node, f"select: value set {vs.name} holds {', '.join(str(f.type) for f in fields)}, "
                                   f"the keys are {', '.join(str(k.type) for k in keys)}")
        return [ir.KsValueSet(vs, self.n.loc(node))]

    def parser_state(self, node: Tree, scope: Scope) -> ir.ParserState:
        ann, name_node, *stmts, trans = node.children
        inner = Scope(scope)
        body = [self.st.statement(s, inner) for s in stmts]
        if trans is None:  # a state without a transition statement goes to reject
            loc = self.n.loc(name_node)
            transition: ir.DirectTransition | ir.SelectTransition = ir.DirectTransition("reject", loc)
            self.n.program.warnings.append(f"{loc}: warning: {self.n.name_of(name_node)}: implicit transition to `reject'")
        elif trans.data == "direct_transition":
            transition = ir.DirectTransition(self.n.name_of(trans.children[0]), self.n.loc(trans.children[0]))
        else:
            args_node, *cases = trans.children
            keys = [self.e.expr(n, inner) for _, n in self.ca.arg_nodes(args_node)]
            for k, (_, n) in zip(keys, self.ca.arg_nodes(args_node)):
                if not is_key(k.type):
                    raise self.n.error(n, f"select key {self.n.text(n)} has type {k.type}, which cannot be matched")
            out_cases = []
            for c in cases:
                ks_node, next_node = c.children
                keysets = self.value_set_case(ks_node, keys, inner) or self.tb.keysets(ks_node, keys, inner, "select", trans)
                out_cases.append(ir.SelectCase(keysets, self.n.name_of(next_node), self.n.loc(next_node)))
            transition = ir.SelectTransition(keys, out_cases, self.n.loc(trans))
        return ir.ParserState(self.n.name_of(name_node), body, transition, self.an.annotations(ann), self.n.loc(name_node))

    def build_control(self, node: Tree, prefix: str, bindings: dict) -> ir.Control:
        ann, name_node, tp, params_node, ctor, *locals_, body = node.children
        name = self.n.name_of(name_node)
        scope = Scope(self.n.top)
        scope.names.update(bindings)
        params = self.ty.params(params_node, scope)
        control = ir.Control(name, params, annotations=self.an.annotations(ann), loc=self.n.loc(name_node))
        for p in params:
            scope.names[p.name] = p
        saved, self.n.ctx = self.n.ctx, Context("control", name, control, prefix)
        for local in locals_:
            kind = local.data
            if kind == "action_decl":
                a = self.de.decl_action_decl(local, scope, prefix)
                control.actions[a.name] = a
                control.locals.append(a)
            elif kind == "table_decl":
                t = self.tb.table(local, scope, prefix)
                control.tables[t.name] = t
                control.locals.append(t)
            elif kind == "instantiation":
                inst = self.decl_instantiation(local, scope, prefix)
                if isinstance(inst, ir.ExternInstance):
                    control.instances[inst.name] = inst
                control.locals.append(inst)
            elif kind == "var_decl":
                control.locals.append(self.st.var_decl(local, scope))
            elif kind == "const_decl":
                self.de.decl_const_decl(local, scope)
            else:
                raise self.n.error(local, f"unsupported: {kind.replace('_', ' ')}")
        control.body = self.st.block(body, Scope(scope))
        self.n.ctx = saved
        return control

    def decl_instantiation(self, node: Tree, scope: Scope | None = None,
                           prefix: str | None = None) -> ir.BlockInstance | ir.ExternInstance | None:
        """An instance of an extern, parser or control; at the top level also `main` (None)."""
        scope = scope or self.n.top
        ann, type_node, args_node, name_node = node.children
        name = self.n.name_of(name_node)
        decl = None
        if type_node.data in ("type_name", "specialized_type"):
            decl = self.n.top.lookup(self.n.name_of(type_node.children[0] if type_node.data == "specialized_type" else type_node))
        if scope is self.n.top and not isinstance(decl, ir.ExternDecl):
            self.up.main_instance(node)
            return None
        if isinstance(decl, BlockDecl):
            type_args = [self.ty.resolve_type(t, scope) for t in type_node.children[1].children] \
                if type_node.data == "specialized_type" else []
            if len(type_args) != len(decl.type_params):
                raise self.n.error(type_node, f"{decl.name}: expected {len(decl.type_params)} type arguments, got {len(type_args)}")
            bindings = dict(zip(decl.type_params, type_args))
            bindings.update(self.ctor_bindings(decl, args_node, scope, node))
            inst: ir.BlockInstance | ir.ExternInstance = self.instantiate(decl, name, self.an.annotations(ann), bindings,
                                                                          self.n.loc(name_node))
        else:
            inst = self.de.extern_instance(node, type_node, args_node, name, self.an.annotations(ann), self.n.loc(name_node),
                                        scope, prefix)
            if scope is self.n.top:
                self.n.program.instances.append(inst)
        self.n.declare(scope, name, inst, name_node)
        return inst
