"""Name resolution and type checking: lark parse tree -> typed IR (ir.Program).

One pass over the declarations in source order (P4 requires declaration before use).
Expressions are typed bottom-up; an untyped literal (InfInt) takes the type of the other
operand / the assigned l-value / the parameter it is passed to (`coerce`).
Every problem raises P4Error with the original FILE:LINE:COL.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lark import Token, Tree

from ..errors import P4Error
from . import ir
from .grammar import annotation_tokens, parse_annotation_body
from .passes.walk import completes, same_expr
from .preprocess import Source
from .typing import BIT32, BOOL, COMPARE, ERROR, INFINT, MATCH_KIND, STRING, VOID, fold_binary, is_key, is_numeric, same_type, wrap

_INT = re.compile(r"(?:(\d+)([ws]))?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|\d[0-9_]*)$")
_HEADER_METHODS = {"isValid": BOOL, "setValid": VOID, "setInvalid": VOID}
_STACK_METHODS = {"push_front", "pop_front"}
# Annotations whose bodies p4c reads as expressions (any other may hold free-form tokens)
_EXPRESSION_ANNOTATIONS = {"name", "id", "field_list", "priority", "max_group_size", "selector_size_semantics",
                           "max_member_weight", "controller_header", "brief", "description", "match"}
MAX_UNROLL = 1024  # iterations of one for loop: unrolling copies the body that many times
_V1SWITCH_STAGES = ["parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser"]


HIDDEN = object()  # a name declared in a scope that lookups there do not find (a for loop's variable after it)


class Scope:
    """A chain of name -> declaration maps."""

    def __init__(self, parent: Scope | None = None):
        self.parent = parent
        self.names: dict[str, object] = {}

    def lookup(self, name: str):
        scope = self
        while scope is not None:
            if name in scope.names:
                found = scope.names[name]
                return None if found is HIDDEN else found
            scope = scope.parent
        return None


class Context:
    """Where we are: enclosing block/action/function (for returns, exits, prefixes).

    `prefix` is the control-plane prefix of objects declared here (`MyIngress`, or
    `MyIngress.sub` inside an instance `sub`); `block` the Parser/Control being built.
    """

    def __init__(self, kind: str, name: str | None = None, block=None, prefix: str | None = None,
                 function: ir.Function | None = None):
        self.kind = kind  # "top", "parser", "control", "action", "state", "function"
        self.name = name
        self.block = block
        self.prefix = prefix
        self.function = function


@dataclass(eq=False)
class GenericFunction:
    """A function with type parameters, checked once per distinct binding of them."""

    name: str
    node: Tree
    type_params: list[str]
    params: list[ir.Param]  # typed with TypeVars: for inferring a call's bindings
    instances: dict[tuple, ir.Function] = field(default_factory=dict)
    building: set = field(default_factory=set)


@dataclass(eq=False)
class GenericType:
    """`struct S<T> { ... }` (or a header, header_union): checked anew for each list of type arguments."""

    cls: type
    name: str
    node: Tree
    params: list[str]
    instances: set[int] = field(default_factory=set)  # id() of its specializations


def _type_tag(t: ir.Type) -> str:
    """A type argument as p4c spells it in a specialized type's name (`bit<8>` -> `bit8`)."""
    if isinstance(t, (ir.BitsType, ir.IntType, ir.VarbitType)):
        return {ir.BitsType: "bit", ir.IntType: "int", ir.VarbitType: "varbit"}[type(t)] + str(t.width)
    return getattr(t, "name", None) or str(t).replace("<", "").replace(">", "").replace(", ", "_")


@dataclass(eq=False)
class LoopJump(ir.Stmt):
    """`break` or `continue` in a for loop being unrolled: cut out before the loop's IR is returned."""

    kind: str = "break"


