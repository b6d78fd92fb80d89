"""Types named in the source -> ir.Type: base types, typedefs, generic structs specialized, stacks, tuples;
parameter lists."""
from __future__ import annotations

from lark import Tree

from .. import ir
from ..typing import BOOL, ERROR, INFINT, MATCH_KIND, STRING, VOID, is_numeric
from .annotations import Annotations
from .expressions import Expressions
from .names import BlockDecl, GenericType, Names, Scope


def type_tag(t: ir.Type) -> str:
    """A type argument as p4c spells it in a specialized type's name (`bit<8>` -> `bit8`)."""
    return getattr(t, "name", None) or str(t).replace("<", "").replace(">", "").replace(", ", "_")


def fixed_bits(t: ir.Type) -> bool:
    """A type a header field may have besides varbit: bit/int/bool, a serializable enum, or a
    struct of those."""
    if isinstance(t, ir.StructType):
        return all(fixed_bits(f.type) for f in t.fields)
    if isinstance(t, ir.NewType):
        return fixed_bits(t.underlying)
    return is_numeric(t) or isinstance(t, ir.BoolType) or serializable(t)


def serializable(t: ir.Type) -> bool:
    return isinstance(t, ir.EnumType) and t.underlying is not None


def subst(t: ir.Type, bindings: dict) -> ir.Type:
    if isinstance(t, ir.TypeVar) and t.name in bindings and bindings[t.name] is not None:
        return bindings[t.name]
    return t