def _has_jump(s: ir.Stmt | None) -> bool:
    if isinstance(s, LoopJump):
        return True
    if isinstance(s, ir.Block):
        return any(_has_jump(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return _has_jump(s.then) or _has_jump(s.else_)
    if isinstance(s, ir.Switch):
        return any(_has_jump(c.body) for c in s.cases)
    return False


@dataclass(eq=False)
class BlockDecl:
    """A parser or control declaration. Its tree is checked anew for every instance, with the
    constructor arguments bound and the instance's prefix, so each instance is its own IR."""

    kind: str  # "parser" | "control"
    name: str
    node: Tree
    ctor_params: list[ir.Param]
    type_params: list[str]
    checked: ir.Parser | ir.Control | None = None  # without constructor parameters: the declaration itself
    building: bool = field(default=False)


class Checker:
    def __init__(self, source: Source):
        self.source = source
        self.program = ir.Program()
        self.top = Scope()
        self.ctx = Context("top")
        self.tuple_structs: dict[ir.TupleType, ir.StructType] = {}
        self.loops = 0  # for loops being unrolled around the statement being checked

    # ------------------------------------------------------------------ locations / errors

    def loc(self, node) -> ir.Loc:
        if isinstance(node, Token):
            line, col = node.line, node.column
        elif isinstance(node, Tree) and not node.meta.empty:
            line, col = node.meta.line, node.meta.column
        else:
            return ir.NOWHERE
        file, orig = self.source.locate(line)
        return ir.Loc(file, orig, col)

    def error(self, node, message: str) -> P4Error:
        loc = node if isinstance(node, ir.Loc) else self.loc(node)
        return P4Error(message, loc.file, loc.line, loc.col)

    def text(self, node) -> str:
        """The source text of a node (for messages and match-field names)."""
        if isinstance(node, Token):
            return str(node)
        if isinstance(node, Tree) and not node.meta.empty:
            return self.source.text[node.meta.start_pos:node.meta.end_pos]
        return "?"

    # ------------------------------------------------------------------ small tree helpers

    def name_of(self, node) -> str:
        """A `name`/`ntname`/`type_name` tree or token -> its string."""
        if isinstance(node, Token):
            return str(node)
        return self.name_of(node.children[0])

    def annotations(self, node) -> ir.Annotations:
        anns = ir.Annotations()
        if node is None:
            return anns
        for a in node.children:
            name = self.name_of(a.children[0])
            if a.data == "structured_annotation":
                anns.append(ir.Annotation(name, self.structured_args(a), self.loc(a), structured=True))
                continue
            body = a.children[1] if len(a.children) > 1 else None
            text = None
            given: list = []
            if body is not None:
                start, end = body.meta.start_pos + 1, body.meta.end_pos - 1
                text = " ".join(annotation_tokens(self.source.text[start:end]))
                args_tree = parse_annotation_body(self.source, start, end)
                if args_tree is None and name in _EXPRESSION_ANNOTATIONS:
                    raise self.error(body, f"@{name}: the annotation's body must be a list of expressions")
                given = [c for c in args_tree.children if c is not None] if args_tree is not None else []
            if name == "name" and (len(given) != 1 or getattr(given[0], "data", "") != "string_lit"):
                raise self.error(a, f"{self.text(given[0]) if given else '@name'}: @name annotation's value must be a string")
            if name == "field_list":  # p4c evaluates these: named constants are allowed
                args = [self.field_list_index(c) for c in given]
            else:
                args = [self.annotation_arg(c) for c in given]
            anns.append(ir.Annotation(name, args, self.loc(a), text))
        return anns

    def structured_args(self, node: Tree) -> list:
        """`@a[v, ...]` -> [v, ...] or `@a[k=v, ...]` -> [(k, v), ...]: constants (int, str, bool), as P4Info holds them."""
        out: list = []
        items = [c for c in node.children[1:] if c is not None]
        for item in items:
            key = self.name_of(item.children[0]) if item.data == "ann_kv" else None
            e = self.expr(item.children[1] if key is not None else item, self.top)
            if not isinstance(e, (ir.Constant, ir.BoolLiteral, ir.StringLiteral)):
                raise self.error(item, f"{self.text(item)}: a structured annotation's values must be compile-time constants")
            out.append((key, e.value) if key is not None else e.value)
        if len({isinstance(v, tuple) for v in out}) > 1:
            raise self.error(node, f"@{self.name_of(node.children[0])}: mixes key=value pairs and plain expressions")
        keys = [v[0] for v in out if isinstance(v, tuple)]
        dup = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if dup is not None:
            raise self.error(node, f"{dup}: Duplicates declaration {dup}")
        return out

    def field_list_index(self, node) -> int:
        v = self.expr(node, self.top)
        if not isinstance(v, ir.Constant) or v.value < 0:
            raise self.error(node, f"{self.text(node)}: a @field_list index must be a non-negative integer constant")
        return v.value

    def annotation_arg(self, node):
        if isinstance(node, Tree):
            if node.data == "string_lit":
                return _unquote(node.children[0])
            if node.data == "int_lit":
                return self.int_literal(node).value
            if node.data == "unop" and str(node.children[0]) == "-" and getattr(node.children[1], "data", "") == "int_lit":
                return -self.int_literal(node.children[1]).value
        return re.sub(r"\s+", "", self.text(node))

    def declare(self, scope: Scope, name: str, decl, node) -> None:
        if name in scope.names:
            raise self.error(node, f"{name}: duplicate declaration")
        scope.names[name] = decl

    # ------------------------------------------------------------------ program

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
        if not _is_constant(value):
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

    def _struct_like(self, node: Tree, cls) -> None:
        ann, name_node, tp, *fields = node.children
        name = self.name_of(name_node)
        if tp is not None:
            params = [self.name_of(t) for t in tp.children[0].children]
            self.declare(self.top, name, GenericType(cls, name, node, params), name_node)
            return
        t = cls(name, [], self.annotations(ann), self.loc(name_node))
        self.declare(self.top, name, t, name_node)
        self._fields(t, fields, self.top)

    def specialize(self, g: GenericType, args: tuple[ir.Type, ...], node: Tree) -> ir.Type:
        """`S<T1, ...>`: the generic type's fields with its parameters bound, once per argument list;
        named as p4c names it (`S_bit8`, `Pair_bit8_S_bit8`)."""
        if len(args) != len(g.params):
            raise self.error(node, f"{g.name}: expected {len(g.params)} type arguments, got {len(args)}")
        if any(id(a) in g.instances for a in args):
            raise self.error(node, f"{g.name}: contains self '{g.name}' as type argument")
        name = "_".join([g.name] + [_type_tag(a) for a in args])
        t = self.program.types.get(name)
        if t is None:
            ann, name_node, _, *fields = g.node.children
            t = g.cls(name, [], self.annotations(ann), self.loc(name_node))
            g.instances.add(id(t))
            self.program.types[name] = t
            scope = Scope(self.top)
            scope.names.update(zip(g.params, args))
            self._fields(t, fields, scope)
        return t

    def _fields(self, t: ir.StructLikeType, fields: list, scope: Scope) -> None:
        name, cls = t.name, type(t)
        seen = set()
        for f in fields:
            fann, ftype_node, fname_node = f.children
            ftype = self.resolve_type(ftype_node, scope)
            fname = self.name_of(fname_node)
            if fname in seen:
                raise self.error(fname_node, f"{fname}: duplicate field in {name}")
            seen.add(fname)
            if cls is ir.HeaderType and not (isinstance(ftype, ir.VarbitType) or _fixed_bits(ftype)):
                raise self.error(ftype_node, f"{fname}: header field type {ftype} is not allowed in a header")
            if cls is ir.HeaderUnionType and not isinstance(ftype, ir.HeaderType):
                raise self.error(ftype_node, f"{fname}: header_union fields must be headers")
            t.fields.append(ir.Field(fname, ftype, self.annotations(fann), self.loc(fname_node)))
        self.program.types[name] = t

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
        for n in node.children[0].children:
            name = self.name_of(n)
            if name in self.program.errors:
                raise self.error(n, f"error.{name}: duplicate declaration")
            self.program.errors.append(name)

    def decl_match_kind_decl(self, node: Tree) -> None:
        for n in node.children[0].children:
            name = self.name_of(n)
            if name in self.program.match_kinds:
                raise self.error(n, f"{name}: duplicate match_kind")
            self.program.match_kinds.append(name)

    # ------------------------------------------------------------------ externs

    def type_params(self, node, scope: Scope) -> tuple[list[str], Scope]:
        """Declare a generic's type parameters in a new scope."""
        inner = Scope(scope)
        names: list[str] = []
        if node is not None:
            for arg in node.children[0].children:
                if not (isinstance(arg, Tree) and arg.data == "type_name"):
                    raise self.error(arg, "type parameter must be a simple name")
                n = self.name_of(arg)
                names.append(n)
                inner.names[n] = ir.TypeVar(n)
        return names, inner

    def params(self, node: Tree, scope: Scope) -> list[ir.Param]:
        out: list[ir.Param] = []
        for p in node.children:
            if p is None:
                continue
            ann, direction, type_node, name_node, default = p.children
            t = self.resolve_type(type_node, scope)
            d = str(direction.children[0]) if direction is not None else ""
            name = self.name_of(name_node)
            if any(q.name == name for q in out):
                raise self.error(name_node, f"{name}: duplicate parameter")
            dv = self.coerce(self.expr(default, scope), t, default) if default is not None else None
            out.append(ir.Param(name, d, t, self.annotations(ann), self.loc(name_node), dv))
        return out

    def function_proto(self, node: Tree, scope: Scope, ann) -> ir.ExternFunction:
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

    def generic_call(self, g: GenericFunction, args: list, scope: Scope, node, explicit: list | None) -> ir.FunctionCall:
        """A call of a generic function: its type arguments (explicit or inferred from the
        arguments) pick the instance of the function checked for them."""
        bindings = self.explicit_bindings(g.type_params, explicit, node, g.name)
        self.bind_args(g.params, args, scope, bindings, node, f"function {g.name}")
        missing = [t for t in g.type_params if t not in bindings]
        if missing:
            raise self.error(node, f"{g.name}: cannot infer type argument {missing[0]}")
        key = tuple(bindings[t] for t in g.type_params)
        f = g.instances.get(key)
        if f is None:
            if key in g.building:
                raise self.error(node, f"{g.name}: recursive call")
            g.building.add(key)
            saved = self.ctx
            f = g.instances[key] = self.function(g.node, bindings)
            self.ctx = saved
            g.building.discard(key)
            self.program.functions[f"{g.name}<{', '.join(str(t) for t in key)}>"] = f
        values = self.bind_args(f.params, args, scope, {}, node, f"function {g.name}")
        return ir.FunctionCall(f.return_type, self.loc(node), f, values)

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

    # ------------------------------------------------------------------ actions

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

    # ------------------------------------------------------------------ instances

    def decl_instantiation(self, node: Tree, scope: Scope | None = None, prefix: str | None = None):
        scope = scope or self.top
        ann, type_node, args_node, name_node = node.children
        name = self.name_of(name_node)
        decl = None
        if type_node.data in ("type_name", "specialized_type"):
            decl = self.top.lookup(self.name_of(type_node.children[0] if type_node.data == "specialized_type" else type_node))
        if scope is self.top and not isinstance(decl, ir.ExternDecl):
            return self.main_instance(node)
        if isinstance(decl, BlockDecl):
            type_args = [self.resolve_type(t, scope) for t in type_node.children[1].children] \
                if type_node.data == "specialized_type" else []
            if len(type_args) != len(decl.type_params):
                raise self.error(type_node, f"{decl.name}: expected {len(decl.type_params)} type arguments, got {len(type_args)}")
            bindings = dict(zip(decl.type_params, type_args))
            bindings.update(self.ctor_bindings(decl, args_node, scope, node))
            inst = self.instantiate(decl, name, self.annotations(ann), bindings, self.loc(name_node))
        else:
            inst = self.extern_instance(node, type_node, args_node, name, self.annotations(ann), self.loc(name_node),
                                        scope, prefix)
            if scope is self.top:
                self.program.instances.append(inst)
        self.declare(scope, name, inst, name_node)
        return inst

    def extern_instance(self, node: Tree, type_node: Tree, args_node, name: str, anns: ir.Annotations, loc: ir.Loc,
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
            if not _is_constant(a):
                raise self.error(n[1], f"{decl.name}: constructor argument must be a compile-time constant")
        etype = ir.ExternType(decl.name, tuple(type_args), decl)
        return ir.ExternInstance(name, decl.name, etype, type_args, values, anns, loc, control)

    def main_instance(self, node: Tree) -> None:
        ann, type_node, args_node, name_node = node.children
        pkg = self.top.lookup(self.name_of(type_node.children[0] if type_node.data == "specialized_type" else type_node))
        if not (isinstance(pkg, tuple) and pkg[1] == "package"):
            raise self.error(type_node, f"unsupported: top-level instantiation of {self.text(type_node)}")
        if pkg[2] != "V1Switch":
            raise self.error(type_node, f"unsupported: package {pkg[2]} (only V1Switch)")
        args = self.arg_nodes(args_node)
        if len(args) != len(_V1SWITCH_STAGES):
            raise self.error(args_node, f"V1Switch: expected 6 arguments, got {len(args)}")
        blocks = []
        for (_, arg), stage in zip(args, _V1SWITCH_STAGES):
            if not (isinstance(arg, Tree) and arg.data == "ctor_call"):
                raise self.error(arg, f"V1Switch {stage}: expected a parser or control instance like X()")
            bname = self.name_of(arg.children[0])
            decl = self.top.lookup(bname)
            if not isinstance(decl, BlockDecl):
                raise self.error(arg, f"{bname}: no such parser or control")
            want = "parser" if stage == "parser" else "control"
            if decl.kind != want:
                raise self.error(arg, f"V1Switch {stage}: {bname} is not a {want}")
            block = decl.checked
            if decl.type_params:
                raise self.error(arg, f"unsupported: generic {want} {bname} as a V1Switch argument")
            if decl.ctor_params or self.arg_nodes(arg.children[1]):
                block = self.build_block(decl, bname, self.ctor_bindings(decl, arg.children[1], self.top, arg))
                (self.program.parsers if want == "parser" else self.program.controls)[bname] = block
            blocks.append(block)
        self.check_v1switch_types(blocks, args)
        self.program.main = ir.V1SwitchInstance(self.name_of(name_node), *blocks, loc=self.loc(name_node))

    def check_v1switch_types(self, blocks: list, args: list) -> None:
        """H and M must agree across stages, as V1Switch<H, M> requires."""
        p = blocks[0]
        if len(p.params) != 4:
            raise self.error(args[0][1], f"{p.name}: a v1model parser takes 4 parameters")
        h, m = p.params[1].type, p.params[2].type
        expected = {1: [h, m], 2: [h, m, None], 3: [h, m, None], 4: [h, m], 5: [None, h]}
        for i in range(1, 6):
            ctl = blocks[i]
            want = expected[i]
            if len(ctl.params) != len(want):
                raise self.error(args[i][1], f"{ctl.name}: {_V1SWITCH_STAGES[i]} control takes {len(want)} parameters")
            for prm, t in zip(ctl.params, want):
                if t is not None and not same_type(prm.type, t):
                    raise self.error(args[i][1], f"{ctl.name}: parameter {prm.name}: Cannot unify {prm.type} to {t}")

    # ------------------------------------------------------------------ parsers

    def decl_parser_decl(self, node: Tree) -> None:
        self.block_decl(node, "parser")

    def decl_control_decl(self, node: Tree) -> None:
        self.block_decl(node, "control")

    def block_decl(self, node: Tree, kind: str) -> None:
        """Declare a parser/control; check it now unless it has constructor parameters
        (then each instance is checked with its arguments bound)."""
        ann, name_node, tp, _, ctor = node.children[:5]
        name = self.name_of(name_node)
        tps, scope = self.type_params(tp, self.top)
        ctor_params = self.params(ctor.children[0], scope) if ctor is not None else []
        for p in ctor_params:
            if p.direction:
                raise self.error(p.loc, f"{p.name}: constructor parameters cannot have a direction")
        decl = BlockDecl(kind, name, node, ctor_params, tps)
        self.declare(self.top, name, decl, name_node)
        if not ctor_params and not tps:
            decl.checked = self.build_block(decl, name, {})
            (self.program.parsers if kind == "parser" else self.program.controls)[name] = decl.checked

    def build_block(self, decl: BlockDecl, prefix: str, bindings: dict) -> ir.Parser | ir.Control:
        """Check a parser/control declaration for one instance."""
        if decl.building:
            raise self.error(self.loc(decl.node.children[1]), f"{decl.name}: recursive instantiation")
        decl.building = True
        try:
            build = self.build_parser if decl.kind == "parser" else self.build_control
            return build(decl.node, prefix, bindings)
        finally:
            decl.building = False

    def ctor_bindings(self, decl: BlockDecl, args_node: Tree, scope: Scope, node) -> dict:
        """Constructor arguments of a parser/control instance: name -> ConstDecl (values)
        or the ExternInstance / BlockInstance passed."""
        args = self.arg_nodes(args_node)
        if any(k is not None for k, _ in args):
            by_name = dict(args)
            ordered = [(p, by_name.get(p.name)) for p in decl.ctor_params]
        else:
            if len(args) > len(decl.ctor_params):
                raise self.error(node, f"{decl.name}: expected {len(decl.ctor_params)} constructor arguments, got {len(args)}")
            ordered = [(p, args[i][1] if i < len(args) else None) for i, p in enumerate(decl.ctor_params)]
        out: dict = {}
        for p, n in ordered:
            if n is None:
                if p.default is None:
                    raise self.error(node, f"{decl.name}: missing constructor argument {p.name}")
                out[p.name] = ir.ConstDecl(p.name, p.type, p.default, loc=p.loc)
            elif isinstance(p.type, (ir.ParserOrControlType, ir.ExternType)):
                obj = scope.lookup(self.name_of(n.children[0])) if n.data == "name_ref" else None
                ok = (isinstance(obj, ir.BlockInstance) and isinstance(p.type, ir.ParserOrControlType)) or (
                    isinstance(obj, ir.ExternInstance) and isinstance(p.type, ir.ExternType) and obj.type == p.type)
                if not ok:
                    raise self.error(n, f"{decl.name}: argument {self.text(n)} for {p.name} must name an instance of {p.type}")
                out[p.name] = obj
            else:
                v = self.coerce(self.expr(n, scope, p.type), p.type, n)
                if not _is_constant(v):
                    raise self.error(n, f"{decl.name}: constructor argument {p.name} must be a compile-time constant")
                out[p.name] = ir.ConstDecl(p.name, p.type, v, loc=p.loc)
        return out

    def instantiate(self, decl: BlockDecl, name: str, anns: ir.Annotations, bindings: dict, loc: ir.Loc) -> ir.BlockInstance:
        """A parser/control instance declared in the block being built; p4c names its objects
        `<enclosing prefix>.<instance name or @name>.<object>`."""
        external = anns.get_str("name") or name
        prefix = external[1:] if external.startswith(".") else f"{self.ctx.prefix}.{external}"
        saved = self.ctx
        block = self.build_block(decl, prefix, bindings)
        self.ctx = saved
        return ir.BlockInstance(name, block, anns, loc)

    def build_parser(self, node: Tree, prefix: str, bindings: dict) -> ir.Parser:
        ann, name_node, tp, params_node, ctor, *rest = node.children
        name = self.name_of(name_node)
        scope = Scope(self.top)
        scope.names.update(bindings)
        params = self.params(params_node, scope)
        parser = ir.Parser(name, params, [], {}, self.annotations(ann), self.loc(name_node))
        for p in params:
            scope.names[p.name] = p
        saved, self.ctx = self.ctx, Context("parser", name, parser, prefix)
        states = [r for r in rest if r.data == "parser_state"]
        for local in rest:
            if local.data == "parser_state":
                continue
            if local.data == "var_decl":
                parser.locals.append(self.var_decl(local, scope))
            elif local.data == "const_decl":
                self.decl_const_decl(local, scope)
            elif local.data == "instantiation":
                parser.locals.append(self.decl_instantiation(local, scope, prefix))
            elif local.data == "value_set_decl":
                parser.locals.append(self.value_set(local, scope, prefix))
            else:
                raise self.error(local, f"unsupported: {local.data.replace('_', ' ')}")
        for s in states:
            sname = self.name_of(s.children[1])
            if sname in parser.states or sname in ("accept", "reject"):
                raise self.error(s.children[1], f"state {sname}: duplicate declaration")
            parser.states[sname] = None  # placeholder, states may refer forward
        self.ctx = Context("state", name, parser, prefix)
        for s in states:
            st = self.parser_state(s, scope)
            parser.states[st.name] = st
        self.ctx = saved
        if "start" not in parser.states:
            raise self.error(name_node, f"parser {name}: no start state")
        for st in parser.states.values():
            targets = [st.transition.next] if isinstance(st.transition, ir.DirectTransition) else [c.next for c in st.transition.cases]
            loc = st.transition.loc
            for t in targets:
                if t not in parser.states and t not in ("accept", "reject"):
                    raise self.error(loc, f"{t}: no such parser state")
        return parser

    def value_set(self, node: Tree, scope: Scope, prefix: str) -> ir.ValueSet:
        """`value_set<T>(size) name;`: T is bit<W>/int<W> or a struct of them (one field per select key)."""
        ann, targs, *_, size_node, name_node = node.children
        if len(targs.children) != 1:
            raise self.error(targs, "value_set takes one type argument")
        t = self.resolve_type(targs.children[0], scope)
        if isinstance(t, ir.EnumType) and t.underlying is not None:
            raise self.error(targs, f"unsupported: value_set<{t}> of a serializable enum (p4c's P4Info gives it one "
                                    "match field per enum member)")
        fields = t.fields if isinstance(t, ir.StructType) else [ir.Field("", t)]
        if not fields or not all(is_numeric(f.type) for f in fields):
            raise self.error(targs, f"value_set<{t}>: Unsupported type argument for Value Set; P4Runtime requires the "
                                    "type parameter of a Value Set to be a bit<W> or a struct of bit<W> fields")
        size = self.expr(size_node, scope)
        if not (isinstance(size, ir.Constant) and size.value >= 0):
            raise self.error(size_node, f"value_set size {self.text(size_node)} must be a compile-time constant")
        name = self.name_of(name_node)
        vs = ir.ValueSet(name, t, size.value, self.annotations(ann), self.loc(name_node), prefix)
        self.declare(scope, name, vs, name_node)
        return vs

    def value_set_case(self, node: Tree, keys: list[ir.Expr], scope: Scope) -> list[ir.KeySet] | None:
        """A select case that names a value set: its one KsValueSet, checked against the keys; else None."""
        if node.data != "ks_value" or node.children[0].data != "name_ref":
            return None
        vs = scope.lookup(self.name_of(node.children[0].children[0]))
        if not isinstance(vs, ir.ValueSet):
            return None
        fields = vs.fields
        if len(fields) != len(keys) or not all(same_type(f.type, k.type) for f, k in zip(fields, keys)):
            raise self.error(node, f"select: value set {vs.name} holds {', '.join(str(f.type) for f in fields)}, "
                                   f"the keys are {', '.join(str(k.type) for k in keys)}")
        return [ir.KsValueSet(vs, self.loc(node))]

    def parser_state(self, node: Tree, scope: Scope) -> ir.ParserState:
        ann, name_node, *stmts, trans = node.children
        inner = Scope(scope)
        body = [self.statement(s, inner) for s in stmts]
        if trans is None:  # a state without a transition statement goes to reject
            transition: ir.Transition = ir.DirectTransition("reject", self.loc(node))
        elif trans.data == "direct_transition":
            transition = ir.DirectTransition(self.name_of(trans.children[0]), self.loc(trans.children[0]))
        else:
            args_node, *cases = trans.children
            keys = [self.expr(n, inner) for _, n in self.arg_nodes(args_node)]
            for k, (_, n) in zip(keys, self.arg_nodes(args_node)):
                if not is_key(k.type):
                    raise self.error(n, f"select key {self.text(n)} has type {k.type}, which cannot be matched")
            out_cases = []
            for c in cases:
                ks_node, next_node = c.children
                keysets = self.value_set_case(ks_node, keys, inner) or self.keysets(ks_node, keys, inner, "select")
                out_cases.append(ir.SelectCase(keysets, self.name_of(next_node), self.loc(next_node)))
            transition = ir.SelectTransition(keys, out_cases, self.loc(trans))
        return ir.ParserState(self.name_of(name_node), body, transition, self.annotations(ann), self.loc(name_node))

    def keysets(self, node: Tree, keys: list[ir.Expr], scope: Scope, what: str) -> list[ir.KeySet]:
        """One KeySet per key from a (tuple) keyset expression."""
        items = node.children if node.data == "tuple_keyset" else [node]
        if node.data == "ks_default" and len(keys) > 1:
            return [ir.KsDefault(self.loc(node)) for _ in keys]
        if node.data == "ks_default" and not keys and what == "select":  # `select()`: only a default case
            return [ir.KsDefault(self.loc(node))]
        if len(items) != len(keys):
            raise self.error(node, f"{what}: keyset has {len(items)} elements but there are {len(keys)} keys")
        return [self.keyset(item, key.type, scope) for item, key in zip(items, keys)]

    def keyset(self, node: Tree, t: ir.Type, scope: Scope) -> ir.KeySet:
        loc = self.loc(node)
        if node.data == "ks_default":
            return ir.KsDefault(loc)
        vals = [self.keyset_value(n, t, scope) for n in node.children]
        for v, n in zip(vals, node.children):
            if not _is_constant(v):
                raise self.error(n, f"{self.text(n)}: keyset values must be compile-time constants")
        if node.data == "ks_mask":
            return ir.KsMask(vals[0], vals[1], loc)
        if node.data == "ks_range":
            return ir.KsRange(vals[0], vals[1], loc)
        return ir.KsValue(vals[0], loc)

    def keyset_value(self, node: Tree, t: ir.Type, scope: Scope) -> ir.Expr:
        """A keyset value or mask of key type `t` (an untyped number also for a serializable enum)."""
        e = self.expr(node, scope)
        if _serializable(t) and isinstance(e, ir.Constant) and isinstance(e.type, ir.InfIntType):
            return self.coerce(e, t.underlying, node)
        if isinstance(t, ir.NewType) and isinstance(e, ir.Constant) and isinstance(e.type, ir.InfIntType):
            return ir.Constant(t, e.loc, self.coerce(e, t.underlying, node).value, e.base)
        return self.coerce(e, t, node)

    # ------------------------------------------------------------------ controls

    def build_control(self, node: Tree, prefix: str, bindings: dict) -> ir.Control:
        ann, name_node, tp, params_node, ctor, *locals_, body = node.children
        name = self.name_of(name_node)
        scope = Scope(self.top)
        scope.names.update(bindings)
        params = self.params(params_node, scope)
        control = ir.Control(name, params, annotations=self.annotations(ann), loc=self.loc(name_node))
        for p in params:
            scope.names[p.name] = p
        saved, self.ctx = self.ctx, Context("control", name, control, prefix)
        for local in locals_:
            kind = local.data
            if kind == "action_decl":
                a = self.decl_action_decl(local, scope, prefix)
                control.actions[a.name] = a
                control.locals.append(a)
            elif kind == "table_decl":
                t = self.table(local, scope, prefix)
                control.tables[t.name] = t
                control.locals.append(t)
            elif kind == "instantiation":
                inst = self.decl_instantiation(local, scope, prefix)
                if isinstance(inst, ir.ExternInstance):
                    control.instances[inst.name] = inst
                control.locals.append(inst)
            elif kind == "var_decl":
                control.locals.append(self.var_decl(local, scope))
            elif kind == "const_decl":
                self.decl_const_decl(local, scope)
            else:
                raise self.error(local, f"unsupported: {kind.replace('_', ' ')}")
        control.body = self.block(body, Scope(scope))
        self.ctx = saved
        return control

    def table(self, node: Tree, scope: Scope, prefix: str) -> ir.Table:
        ann, name_node, *props = node.children
        name = self.name_of(name_node)
        table = ir.Table(name, annotations=self.annotations(ann), loc=self.loc(name_node), control=prefix)
        self.declare(scope, name, table, name_node)
        seen: set[str] = set()
        deferred = []
        for p in props:
            pname = {"key_prop": "key", "actions_prop": "actions", "entries_prop": "entries"}.get(p.data)
            if pname is None:
                pname = self.name_of([c for c in p.children if isinstance(c, Tree) and c.data == "name"][0])
            if pname in seen:
                raise self.error(p, f"table {name}: duplicate property {pname}")
            seen.add(pname)
            if p.data == "key_prop":
                for k in p.children:
                    self.key_element(k, scope, table)
            elif p.data == "actions_prop":
                for ref in p.children:
                    self.action_ref(ref, scope, table)
            else:
                deferred.append((pname, p))
        if "actions" not in seen:
            raise self.error(name_node, f"table {name}: no actions property")
        for pname, p in deferred:  # these refer to the key and action lists
            is_const = any(isinstance(c, Token) and c.type == "CONST" for c in p.children)
            if p.data == "entries_prop":
                table.entries_const = is_const
                for e in p.children:
                    if isinstance(e, Tree) and e.data == "entry":
                        table.entries.append(self.entry(e, scope, table))
                self.bmv2_priorities(table)
            elif pname == "implementation":
                table.implementation = self.table_implementation(p, scope, table)
            else:
                self.table_property(pname, p.children[-1], is_const, scope, table)
        return table

    @staticmethod
    def bmv2_priorities(table: ir.Table) -> None:
        """`@priority(n)` on entries (p4c/BMv2: the smallest n wins, an entry without one counts
        as its 1-based position) as priorities where the largest wins, like `priority = n`."""
        ranks = [e.annotations.get_int("priority") for e in table.entries]
        if all(r is None for r in ranks):
            return
        ranks = [r if r is not None else i + 1 for i, r in enumerate(ranks)]
        top = max(ranks) + 1
        for e, r in zip(table.entries, ranks):
            e.priority = top - r

    def table_implementation(self, prop: Tree, scope: Scope, table: ir.Table) -> ir.ExternInstance:
        """`implementation = p;` naming an action_profile/action_selector, or one built inline (needs @name)."""
        value = prop.children[-1]
        if value.data == "ctor_call":
            anns = self.annotations(prop.children[0])
            name = anns.get_str("name")
            if name is None:
                raise self.error(value, f"table {table.name}: an implementation built inline needs a @name "
                                        "annotation on the property (P4Runtime names it)")
            inst = self.extern_instance(value, value.children[0], value.children[1], name, anns, self.loc(value),
                                        scope, None)
        else:
            ref = self.expr(value, scope)
            if not isinstance(ref, ir.InstanceRef):
                raise self.error(value, f"table {table.name}: implementation must be an action_profile or action_selector")
            inst = ref.decl
        if inst.extern not in ("action_profile", "action_selector"):
            raise self.error(value, f"table {table.name}: implementation must be an action_profile or action_selector, "
                                    f"not {inst.extern}")
        return inst

    def key_element(self, node: Tree, scope: Scope, table: ir.Table) -> None:
        expr_node, kind_node, ann = node.children
        e = self.expr(expr_node, scope)
        kind = self.name_of(kind_node)
        if kind not in self.program.match_kinds:
            raise self.error(kind_node, f"{kind}: no such match_kind")
        if not is_key(e.type):
            raise self.error(expr_node, f"table {table.name}: key {self.text(expr_node)} has type {e.type}, which cannot be matched")
        if kind in ("lpm", "ternary", "range") and not (is_numeric(e.type) or isinstance(e.type, (ir.BoolType, ir.NewType))
                                                         or _serializable(e.type)):
            raise self.error(expr_node, f"table {table.name}: {kind} key must be bit<W> or int<W>")
        anns = self.annotations(ann)
        kname = anns.get_str("name") or self.key_name(e, expr_node)
        table.keys.append(ir.KeyElement(e, kind, kname, anns, self.loc(expr_node)))

    def key_name(self, e: ir.Expr, expr_node: Tree) -> str:
        """A key's control-plane name as p4c writes it: the source text, `X.$valid$` for `X.isValid()`."""
        if isinstance(e, ir.HeaderMethodCall) and e.method == "isValid":
            return re.sub(r"\s+", "", self.text(expr_node.children[0].children[0])) + ".$valid$"
        return re.sub(r"\s+", "", self.text(expr_node))

    def action_ref(self, node: Tree, scope: Scope, table: ir.Table) -> None:
        ann, name_node, args = node.children
        aname = self.name_of(name_node)
        action = scope.lookup(aname)
        if not isinstance(action, ir.Action):
            raise self.error(name_node, f"{aname}: no such action")
        bound = self.arg_nodes(args) if args is not None else []
        directional = [p for p in action.params if p.direction]
        if len(bound) > len(directional):
            raise self.error(name_node, f"unsupported: binding directionless parameters of {aname} in the actions list")
        if len(bound) < len(directional):
            raise self.error(name_node, f"{aname}: the actions list must bind its directional parameters "
                                        f"({', '.join(p.name for p in directional)})")
        values = self.bind_args(directional, bound, scope, {}, node, f"action {aname}")
        if any(r.action is action for r in table.actions):
            raise self.error(name_node, f"{aname}: duplicate action in table {table.name}")
        table.actions.append(ir.ActionRef(action, self.annotations(ann), self.loc(name_node), values))

    def action_binding(self, name_node, args_node, scope: Scope, table: ir.Table, what: str) -> ir.ActionBinding:
        aname = self.name_of(name_node)
        ref = next((r for r in table.actions if r.action.name == aname), None)
        if ref is None:
            raise self.error(name_node, f"{what}: action {aname} is not in the actions list of table {table.name}")
        action = ref.action
        args = self.arg_nodes(args_node) if args_node is not None else []
        if len(args) != len(action.params):
            raise self.error(name_node, f"{what}: action {aname} expects {len(action.params)} arguments, got {len(args)}")
        values = []
        for i, (p, (_kw, n)) in enumerate(zip(action.params, args)):
            if p.direction:
                v = self.expr(n, scope)
                if not same_expr(v, ref.args[i]):
                    raise self.error(n, f"{what}: argument {self.text(n)} for {p.name} differs from the one in the actions list")
            else:
                v = self.coerce(self.expr(n, scope), p.type, n)
                if not _is_constant(v):
                    raise self.error(n, f"{what}: argument {p.name} must be a compile-time constant")
            values.append(v)
        return ir.ActionBinding(action, values, self.loc(name_node))

    def table_property(self, pname: str, value: Tree, is_const: bool, scope: Scope, table: ir.Table) -> None:
        if pname == "default_action":
            if value.data == "call":
                callee, args = value.children
            else:
                callee, args = value, None
            if callee.data != "name_ref":
                raise self.error(value, "default_action must be an action call")
            table.default_action = self.action_binding(callee.children[0], args, scope, table, f"table {table.name} default_action")
            ref = next(r for r in table.actions if r.action is table.default_action.action)
            if ref.annotations.has("tableonly"):
                raise self.error(value, f"{ref.action.name} is @tableonly and cannot be the default action")
            table.default_action_const = is_const
        elif pname == "size":
            v = self.expr(value, scope)
            if not isinstance(v, ir.Constant) or v.value <= 0:
                raise self.error(value, f"table {table.name}: size must be a positive integer constant")
            table.size = v.value
        elif pname in ("counters", "meters"):
            v = self.expr(value, scope)
            want = "direct_counter" if pname == "counters" else "direct_meter"
            if not (isinstance(v, ir.InstanceRef) and v.decl.extern == want):
                raise self.error(value, f"table {table.name}: {pname} must name a {want} instance")
            if pname == "counters":
                table.direct_counter = v.decl
            else:
                table.direct_meter = v.decl
        else:
            table.other_properties[pname] = self.expr(value, scope)

    def entry(self, node: Tree, scope: Scope, table: ir.Table) -> ir.TableEntry:
        children = [c for c in node.children if not (isinstance(c, Token) and c.type == "CONST")]
        prio_node, ks_node, name_node, args_node, ann = children
        keys = self.keysets(ks_node, [k.expr for k in table.keys], scope, f"table {table.name} entry")
        for ks, key in zip(keys, table.keys):
            if key.match_kind == "exact" and not isinstance(ks, ir.KsValue):
                raise self.error(ks_node, f"table {table.name}: exact key {key.name} needs a plain value")
            if isinstance(ks, ir.KsRange) and key.match_kind != "range":
                raise self.error(ks_node, f"table {table.name}: a range keyset needs a range key")
        priority = None
        if prio_node is not None:
            if table.entries_const:
                raise self.error(prio_node, "Entry: Table with 'const' entries cannot have priorities")
            kw, pexpr = prio_node.children
            if str(kw) != "priority":
                raise self.error(kw, f"expected 'priority', got '{kw}'")
            p = self.expr(pexpr, scope)
            if not isinstance(p, ir.Constant) or p.value < 0:
                raise self.error(pexpr, "priority must be a non-negative integer constant")
            priority = p.value
        binding = self.action_binding(name_node, args_node, scope, table, f"table {table.name} entry")
        ref = next(r for r in table.actions if r.action is binding.action)
        if ref.annotations.has("defaultonly"):
            raise self.error(name_node, f"{binding.action.name} is @defaultonly and cannot be used in entries")
        return ir.TableEntry(keys, binding, priority, self.annotations(ann), self.loc(node))

    # ------------------------------------------------------------------ statements

    def block(self, node: Tree, scope: Scope) -> ir.Block:
        inner = Scope(scope)
        return ir.Block(self.loc(node), [self.statement(s, inner) for s in node.children])

    def var_decl(self, node: Tree, scope: Scope) -> ir.VarDecl:
        ann, type_node, name_node, init = node.children
        t = self.resolve_type(type_node, scope)
        if isinstance(t, (ir.ExternType, ir.VoidType, ir.InfIntType, ir.StringType)):
            raise self.error(type_node, f"cannot declare a variable of type {t}")
        if isinstance(t, ir.TupleType):
            t = self.tuple_struct(t)
        value = self.coerce(self.expr(init, scope, t), t, init) if init is not None else None
        name = self.name_of(name_node)
        decl = ir.VarDecl(name, t, value, self.annotations(ann), self.loc(name_node))
        self.declare(scope, name, decl, name_node)
        return decl

    def tuple_struct(self, t: ir.TupleType) -> ir.StructType:
        """The struct (fields f0, f1, ...) standing for a tuple type in variables: stored and
        initialized like any struct, so back ends need no tuples."""
        s = self.tuple_structs.get(t)
        if s is None:
            s = ir.StructType(str(t), [ir.Field(f"f{i}", e) for i, e in enumerate(t.elements)])
            self.tuple_structs[t] = s
        return s

    def statement(self, node: Tree, scope: Scope) -> ir.Stmt:
        loc = self.loc(node)
        kind = node.data
        in_parser = self.ctx.kind == "state"
        if kind == "block":
            return self.block(node, scope)
        if kind == "annotated_block":  # `@atomic { ... }`: BMv2 runs every block atomically anyway
            return self.block(node.children[1], scope)
        if kind == "var_decl":
            return ir.VarDeclStmt(loc, self.var_decl(node, scope))
        if kind == "const_decl":
            self.decl_const_decl(node, scope)
            return ir.Block(loc, [])
        if kind == "empty_stmt":
            return ir.Block(loc, [])
        if kind == "assignment":
            lhs = self.lvalue(node.children[0], scope)
            rhs = self.coerce(self.expr(node.children[1], scope, lhs.type), lhs.type, node.children[1], node)
            return ir.Assign(loc, lhs, rhs)
        if kind == "compound_assignment":
            return self.compound_assignment(node, scope)
        if kind == "call_stmt":
            call = self.call(node.children[0], node.children[1], scope, node)
            if isinstance(call, ir.BoolLiteral):  # a static_assert that held: nothing to run
                return ir.Block(loc, [])
            return ir.MethodCallStmt(loc, call)
        if kind == "type_call_stmt":
            type_node, name_node, args = node.children
            decl = self.top.lookup(self.name_of(type_node))
            if not isinstance(decl, BlockDecl):
                raise self.error(type_node, f"{self.text(type_node)}: only parsers and controls can be applied directly")
            return ir.MethodCallStmt(loc, self.block_apply(decl, name_node, self.arg_nodes(args), scope, node))
        if kind == "generic_call_stmt":
            lv, targs, _, args = node.children
            explicit = [self.resolve_type(t, scope) for t in targs.children]
            return ir.MethodCallStmt(loc, self.call(lv, args, scope, node, explicit))
        if kind == "if_stmt":
            cond_node, then_node, else_node = node.children
            cond = self.expr(cond_node, scope)
            if not isinstance(cond.type, ir.BoolType):
                raise self.error(cond_node, f"if condition {self.text(cond_node)} has type {cond.type}, not bool")
            then = self.statement(then_node, Scope(scope))
            else_ = self.statement(else_node, Scope(scope)) if else_node is not None else None
            return ir.If(loc, cond, then, else_)
        if in_parser:
            raise self.error(node, f"{kind.replace('_stmt', '')} statements are not allowed in a parser")
        if kind == "exit_stmt" and self.ctx.kind == "function":
            raise self.error(node, "exit is not allowed in a function")
        if kind == "exit_stmt":
            return ir.Exit(loc)
        if kind == "return_stmt":
            return self.return_stmt(node, scope)
        if kind == "switch_stmt":
            return self.switch(node, scope)
        if kind == "for_stmt":
            return self.for_loop(node, scope)
        if kind == "for_in_stmt":
            raise self.error(node, "BMV2 does not support for-in loops")
        if kind in ("break_stmt", "continue_stmt"):
            if not self.loops:
                raise self.error(node, f"{kind.removesuffix('_stmt')} outside a loop")
            return LoopJump(loc, kind.removesuffix("_stmt"))
        raise self.error(node, f"unsupported: {kind.replace('_', ' ')}")

    def compound_assignment(self, node: Tree, scope: Scope) -> ir.Assign:
        """`a op= b` is `a = a op b`, typed as that binary expression (so `a` is read once more)."""
        lhs = self.lvalue(node.children[0], scope)
        return ir.Assign(self.loc(node), lhs, self.coerce(self.compound_value(node, scope), lhs.type, node.children[2], node))

    def compound_value(self, node: Tree, scope: Scope) -> ir.Expr:
        """The `a op b` of `a op= b`."""
        lv_node, op_node, rhs_node = node.children
        if len(op_node.children) == 2:  # `>>=`: R_ANGLE_SHIFT then ">="
            shift, eq = op_node.children
            if shift.end_pos != eq.start_pos:
                raise self.error(eq, "syntax error, unexpected '>='")
            op = ">>"
        else:
            op = str(op_node.children[0])[:-1]
        return self.binary(node, op, lv_node, rhs_node, scope)

    def for_loop(self, node: Tree, scope: Scope) -> ir.Block:
        """`for (init; cond; update) body`, unrolled: BMv2 runs no loops, so the loop variables must be
        compile-time constants in every iteration; the body is checked once per iteration with them
        bound as constants. A variable declared outside the loop holds its final value after it; one
        declared in the loop's header is, as in p4c, a duplicate of any other in the enclosing block
        but not visible after the loop."""
        inits_node, cond_node, updates_node, body_node = node.children
        values: dict[str, ir.Expr] = {}
        outer: dict[str, ir.Expr] = {}  # loop variables declared outside: name -> l-value
        for init in inits_node.children if inits_node is not None else []:
            if init.data == "for_var":
                type_node, name_node, value_node = init.children
                t, name = self.resolve_type(type_node, scope), self.name_of(name_node)
                self.declare(scope, name, HIDDEN, name_node)
            else:
                lv_node, value_node = init.children
                if lv_node.data != "name_ref":
                    raise self.error(lv_node, f"unsupported: for loop initializing {self.text(lv_node)}, not a variable")
                lhs = self.lvalue(lv_node, scope)
                t, name = lhs.type, self.text(lv_node).lstrip(".")
                outer[name] = lhs
            values[name] = self.loop_constant(self.coerce(self.expr(value_node, scope), t, value_node), value_node)
        updates = updates_node.children if updates_node is not None else []
        stmts: list[ir.Stmt] = []
        while True:
            bound = Scope(scope)
            bound.names.update({n: ir.ConstDecl(n, v.type, v, loc=v.loc) for n, v in values.items()})
            cond = self.expr(cond_node, bound) if cond_node is not None else ir.BoolLiteral(BOOL, self.loc(node), True)
            if not isinstance(cond, ir.BoolLiteral):
                raise self.error(cond_node, f"unsupported: for loop condition {self.text(cond_node)} is not known at "
                                            "compile time (BMv2 runs no loops: only loops with a constant trip count unroll)")
            if not cond.value:
                break
            if len(stmts) == MAX_UNROLL:
                raise self.error(node, f"for loop runs more than {MAX_UNROLL} times: too many to unroll")
            self.loops += 1
            body = self.statement(body_node, Scope(bound))
            self.loops -= 1
            body, jump = self.cut_at_jump(body)
            stmts.append(body)
            if jump == "break":
                break
            for u in updates:
                lv_node = u.children[0]
                name = self.text(lv_node).lstrip(".")
                if lv_node.data != "name_ref" or name not in values:
                    raise self.error(lv_node, f"unsupported: for loop update of {self.text(lv_node)}, not a loop variable")
                t = values[name].type
                if u.data == "assignment":
                    value = self.coerce(self.expr(u.children[1], bound), t, u.children[1])
                else:
                    value = self.coerce(self.compound_value(u, bound), t, u.children[2])
                values[name] = self.loop_constant(value, u)
                bound.names[name] = ir.ConstDecl(name, t, values[name], loc=values[name].loc)
        stmts += [ir.Assign(self.loc(node), lhs, values[name]) for name, lhs in outer.items()]
        return ir.Block(self.loc(node), stmts)

    def cut_at_jump(self, s: ir.Stmt) -> tuple[ir.Stmt, str | None]:
        """`s` up to the first break/continue it reaches for sure (conditions on loop variables are
        constants here), and which one; a jump under a run-time condition cannot unroll."""
        if isinstance(s, LoopJump):
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
        if _has_jump(s):
            raise self.error(s.loc, "unsupported: break or continue under a condition not known at compile time "
                                    "(BMv2 runs no loops: only loops with a constant trip count unroll)")
        return s, None

    def loop_constant(self, value: ir.Expr, node) -> ir.Expr:
        if not _is_constant(value):
            raise self.error(node, f"unsupported: for loop variable set from {self.text(node)}, which is not known at "
                                   "compile time (BMv2 runs no loops: only loops with a constant trip count unroll)")
        return value

    def return_stmt(self, node: Tree, scope: Scope) -> ir.Return:
        value_node = node.children[0]
        f = self.ctx.function
        if f is None:
            if value_node is not None:
                raise self.error(node, "return with a value outside a function")
            return ir.Return(self.loc(node))
        rt = f.return_type
        if value_node is None:
            if not isinstance(rt, ir.VoidType):
                raise self.error(node, f"{f.name}: return without a value in a function returning {rt}")
            return ir.Return(self.loc(node))
        if isinstance(rt, ir.VoidType):
            raise self.error(value_node, f"{f.name}: return with a value in a void function")
        value = self.coerce(self.expr(value_node, scope, rt), rt, value_node)
        return ir.Return(self.loc(node), value)

    def switch(self, node: Tree, scope: Scope) -> ir.Switch:
        subject_node, *cases = node.children
        subject = self.expr(subject_node, scope)
        is_action_run = isinstance(subject, ir.ActionRun)
        if not is_action_run and not (is_numeric(subject.type) or isinstance(subject.type, (ir.EnumType, ir.ErrorType))):
            raise self.error(subject_node, f"switch subject {self.text(subject_node)} has type {subject.type}")
        out: list[ir.SwitchCase] = []
        pending: list = []
        seen: list = []
        for i, c in enumerate(cases):
            label_node = c.children[0]
            body_node = c.children[1] if len(c.children) > 1 else None
            if label_node.data == "default_label":
                label = None
                if i != len(cases) - 1:
                    raise self.error(label_node, "default label must be the last switch case")
            elif is_action_run:
                if label_node.data != "name_ref":
                    raise self.error(label_node, "switch on action_run: labels must be action names")
                aname = self.name_of(label_node.children[0])
                ref = next((r for r in subject.table.actions if r.action.name == aname), None)
                if ref is None:
                    raise self.error(label_node, f"{aname}: not an action of table {subject.table.name}")
                label = ref.action
            else:
                label = self.coerce(self.expr(label_node, scope), subject.type, label_node)
                if not _is_constant(label):
                    raise self.error(label_node, "switch labels must be compile-time constants")
            key = label if is_action_run or label is None else _const_key(label)
            if any(k is key or (not is_action_run and k == key and key is not None) for k in seen):
                raise self.error(label_node, f"duplicate switch label {self.text(label_node)}")
            seen.append(key)
            pending.append(label)
            if body_node is not None:
                out.append(ir.SwitchCase(pending, self.block(body_node, scope), self.loc(c)))
                pending = []
        if pending:
            out.append(ir.SwitchCase(pending, None, self.loc(cases[-1])))
        return ir.Switch(self.loc(node), subject, out)

    def lvalue(self, node: Tree, scope: Scope) -> ir.Expr:
        e = self.expr(node, scope)
        self.check_writable(e, node)
        return e

    def check_writable(self, e: ir.Expr, node) -> None:
        root = e
        while isinstance(root, (ir.Member, ir.ArrayIndex, ir.Slice)):
            root = root.expr
        if isinstance(root, ir.DontCare):
            return
        if not isinstance(root, ir.VarRef):
            raise self.error(node, f"{self.text(node)} cannot be assigned to (not an l-value)")
        if isinstance(root.decl, ir.Param) and root.decl.direction in ("in", ""):
            what = "an 'in' parameter" if root.decl.direction == "in" else "a directionless parameter"
            raise self.error(node, f"{self.text(node)}: cannot assign to {what} ({root.decl.name})")
        if isinstance(e, ir.Member) and e.member in ("last", "lastIndex"):
            raise self.error(node, f"{self.text(node)} is read-only")

    # ------------------------------------------------------------------ types

    def resolve_type(self, node: Tree, scope: Scope) -> ir.Type:
        kind = node.data
        simple = {"bool_type": BOOL, "error_type": ERROR, "string_type": STRING, "match_kind_type": MATCH_KIND,
                  "bit1_type": ir.BitsType(1), "infint_type": INFINT, "void_type": VOID, "dontcare_type": ir.DontCareType()}
        if kind in simple:
            return simple[kind]
        if kind in ("bit_type", "int_type", "varbit_type"):
            w = self.width(node.children[0], scope)
            if kind == "int_type" and w < 1:
                raise self.error(node, "int<W> needs W >= 1")
            return {"bit_type": ir.BitsType, "int_type": ir.IntType, "varbit_type": ir.VarbitType}[kind](w)
        if kind == "type_name":
            name = self.name_of(node)
            t = scope.lookup(name)
            if isinstance(t, ir.Type):
                return t
            if isinstance(t, ir.ExternDecl):
                if t.type_params:
                    raise self.error(node, f"{name}: missing type arguments")
                return ir.ExternType(name, (), t)
            if isinstance(t, tuple) and t[0] == "blocktype":
                return ir.ParserOrControlType(name, t[1])
            if isinstance(t, BlockDecl):
                return ir.ParserOrControlType(name, t.kind)
            if isinstance(t, GenericType):
                raise self.error(node, f"{name}: missing type arguments")
            raise self.error(node, f"{name}: no such type")
        if kind == "specialized_type":
            base = self.name_of(node.children[0])
            decl = scope.lookup(base)
            args = tuple(self.resolve_type(t, scope) for t in node.children[1].children)
            if isinstance(decl, ir.ExternDecl):
                if len(args) != len(decl.type_params):
                    raise self.error(node, f"{base}: expected {len(decl.type_params)} type arguments, got {len(args)}")
                return ir.ExternType(base, args, decl)
            if isinstance(decl, tuple) and decl[0] == "blocktype":
                return ir.ParserOrControlType(base, decl[1])
            if isinstance(decl, GenericType):
                return self.specialize(decl, args, node)
            raise self.error(node, f"{base}: no such generic type")
        if kind == "stack_type":
            elem = self.resolve_type(node.children[0], scope)
            size = self.expr(node.children[1], scope)
            if not isinstance(elem, (ir.HeaderType, ir.HeaderUnionType)):
                raise self.error(node, f"header stack element type {elem} is not a header")
            if not isinstance(size, ir.Constant) or size.value <= 0:
                raise self.error(node.children[1], "header stack size must be a positive constant")
            return ir.StackType(elem, size.value)
        if kind == "tuple_type":
            return ir.TupleType(tuple(self.resolve_type(t, scope) for t in node.children[0].children))
        raise self.error(node, f"unsupported: type {self.text(node)}")

    def width(self, node: Tree, scope: Scope) -> int:
        if node.data == "width_lit":
            c = self.int_literal(node)
        else:
            c = self.expr(node.children[0], scope)
        if not isinstance(c, ir.Constant) or c.value < 0 or c.value > 4096:
            raise self.error(node, f"bad width {self.text(node)}")
        return c.value

    # ------------------------------------------------------------------ expressions

    def int_literal(self, node) -> ir.Constant:
        tok = node.children[0] if isinstance(node, Tree) else node
        m = _INT.match(str(tok))
        width, sign, digits = m.group(1), m.group(2), m.group(3).replace("_", "")
        has_prefix = len(digits) > 1 and digits[0] == "0" and digits[1].isalpha()
        base = {"x": 16, "b": 2, "o": 8, "d": 10}.get(digits[1:2].lower(), 10) if has_prefix else 10
        value = int(digits[2:], base) if base != 10 or (len(digits) > 1 and digits[1] in "dD") else int(digits)
        loc = self.loc(tok)
        if width is None:
            return ir.Constant(INFINT, loc, value, base)
        w = int(width)
        t = ir.BitsType(w) if sign == "w" else ir.IntType(w)
        if w == 0 or (sign == "s" and w < 1):
            raise self.error(tok, f"{tok}: invalid width")
        if (sign == "w" and value >= (1 << w)) or (sign == "s" and value >= (1 << w)):
            raise self.error(tok, f"{tok}: value does not fit in {t}")
        return ir.Constant(t, loc, wrap(value, t), base)

    def expr(self, node, scope: Scope, expected: ir.Type | None = None) -> ir.Expr:
        """Type an expression tree. `expected` only guides `{...}` initializers."""
        kind = node.data
        loc = self.loc(node)
        if kind == "int_lit":
            return self.int_literal(node)
        if kind == "true_lit":
            return ir.BoolLiteral(BOOL, loc, True)
        if kind == "false_lit":
            return ir.BoolLiteral(BOOL, loc, False)
        if kind == "string_lit":
            return ir.StringLiteral(STRING, loc, _unquote(node.children[0]))
        if kind == "name_ref":
            return self.name_ref(node, scope)
        if kind == "member":
            return self.member(node, scope)
        if kind == "index":
            base = self.expr(node.children[0], scope)
            if not isinstance(base.type, ir.StackType):
                raise self.error(node, f"{self.text(node.children[0])} has type {base.type}; only header stacks can be indexed")
            idx = self.expr(node.children[1], scope)
            if isinstance(idx, ir.Constant):
                if not 0 <= idx.value < base.type.size:
                    raise self.error(node.children[1], f"index {idx.value} out of bounds of {base.type}")
            elif not is_numeric(idx.type):
                raise self.error(node.children[1], f"stack index must be bit<W> or int<W>, not {idx.type}")
            return ir.ArrayIndex(base.type.element, loc, base, idx)
        if kind == "slice":
            return self.slice(node, scope)
        if kind == "binop":
            return self.binary(node, str(node.children[1]), node.children[0], node.children[2], scope)
        if kind == "shr_op":
            a, b = node.children[1], node.children[2]
            if a.end_pos != b.start_pos:
                raise self.error(b, "syntax error, unexpected '>'")
            return self.binary(node, ">>", node.children[0], node.children[3], scope)
        if kind == "unop":
            return self.unary(node, scope)
        if kind == "mux":
            return self.mux(node, scope)
        if kind == "cast":
            return self.cast(node, scope)
        if kind == "call":
            return self.call(node.children[0], node.children[1], scope, node)
        if kind == "lookahead_call":
            base = self.expr(node.children[0], scope)
            if not (isinstance(base.type, ir.ExternType) and base.type.name == "packet_in"):
                raise self.error(node, "lookahead is a method of packet_in")
            targs = [self.resolve_type(t, scope) for t in node.children[1].children]
            if len(targs) != 1:
                raise self.error(node, "lookahead takes one type argument")
            method = base.type.decl.methods["lookahead"][0]
            return ir.ExternMethodCall(targs[0], loc, base, "lookahead", [], targs, method)
        if kind == "list_expr":
            given = [c for c in node.children if c is not None]
            types = [f.type for f in expected.fields] if isinstance(expected, ir.StructLikeType) else []
            # a nested initializer takes its field's type
            items = [self.expr(c, scope, types[i] if i < len(types) else None) for i, c in enumerate(given)]
            if isinstance(expected, ir.StructLikeType):
                return self.struct_init(node, expected, [(f.name, i) for f, i in zip(expected.fields, items)], len(items))
            return ir.ListExpr(ir.TupleType(tuple(i.type for i in items)), loc, items)
        if kind == "struct_expr":
            if not isinstance(expected, ir.StructLikeType):
                raise self.error(node, "unsupported: struct initializer whose type is not known from context")
            pairs = []
            for kv in node.children:
                fname = self.name_of(kv.children[0])
                f = expected.field(fname)  # a nested initializer takes its field's type
                pairs.append((fname, self.expr(kv.children[1], scope, f.type if f is not None else None)))
            return self.struct_init(node, expected, pairs, len(pairs))
        if kind == "error_member":
            name = self.name_of(node.children[0])
            if name not in self.program.errors:
                raise self.error(node, f"error.{name}: no such error")
            return ir.ErrorMember(ERROR, loc, name)
        if kind == "type_member":
            return self.type_member(node, scope)
        if kind == "dontcare":
            return ir.DontCare(ir.DontCareType(), loc)
        if kind == "ctor_call":
            raise self.error(node, f"unsupported: instantiation {self.text(node)} inside an expression")
        raise self.error(node, f"unsupported: expression {self.text(node)}")

    def struct_init(self, node, t: ir.StructLikeType, pairs: list, count: int) -> ir.StructExpr:
        if count != len(t.fields):
            raise self.error(node, f"{t.name} has {len(t.fields)} fields, initializer has {count}")
        fields: dict[str, ir.Expr] = {}
        for fname, value in pairs:
            f = t.field(fname)
            if f is None:
                raise self.error(node, f"{t.name} has no field {fname}")
            if fname in fields:
                raise self.error(node, f"field {fname} initialized twice")
            fields[fname] = self.coerce(value, f.type, node)
        return ir.StructExpr(t, self.loc(node), {f.name: fields[f.name] for f in t.fields})

    def name_ref(self, node: Tree, scope: Scope) -> ir.Expr:
        tok = node.children[0].children[0] if isinstance(node.children[0], Tree) else node.children[0]
        name = str(tok)
        loc = self.loc(tok)
        decl = scope.lookup(name)
        if decl is None:
            raise self.error(tok, f"{name}: declaration not found")
        if isinstance(decl, (ir.Param, ir.VarDecl)):
            return ir.VarRef(decl.type, loc, name, decl)
        if isinstance(decl, ir.ConstDecl):
            return _relocate(decl.value, loc)
        if isinstance(decl, ir.ExternInstance):
            return ir.InstanceRef(decl.type, loc, name, decl)
        kind = {ir.Action: "action", ir.Table: "table"}.get(type(decl), "declaration")
        raise self.error(tok, f"{name}: {kind} cannot be used as a value")

    def type_member(self, node: Tree, scope: Scope) -> ir.Expr:
        tname = self.name_of(node.children[0])
        member = self.name_of(node.children[1])
        t = scope.lookup(tname)
        if isinstance(t, ir.EnumType):
            if member not in t.members:
                raise self.error(node.children[1], f"{tname}.{member}: no such enum member")
            return ir.EnumMember(t, self.loc(node), member, t.values.get(member))
        if isinstance(t, ir.Type) and member in ("minSizeInBits", "maxSizeInBits"):
            raise self.error(node, f"unsupported: {tname}.{member}")
        raise self.error(node, f"{tname}.{member}: {tname} is not an enum")

    def member(self, node: Tree, scope: Scope) -> ir.Expr:
        base_node, name_node = node.children
        name = self.name_of(name_node)
        loc = self.loc(node)
        base = self.expr(base_node, scope)
        t = base.type
        if isinstance(base, ir.TableApply):
            if name in ("hit", "miss"):
                return ir.TableHitMiss(BOOL, loc, base.table, name)
            if name == "action_run":
                return ir.ActionRun(ir.ActionRunType(base.table.name), loc, base.table)
            raise self.error(name_node, f"apply result has no member {name} (hit, miss, action_run)")
        if isinstance(t, ir.StructLikeType):
            f = t.field(name)
            if f is None:
                raise self.error(name_node, f"{self.text(base_node)}: {t.name} has no field {name}")
            return ir.Member(f.type, loc, base, name)
        if isinstance(t, ir.StackType):
            if name in ("next", "last"):
                if self.ctx.kind != "state":
                    raise self.error(name_node, f"{name} can only be used in a parser")
                return ir.Member(t.element, loc, base, name)
            if name == "lastIndex":
                if self.ctx.kind != "state":
                    raise self.error(node, f"{self.text(node)}: 'lastIndex' for stacks can only be used in a parser")
                return ir.Member(BIT32, loc, base, name)
            if name == "size":
                return ir.Constant(BIT32, loc, t.size)
            raise self.error(name_node, f"header stack has no member {name}")
        raise self.error(name_node, f"{self.text(base_node)} has type {t}, which has no field {name}")

    def slice(self, node: Tree, scope: Scope) -> ir.Expr:
        base = self.expr(node.children[0], scope)
        hi, lo = (self.expr(n, scope) for n in node.children[1:])
        if not is_numeric(base.type):
            raise self.error(node, f"{self.text(node.children[0])}: cannot slice a value of type {base.type}")
        if not (isinstance(hi, ir.Constant) and isinstance(lo, ir.Constant)):
            raise self.error(node, "slice bounds must be compile-time constants")
        if not (0 <= lo.value <= hi.value < base.type.width):
            raise self.error(node, f"slice [{hi.value}:{lo.value}] out of range for {base.type}")
        t = ir.BitsType(hi.value - lo.value + 1)
        if isinstance(base, ir.Slice):  # x[a:b][c:d] is x[b+c:b+d]
            return ir.Slice(t, self.loc(node), base.expr, base.lo + hi.value, base.lo + lo.value)
        if isinstance(base, ir.Constant):
            return ir.Constant(t, self.loc(node), (wrap(base.value, ir.BitsType(base.type.width)) >> lo.value) & ((1 << t.width) - 1))
        return ir.Slice(t, self.loc(node), base, hi.value, lo.value)

    def coerce(self, e: ir.Expr, t: ir.Type, node, stmt=None) -> ir.Expr:
        """Give an untyped literal the type `t`; check that `e` has type `t` otherwise."""
        if isinstance(e.type, ir.InfIntType) and isinstance(e, ir.Constant):
            if is_numeric(t):
                return ir.Constant(t, e.loc, wrap(e.value, t), e.base)
            if isinstance(t, ir.NewType) and is_numeric(t.underlying):  # `T x = 5;` is allowed
                return ir.Constant(t, e.loc, wrap(e.value, t.underlying), e.base)
            if isinstance(t, ir.InfIntType):
                return e
            if isinstance(t, ir.EnumType) and t.underlying is not None:
                raise self.error(node, f"{self.text(node)}: Cannot unify int to {t}")
        if isinstance(t, (ir.TypeVar, ir.DontCareType)) or isinstance(e, ir.DontCare):
            return e
        if isinstance(t, ir.StructLikeType) and isinstance(e, ir.ListExpr):
            return self.struct_init(node, t, [(f.name, i) for f, i in zip(t.fields, e.items)], len(e.items))
        if isinstance(t, ir.InfIntType) and is_numeric(e.type):
            return e
        if not same_type(e.type, t):
            where = self.text(stmt if stmt is not None else node)
            raise self.error(stmt if stmt is not None else node, f"{where}: Cannot unify {e.type} to {t}")
        return e

    def binary(self, node: Tree, op: str, lnode, rnode, scope: Scope) -> ir.Expr:
        loc = self.loc(node)
        left, right = self.expr(lnode, scope), self.expr(rnode, scope)
        what = self.text(node)
        if op in ("&&", "||"):
            for e, n in ((left, lnode), (right, rnode)):
                if not isinstance(e.type, ir.BoolType):
                    raise self.error(n, f"{what}: {op} needs bool operands, {self.text(n)} has type {e.type}")
            if isinstance(left, ir.BoolLiteral) and isinstance(right, ir.BoolLiteral):
                return ir.BoolLiteral(BOOL, loc, (left.value and right.value) if op == "&&" else (left.value or right.value))
            return ir.Binary(BOOL, loc, op, left, right)
        if op in ("<<", ">>"):
            if not (is_numeric(left.type) or isinstance(left.type, ir.InfIntType)):
                raise self.error(lnode, f"{what}: cannot shift a value of type {left.type}")
            if isinstance(right, ir.Constant) and right.value < 0:
                raise self.error(node, f"{what}: Shifts with negative amounts are not permitted")
            if isinstance(right, ir.Constant) and isinstance(right.type, ir.IntType):
                right = ir.Constant(ir.BitsType(right.type.width), right.loc, right.value)
            if not isinstance(right.type, (ir.BitsType, ir.InfIntType)):
                raise self.error(rnode, f"{self.text(rnode)}: Shift amount must be an unsigned number")
            if isinstance(left.type, ir.InfIntType) and not isinstance(right, ir.Constant):
                raise self.error(node, f"{what}: shift of an untyped constant by a non-constant amount; give it a width")
            if isinstance(right.type, ir.InfIntType):
                right = ir.Constant(right.value.bit_length() and ir.BitsType(max(right.value.bit_length(), 1)), right.loc, right.value)
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                return ir.Constant(left.type, loc, fold_binary(op, left.value, right.value, left.type))
            return ir.Binary(left.type, loc, op, left, right)
        if op == "++":
            for e, n in ((left, lnode), (right, rnode)):
                if not is_numeric(e.type):
                    raise self.error(n, f"{what}: concatenation needs bit<W>/int<W> operands, {self.text(n)} has type {e.type}")
            t = type(left.type)(left.type.width + right.type.width)
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                lv = wrap(left.value, ir.BitsType(left.type.width))
                rv = wrap(right.value, ir.BitsType(right.type.width))
                return ir.Constant(t, loc, wrap((lv << right.type.width) | rv, t))
            return ir.Binary(t, loc, op, left, right)
        # the remaining operators need equal operand types; an untyped literal adapts
        if isinstance(left.type, ir.InfIntType) and not isinstance(right.type, ir.InfIntType):
            left = self.coerce_operand(left, right.type, lnode, what)
        elif isinstance(right.type, ir.InfIntType) and not isinstance(left.type, ir.InfIntType):
            right = self.coerce_operand(right, left.type, rnode, what)
        if not same_type(left.type, right.type):
            raise self.error(node, f"{what}: Cannot unify {right.type} to {left.type}")
        t = left.type
        if op in ("==", "!="):
            if isinstance(t, (ir.ExternType, ir.StringType, ir.VoidType)):
                raise self.error(node, f"{what}: cannot compare values of type {t}")
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                return ir.BoolLiteral(BOOL, loc, COMPARE[op](left.value, right.value))
            if isinstance(left, ir.BoolLiteral) and isinstance(right, ir.BoolLiteral):
                return ir.BoolLiteral(BOOL, loc, COMPARE[op](left.value, right.value))
            return ir.Binary(BOOL, loc, op, left, right)
        if not (is_numeric(t) or isinstance(t, ir.InfIntType)):
            raise self.error(node, f"{what}: operator {op} needs bit<W> or int<W> operands, not {t}")
        if op in ("<", "<=", ">", ">="):
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                return ir.BoolLiteral(BOOL, loc, COMPARE[op](left.value, right.value))
            return ir.Binary(BOOL, loc, op, left, right)
        if op in ("/", "%"):  # run-time operands: see passes/strength.py and passes/bmv2_limits.py
            constants = isinstance(left, ir.Constant) and isinstance(right, ir.Constant)
            if isinstance(t, ir.IntType) and not constants:
                raise self.error(node, f"{what}: Cannot operate on signed values")
            if isinstance(right, ir.Constant) and right.value == 0:
                raise self.error(node, f"{what}: Division by zero")
            if constants and (left.value < 0 or right.value < 0):
                raise self.error(node, f"{what}: Division is not defined for negative numbers")
        if isinstance(t, ir.InfIntType) and op in ("|+|", "|-|"):
            raise self.error(node, f"{what}: saturating arithmetic needs a width")
        if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
            return ir.Constant(t, loc, fold_binary(op, left.value, right.value, t))
        return ir.Binary(t, loc, op, left, right)

    def coerce_operand(self, e: ir.Expr, t: ir.Type, node, what: str) -> ir.Expr:
        if is_numeric(t):
            return ir.Constant(t, e.loc, wrap(e.value, t), e.base)
        raise self.error(node, f"{what}: Cannot unify int to {t}")

    def unary(self, node: Tree, scope: Scope) -> ir.Expr:
        op = str(node.children[0])
        e = self.expr(node.children[1], scope)
        loc = self.loc(node)
        what = self.text(node)
        if op == "!":
            if not isinstance(e.type, ir.BoolType):
                raise self.error(node, f"{what}: ! needs a bool operand, not {e.type}")
            return ir.BoolLiteral(BOOL, loc, not e.value) if isinstance(e, ir.BoolLiteral) else ir.Unary(BOOL, loc, "!", e)
        if not (is_numeric(e.type) or isinstance(e.type, ir.InfIntType)):
            raise self.error(node, f"{what}: {op} needs a bit<W> or int<W> operand, not {e.type}")
        if op == "+":
            return e
        if op == "~" and isinstance(e.type, ir.InfIntType):
            raise self.error(node, f"{what}: ~ of an untyped constant; give it a width")
        if isinstance(e, ir.Constant):
            return ir.Constant(e.type, loc, wrap(-e.value if op == "-" else ~e.value, e.type))
        return ir.Unary(e.type, loc, op, e)

    def mux(self, node: Tree, scope: Scope) -> ir.Expr:
        cnode, anode, bnode = node.children
        cond = self.expr(cnode, scope)
        if not isinstance(cond.type, ir.BoolType):
            raise self.error(cnode, f"{self.text(cnode)}: condition of ?: must be bool, not {cond.type}")
        a, b = self.expr(anode, scope), self.expr(bnode, scope)
        if isinstance(a.type, ir.InfIntType) and not isinstance(b.type, ir.InfIntType):
            a = self.coerce(a, b.type, anode)
        elif isinstance(b.type, ir.InfIntType) and not isinstance(a.type, ir.InfIntType):
            b = self.coerce(b, a.type, bnode)
        elif isinstance(a.type, ir.InfIntType) and not isinstance(cond, ir.BoolLiteral):
            raise self.error(node, f"{self.text(node)}: ?: with untyped constants in both branches; give them a width")
        if not same_type(a.type, b.type):
            raise self.error(node, f"{self.text(node)}: Cannot unify {b.type} to {a.type}")
        if isinstance(cond, ir.BoolLiteral):
            return a if cond.value else b
        return ir.Mux(a.type, self.loc(node), cond, a, b)

    def cast(self, node: Tree, scope: Scope) -> ir.Expr:
        t = self.resolve_type(node.children[0], scope)
        e = self.expr(node.children[1], scope, t)  # `(S){ f = 1 }`: the initializer takes the cast's type
        loc = self.loc(node)
        src = e.type
        ok = False
        if isinstance(src, ir.NewType) and not isinstance(t, ir.NewType):
            ok = same_type(src.underlying, t)  # only back to what it is made of
        elif isinstance(t, (ir.BitsType, ir.IntType)):
            ok = (is_numeric(src) or isinstance(src, ir.InfIntType)
                  or (isinstance(src, ir.BoolType) and isinstance(t, ir.BitsType) and t.width == 1)
                  or (isinstance(src, ir.EnumType) and src.underlying is not None))
            if is_numeric(src) and type(src) is not type(t) and src.width != t.width:
                ok = False  # p4c: change sign and width in separate casts
        elif isinstance(t, ir.BoolType):
            ok = isinstance(src, ir.BoolType) or (isinstance(src, ir.BitsType) and src.width == 1) or isinstance(src, ir.InfIntType)
        elif isinstance(t, ir.EnumType) and t.underlying is not None:
            ok = same_type(src, t.underlying) or isinstance(src, ir.InfIntType) or same_type(src, t)
        elif isinstance(t, ir.NewType):
            ok = same_type(src, t.underlying) or same_type(src, t) or (
                isinstance(src, ir.InfIntType) and is_numeric(t.underlying))
        else:
            ok = same_type(src, t)
        if not ok:
            raise self.error(node, f"{self.text(node)}: cannot cast {src} to {t}")
        if isinstance(e, ir.Constant) and isinstance(t, (ir.BitsType, ir.IntType)):
            return ir.Constant(t, loc, wrap(e.value, t), e.base)
        if isinstance(e, ir.Constant) and isinstance(t, ir.NewType) and is_numeric(t.underlying):
            return ir.Constant(t, loc, wrap(e.value, t.underlying), e.base)
        if isinstance(e, ir.Constant) and isinstance(t, ir.BoolType):
            if e.value not in (0, 1):
                raise self.error(node, f"{self.text(node)}: only 0 and 1 can be cast to bool")
            return ir.BoolLiteral(BOOL, loc, bool(e.value))
        if isinstance(e, ir.BoolLiteral) and isinstance(t, ir.BitsType):
            return ir.Constant(t, loc, int(e.value))
        if same_type(src, t):
            return e
        return ir.Cast(t, loc, e)

    # ------------------------------------------------------------------ calls

    def arg_nodes(self, node: Tree) -> list[tuple[str | None, object]]:
        """Arguments as (keyword or None, expression tree)."""
        out = []
        for a in node.children:
            if a is None:
                continue
            if isinstance(a, Tree) and a.data == "named_arg":
                out.append((self.name_of(a.children[0]), a.children[1]))
            else:
                out.append((None, a))
        return out

    def bind_args(self, params: list[ir.Param], args: list, scope: Scope, bindings: dict, node, what: str) -> list[ir.Expr]:
        """Check call arguments against parameters; returns typed args in parameter order."""
        if any(k is not None for k, _ in args):
            if not all(k is not None for k, _ in args):
                raise self.error(node, f"{what}: mix of named and positional arguments")
            by_name = {k: n for k, n in args}
            unknown = set(by_name) - {p.name for p in params}
            if unknown:
                raise self.error(node, f"{what}: no parameter named {sorted(unknown)[0]}")
            missing = [p.name for p in params if p.name not in by_name and p.default is None]
            if missing:
                raise self.error(node, f"{what}: missing argument for parameter {missing[0]}")
            ordered = [(p, by_name.get(p.name)) for p in params]
        else:
            if len(args) > len(params) or len(args) < len([p for p in params if p.default is None]):
                raise self.error(node, f"{what}: expected {len(params)} arguments, got {len(args)}")
            ordered = [(p, args[i][1] if i < len(args) else None) for i, p in enumerate(params)]
        typed = []
        for p, n in ordered:
            if n is None:
                typed.append((p, None, p.default))
                continue
            expected = _subst(p.type, bindings)
            e = self.expr(n, scope, expected if not isinstance(expected, ir.TypeVar) else None)
            typed.append((p, n, e))
            if isinstance(p.type, ir.TypeVar) and p.type.name not in bindings and not isinstance(e.type, ir.InfIntType):
                bindings[p.type.name] = e.type
        out = []
        for p, n, e in typed:
            if n is None:
                out.append(e)
                continue
            t = _subst(p.type, bindings)
            if isinstance(t, ir.TypeVar):
                raise self.error(n, f"{what}: cannot infer the type of {self.text(n)}; give it a width, e.g. (bit<8>){self.text(n)}")
            if p.direction in ("out", "inout"):
                self.check_writable(e, n)
                if isinstance(e, ir.DontCare):
                    out.append(e)
                    continue
                if isinstance(t, ir.DontCareType) or not same_type(e.type, t):
                    raise self.error(n, f"{what}: argument {self.text(n)} of type {e.type} for {p.direction} parameter {p.name}: "
                                        f"Cannot unify {e.type} to {t}")
                out.append(e)
            else:
                out.append(self.coerce(e, t, n))
        return out

    def explicit_bindings(self, type_params: list[str], explicit: list | None, node, what: str) -> dict:
        """Bindings from explicit type arguments `f<T1, T2>(...)`."""
        if explicit is None:
            return {}
        if len(explicit) != len(type_params):
            raise self.error(node, f"{what}: expected {len(type_params)} type arguments, got {len(explicit)}")
        return dict(zip(type_params, explicit))

    def call(self, callee: Tree, args_node: Tree, scope: Scope, node, explicit: list | None = None) -> ir.Expr:
        loc = self.loc(node)
        args = self.arg_nodes(args_node)
        if callee.data == "member":
            base_node, name_node = callee.children
            method = self.name_of(name_node)
            if base_node.data == "name_ref":
                decl = scope.lookup(self.name_of(base_node.children[0]))
                if isinstance(decl, ir.Table):
                    if method != "apply":
                        raise self.error(name_node, f"table {decl.name} has no method {method}")
                    if args:
                        raise self.error(args_node, "apply() takes no arguments")
                    if self.ctx.kind not in ("control",):
                        raise self.error(node, f"table {decl.name} can only be applied in a control's apply block")
                    return ir.TableApply(ir.TableResultType(decl.name), loc, decl)
                if isinstance(decl, (BlockDecl, ir.BlockInstance)):
                    return self.block_apply(decl, name_node, args, scope, node)
            base = self.expr(base_node, scope)
            t = base.type
            if isinstance(t, ir.ExternType):
                overloads = [m for m in t.decl.methods.get(method, [])
                             if len(m.params) >= len(args) >= len([p for p in m.params if p.default is None])]
                if not overloads:
                    if method not in t.decl.methods:
                        raise self.error(name_node, f"{t.name} has no method {method}")
                    raise self.error(node, f"{self.text(callee)}: no overload of {method} takes {len(args)} arguments")
                m = overloads[0]
                bindings = dict(zip(t.decl.type_params, t.type_args))
                for tp in m.type_params:
                    bindings.pop(tp, None)
                bindings.update(self.explicit_bindings(m.type_params, explicit, node, f"{t.name}.{method}"))
                values = self.bind_args(m.params, args, scope, bindings, node, f"{t.name}.{method}")
                ret = _subst(m.return_type, bindings)
                targs = [bindings.get(tp) for tp in m.type_params]
                if method == "extract" and len(values) == 1 and isinstance(values[0], ir.DontCare) and isinstance(targs[0], ir.HeaderType):
                    skip = ir.Constant(BIT32, loc, ir.width_of(targs[0]))  # extract<H>(_): skip an H
                    return ir.ExternMethodCall(VOID, loc, base, "advance", [skip], [], t.decl.methods["advance"][0])
                if method == "extract" and values and not isinstance(values[0].type, ir.HeaderType):
                    raise self.error(node, f"extract needs a header, {self.text(args[0][1])} has type {values[0].type}")
                emittable = (ir.HeaderType, ir.StackType, ir.StructType, ir.HeaderUnionType)
                if method == "emit" and values and not isinstance(values[0].type, emittable):
                    raise self.error(node, f"emit needs a header, stack or struct of headers, not {values[0].type}")
                return ir.ExternMethodCall(ret, loc, base, method, values, targs, m)
            if isinstance(t, (ir.HeaderType, ir.HeaderUnionType)) and method in _HEADER_METHODS:
                if args:
                    raise self.error(args_node, f"{method}() takes no arguments")
                if method != "isValid":
                    self.check_writable(base, base_node)
                return ir.HeaderMethodCall(_HEADER_METHODS[method], loc, base, method, [])
            if isinstance(t, ir.StackType) and method in _STACK_METHODS:
                self.check_writable(base, base_node)
                values = self.bind_args([ir.Param("count", "in", INFINT)], args, scope, {}, node, method)
                if not isinstance(values[0], ir.Constant) or values[0].value < 0:
                    raise self.error(args_node, f"{method}: count must be a non-negative constant")
                return ir.HeaderMethodCall(VOID, loc, base, method, values)
            raise self.error(name_node, f"{self.text(base_node)} of type {t} has no method {method}")
        if callee.data == "name_ref":
            tok = callee.children[0].children[0]
            name = str(tok)
            decl = scope.lookup(name)
            if decl is None:
                raise self.error(tok, f"{name}: declaration not found")
            if isinstance(decl, GenericFunction):
                return self.generic_call(decl, args, scope, node, explicit)
            if explicit is not None and not isinstance(decl, list):
                raise self.error(node, f"{name} takes no type arguments")
            if isinstance(decl, ir.Action):
                if self.ctx.kind not in ("control", "action"):
                    raise self.error(node, f"action {name} cannot be called here")
                values = self.bind_args(decl.params, args, scope, {}, node, f"action {name}")
                return ir.ActionCall(VOID, loc, decl, values)
            if isinstance(decl, ir.Function):
                values = self.bind_args(decl.params, args, scope, {}, node, f"function {name}")
                return ir.FunctionCall(decl.return_type, loc, decl, values)
            if isinstance(decl, list):  # extern function overloads
                overloads = [f for f in decl if len(f.params) >= len(args) >= len([p for p in f.params if p.default is None])]
                if not overloads:
                    raise self.error(node, f"{name}: expected {' or '.join(str(len(f.params)) for f in decl)} arguments, got {len(args)}")
                f = overloads[0]
                if name == "verify" and self.ctx.kind != "state":
                    raise self.error(node, "verify can only be called in a parser")
                bindings = self.explicit_bindings(f.type_params, explicit, node, name)
                values = self.bind_args(f.params, args, scope, bindings, node, name)
                if name == "static_assert":
                    return self.static_assert(values, node)
                return ir.ExternFunctionCall(_subst(f.return_type, bindings), loc, name, values,
                                             [bindings.get(tp) for tp in f.type_params], f)
            raise self.error(tok, f"{name} is not an action or function")
        raise self.error(node, f"unsupported: call of {self.text(callee)}")


    def static_assert(self, values: list[ir.Expr], node) -> ir.BoolLiteral:
        """static_assert(check[, message]): checked now; its value is true."""
        check = values[0]
        if not isinstance(check, ir.BoolLiteral):
            raise self.error(node, f"{self.text(node)}: static_assert needs a compile-time constant condition")
        if not check.value:
            message = values[1].value if len(values) > 1 else "static_assert failed"
            raise self.error(node, f"{self.text(node)}: {message}")
        return check

    def block_apply(self, target, name_node, args: list, scope: Scope, node) -> ir.ApplyCall:
        """`inst.apply(args)`, or `Type.apply(args)`: a direct invocation, which declares an
        implicit instance named after the type (as p4c's InstantiateDirectCalls does)."""
        method = self.name_of(name_node)
        if method != "apply":
            raise self.error(name_node, f"{target.name} has no method {method}")
        if isinstance(target, BlockDecl):
            if target.ctor_params or target.type_params:
                raise self.error(node, f"{target.name} has constructor or type parameters; instantiate it to apply it")
            target = self.instantiate(target, target.name, ir.Annotations(), {}, self.loc(node))
            self.ctx.block.locals.append(target)
        return self.apply_call(target, args, scope, node)

    def apply_call(self, inst: ir.BlockInstance, args: list, scope: Scope, node) -> ir.ApplyCall:
        """`inst.apply(args)`: a control in a control's apply block, a parser in a parser state."""
        is_parser = isinstance(inst.block, ir.Parser)
        if is_parser and self.ctx.kind != "state":
            raise self.error(node, f"parser {inst.name} can only be applied in a parser state")
        if not is_parser and self.ctx.kind != "control":
            raise self.error(node, f"control {inst.name} can only be applied in a control's apply block")
        values = self.bind_args(inst.block.params, args, scope, {}, node, f"{inst.name}.apply")
        return ir.ApplyCall(VOID, self.loc(node), inst, values)


# ---------------------------------------------------------------------- helpers


def _fixed_bits(t: ir.Type) -> bool:
    """A type a header field may have besides varbit: bit/int/bool, a serializable enum, or a
    struct of those."""
    if isinstance(t, ir.StructType):
        return all(_fixed_bits(f.type) for f in t.fields)
    if isinstance(t, ir.NewType):
        return _fixed_bits(t.underlying)
    return is_numeric(t) or isinstance(t, ir.BoolType) or _serializable(t)


def _serializable(t: ir.Type) -> bool:
    return isinstance(t, ir.EnumType) and t.underlying is not None


def _unquote(tok) -> str:
    s = str(tok)[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def _is_constant(e: ir.Expr) -> bool:
    if isinstance(e, (ir.Constant, ir.BoolLiteral, ir.StringLiteral, ir.EnumMember, ir.ErrorMember)):
        return True
    if isinstance(e, ir.StructExpr):
        return all(_is_constant(v) for v in e.fields.values())
    if isinstance(e, ir.ListExpr):
        return all(_is_constant(v) for v in e.items)
    return False


def _const_key(e: ir.Expr):
    return (type(e).__name__, getattr(e, "value", None), getattr(e, "member", None))


def _relocate(e: ir.Expr, loc: ir.Loc) -> ir.Expr:
    """A copy of a folded constant at the place it is used."""
    import copy

    c = copy.copy(e)
    c.loc = loc
    return c


def _subst(t: ir.Type, bindings: dict) -> ir.Type:
    if isinstance(t, ir.TypeVar) and t.name in bindings and bindings[t.name] is not None:
        return bindings[t.name]
    return t


def check(tree: Tree, source: Source) -> ir.Program:
    """Resolve and type-check a parsed program into the IR."""
    return Checker(source).run(tree)