class Types:
    """Type trees -> ir.Type, type parameters and parameter lists."""

    def __init__(self, n: Names, e: Expressions, an: Annotations):
        self.n, self.e, self.an = n, e, an

    def resolve_type(self, node: Tree, scope: Scope) -> ir.Type:
        kind = node.data
        simple = {"bool_type": BOOL, "error_type": ERROR, "string_type": STRING, "match_kind_type": MATCH_KIND,
                  "bit1_type": ir.BitsType(1), "infint_type": INFINT, "void_type": VOID, "dontcare_type": ir.DontCareType()}
        if kind in simple:
            return simple[kind]
        if kind in ("bit_type", "int_type", "varbit_type"):
            w = self.width(node.children[0], scope)
            if kind == "int_type" and w < 1:
                raise self.n.error(node, "int<W> needs W >= 1")
            return {"bit_type": ir.BitsType, "int_type": ir.IntType, "varbit_type": ir.VarbitType}[kind](w)
        if kind == "type_name":
            name = self.n.name_of(node)
            t = scope.lookup(name)
            if isinstance(t, ir.Type):
                return t
            if isinstance(t, ir.ExternDecl):
                if t.type_params:
                    raise self.n.error(node, f"{name}: missing type arguments")
                return ir.ExternType(name, (), t)
            if isinstance(t, tuple) and t[0] == "blocktype":
                return ir.ParserOrControlType(name, t[1])
            if isinstance(t, BlockDecl):
                return ir.ParserOrControlType(name, t.kind)
            if isinstance(t, GenericType):
                raise self.n.error(node, f"{name}: missing type arguments")
            raise self.n.error(node, f"{name}: no such type")
        if kind == "specialized_type":
            base = self.n.name_of(node.children[0])
            decl = scope.lookup(base)
            args = tuple(self.resolve_type(t, scope) for t in node.children[1].children)
            if isinstance(decl, ir.ExternDecl):
                if len(args) != len(decl.type_params):
                    raise self.n.error(node, f"{base}: expected {len(decl.type_params)} type arguments, got {len(args)}")
                return ir.ExternType(base, args, decl)
            if isinstance(decl, tuple) and decl[0] == "blocktype":
                return ir.ParserOrControlType(base, decl[1])
            if isinstance(decl, GenericType):
                return self.specialize(decl, args, node)
            raise self.n.error(node, f"{base}: no such generic type")
        if kind == "stack_type":
            elem = self.resolve_type(node.children[0], scope)
            size = self.e.expr(node.children[1], scope)
            if not isinstance(elem, (ir.HeaderType, ir.HeaderUnionType)):
                raise self.n.error(node, f"header stack element type {elem} is not a header")
            if not isinstance(size, ir.Constant) or size.value <= 0:
                raise self.n.error(node.children[1], "header stack size must be a positive constant")
            return ir.StackType(elem, size.value)
        if kind == "tuple_type":
            return ir.TupleType(tuple(self.resolve_type(t, scope) for t in node.children[0].children))
        raise self.n.error(node, f"unsupported: type {self.n.text(node)}")

    def width(self, node: Tree, scope: Scope) -> int:
        c: ir.Expr
        if node.data == "width_lit":
            c = self.e.int_literal(node)
        else:
            c = self.e.expr(node.children[0], scope)
        if not isinstance(c, ir.Constant) or c.value < 0 or c.value > 4096:
            raise self.n.error(node, f"bad width {self.n.text(node)}")
        return c.value

    def specialize(self, g: GenericType, args: tuple[ir.Type, ...], node: Tree) -> ir.Type:
        """`S<T1, ...>`: the generic type's fields with its parameters bound, once per argument list;
        named as p4c names it (`S_bit8`, `Pair_bit8_S_bit8`)."""
        if len(args) != len(g.params):
            raise self.n.error(node, f"{g.name}: expected {len(g.params)} type arguments, got {len(args)}")
        if any(id(a) in g.instances for a in args):
            raise self.n.error(node, f"{g.name}: contains self '{g.name}' as type argument")
        name = "_".join([g.name] + [type_tag(a) for a in args])
        t = self.n.program.types.get(name)
        if t is None:
            ann, name_node, _, *fields = g.node.children
            t = g.cls(name, [], self.an.annotations(ann), self.n.loc(name_node))
            g.instances.add(id(t))
            self.n.program.types[name] = t
            scope = Scope(self.n.top)
            scope.names.update(zip(g.params, args))
            self._fields(t, fields, scope)
        return t

    def _fields(self, t: ir.StructLikeType, fields: list, scope: Scope) -> None:
        name, cls = t.name, type(t)  # the parser refused a field name given twice (grammar.py)
        for f in fields:
            fann, ftype_node, fname_node = f.children
            ftype = self.resolve_type(ftype_node, scope)
            fname = self.n.name_of(fname_node)
            if cls is ir.HeaderType and not (isinstance(ftype, ir.VarbitType) or fixed_bits(ftype)):
                raise self.n.error(ftype_node, f"{fname}: header field type {ftype} is not allowed in a header")
            if cls is ir.HeaderUnionType and not isinstance(ftype, ir.HeaderType):
                raise self.n.error(ftype_node, f"{fname}: header_union fields must be headers")
            t.fields.append(ir.Field(fname, ftype, self.an.annotations(fann), self.n.loc(fname_node)))
        self.n.program.types[name] = t

    def type_params(self, node: Tree | None, scope: Scope) -> tuple[list[str], Scope]:
        """Declare a generic's type parameters in a new scope."""
        inner = Scope(scope)
        names: list[str] = []
        if node is not None:
            for arg in node.children[0].children:
                if not (isinstance(arg, Tree) and arg.data == "type_name"):
                    raise self.n.error(arg, "type parameter must be a simple name")
                n = self.n.name_of(arg)
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
            name = self.n.name_of(name_node)
            if d and isinstance(t, ir.InfIntType):
                raise self.n.error(name_node, f"{name}: parameters with type int must be directionless")
            if any(q.name == name for q in out):
                raise self.n.error(name_node, f"{name}: duplicate parameter")
            dv = self.e.coerce(self.e.expr(default, scope), t, default) if default is not None else None
            out.append(ir.Param(name, d, t, self.an.annotations(ann), self.n.loc(name_node), dv))
        return out
