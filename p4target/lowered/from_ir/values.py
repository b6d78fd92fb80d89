"""Expressions as BMv2 values, with the truncation P4's widths imply made explicit."""
from __future__ import annotations

from dataclasses import dataclass

from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import all_ones, fail, scalar_type, type_width
from p4target.lowered.from_ir.storage import (
    HeaderStore,
    Scalar,
    StackStore,
    Storage,
    Store,
    StructStore,
    UnionStore,
    leaves,
    leaves_no_valid,
)


@dataclass(frozen=True)


class Typed:
    """A computed value with its width, inside flattened extern data."""

    value: m.Value
    width: int


class Values:
    """Reads and l-values; `params`/`bound` say how an action's parameters are reached while lowering it."""

    exiting: Scalar | None = None  # inside an inlined action with out arguments: set by `exit`
    params: dict[int, int] = {}  # id(data Param) -> runtime data index, inside the action being lowered
    bound: dict[int, Store] | None = None  # id(Param) -> storage, inside an inlined action

    def __init__(self, storage: Storage):
        self.s = storage
        self.lookaheads: dict[int, Scalar] = {}  # id(lookahead call) -> the parser's temporary holding it

    def store_of(self, e: ir.Expr) -> Store:
        """The storage an l-value (or a whole header/struct/stack value) names."""
        if isinstance(e, ir.VarRef):
            if e.decl is None:
                raise fail("unresolved variable", e.loc)
            s = self.bound.get(id(e.decl)) if self.bound else None
            if s is not None:
                return s
            return self.s.storage(e.decl, e.loc)
        if isinstance(e, ir.Member):
            assert e.expr is not None
            base = self.store_of(e.expr)
            if isinstance(base, StructStore):
                return base.fields[e.member]
            if isinstance(base, UnionStore):
                return base.members[e.member]
            if isinstance(base, HeaderStore):
                return self.header_field(base, e.member, e.loc)
            if isinstance(base, StackStore):
                if e.member == "next":  # only packet.extract() writes it (Parsers.extract_target), as p4c allows
                    raise fail("next field read: only packet.extract() may use a header stack's next element", e.loc)
                if e.member == "last" and isinstance(base.type.element, ir.HeaderUnionType):
                    return self._union_at(base, m.Expr("last_stack_index", None, m.UnionStackRef(base.name)))
                if e.member == "last":
                    idx = m.Expr("last_stack_index", None, m.StackRef(base.name))
                    return HeaderStore(m.Expr("dereference_header_stack", m.StackRef(base.name), idx),
                                       base.type.element)  # type: ignore[arg-type]
            raise fail(f"cannot take member {e.member} here", e.loc)
        if isinstance(e, ir.ArrayIndex):
            assert e.expr is not None and e.index is not None
            base = self.store_of(e.expr)
            if not isinstance(base, StackStore):
                raise fail("indexing something that is not a header stack", e.loc)
            if isinstance(e.index, ir.Constant):
                if not 0 <= e.index.value < len(base.elements):
                    raise fail(f"index {e.index.value} is out of the stack's bounds", e.loc)
                return base.elements[e.index.value]
            element = base.type.element
            if isinstance(element, ir.HeaderUnionType):
                return self._union_at(base, self.data(e.index))
            assert isinstance(element, ir.HeaderType)  # the checker allows stacks of headers and of unions
            ref = m.Expr("dereference_header_stack", m.StackRef(base.name), self.data(e.index))
            return HeaderStore(ref, element)
        raise fail(f"{type(e).__name__} is not an l-value the lowering handles", e.loc)

    def _union_at(self, stack: StackStore, index: m.Value) -> UnionStore:
        """The union at a run-time `index` of a stack of header unions, each member reached through it."""
        element = stack.type.element
        assert isinstance(element, ir.HeaderUnionType)
        union = m.Expr("dereference_union_stack", m.UnionStackRef(stack.name), index)
        return UnionStore("", element, {f.name: HeaderStore(m.Expr("access_union_header", union, m.Const(k)), f.type)  # type: ignore[arg-type]
                                        for k, f in enumerate(element.fields)})

    def header_field(self, h: HeaderStore, name: str, loc: ir.Loc) -> Store:
        f = h.type.field(name)
        if f is None:
            raise fail(f"header has no field {name}", loc)
        return self._member_of(h, name, f.type)

    def _member_of(self, h: HeaderStore, path: str, t: ir.Type) -> Store:
        """A header's field `path` (`s` or `s.t.f`: struct-typed fields are flattened at any depth)."""
        if isinstance(t, ir.StructType):
            sub = StructStore(t)
            for g in t.fields:
                sub.fields[g.name] = self._member_of(h, f"{path}.{g.name}", g.type)
            return sub
        return self._field_of(h, path, t)

    def _field_of(self, h: HeaderStore, fname: str, t: ir.Type) -> Scalar:
        if isinstance(h.ref, m.HeaderRef):
            return Scalar(m.Field(h.ref.name, fname), t)
        type_name = self.s.header_type(h.type)
        offset = next(i for i, f in enumerate(self.s.p.header_type(type_name).fields) if f.name == fname)
        return Scalar(m.Expr("access_field", h.ref, m.Const(offset)), t)

    def data(self, e: ir.Expr) -> m.Value:
        """`e` as a data value (bools as 0/1)."""
        v, is_bool = self.expr(e)
        return m.Expr("b2d", None, v) if is_bool else v

    def cond(self, e: ir.Expr) -> m.Value:
        """`e` as a boolean."""
        v, is_bool = self.expr(e)
        return v if is_bool else m.Expr("d2b", None, v)

    def expr(self, e: ir.Expr) -> tuple[m.Value, bool]:
        """(value, is it a boolean) of a side-effect-free expression."""
        fn = getattr(self, "x_" + type(e).__name__, None)
        if fn is None:
            raise fail(f"expression {type(e).__name__} is not lowered yet", e.loc)
        return fn(e)

    def _read(self, s: Store, e: ir.Expr) -> tuple[m.Value, bool]:
        if isinstance(s, Scalar):
            if isinstance(s.type, ir.BoolType):
                return m.Expr("d2b", None, s.ref), True
            return s.ref, False
        raise fail("a header, struct or stack used as a value here", e.loc)

    def wrap(self, t: ir.Type, v: m.Value) -> m.Value:
        """Truncate `v` to `t`'s width, as assigning to a field of that type would."""
        if isinstance(t, ir.IntType):
            return m.Expr("two_comp_mod", v, m.Const(t.width))
        if isinstance(t, ir.BitsType):
            return m.Expr("&", v, m.Const(all_ones(t.width)))
        return v

    def equal(self, a: ir.Expr, b: ir.Expr, loc: ir.Loc) -> m.Value:
        """`a == b` of headers, structs, unions or stacks: every validity bit and field equal."""
        pairs = list(zip(self._compared(a), self._compared(b)))
        out: m.Value = m.BoolConst(True)
        for x, y in pairs:
            out = m.Expr("and", out, m.Expr("==", x, y))
        return out

    def _compared(self, e: ir.Expr) -> list[m.Value]:
        """What `equal` compares of an operand: its storage's leaves, or a struct expression's values."""
        if isinstance(e, ir.StructExpr) and isinstance(e.type, ir.StructType):
            return [v for f in e.fields.values() for v in (self._compared(f) if not scalar_type(f.type) else [self.data(f)])]
        return leaves(self.store_of(e))

    def flat(self, e: ir.Expr) -> list[m.Value]:
        """The fields of a list/struct/header argument (hash, digest, checksum data, log_msg), in order."""
        if isinstance(e, (ir.ListExpr, ir.StructExpr)):
            items = e.items if isinstance(e, ir.ListExpr) else list(e.fields.values())
            return [v for item in items for v in self.flat(item)]
        if scalar_type(e.type) or isinstance(e.type, ir.InfIntType):
            v, is_bool = self.expr(e)
            if isinstance(v, m.Field) or (is_bool and isinstance(v, m.Expr) and v.op == "d2b"
                                          and isinstance(v.right, m.Field)):
                return [v.right if isinstance(v, m.Expr) else v]  # type: ignore[list-item]
            return [Typed(self.data(e), type_width(e.type) if not isinstance(e.type, ir.InfIntType) else 0)]  # type: ignore[list-item]
        s = self.store_of(e)
        out: list[m.Value] = []
        for leaf in leaves_no_valid(s):
            out.append(leaf)
        return out

    def calc_inputs(self, e: ir.Expr, loc: ir.Loc) -> list[m.Value]:
        """A calculation's inputs: fields (of any header) and constants with their widths."""
        inputs: list[m.Value] = []
        for v in self.flat(e):
            if isinstance(v, Typed):
                if isinstance(v.value, m.Const):
                    inputs.append(m.Const(v.value.value & all_ones(v.width), v.width))
                    continue
                raise fail("a computed value in hash or checksum data (store it in a variable first)", loc)
            inputs.append(v)
        return inputs

    def x_Constant(self, e: ir.Constant) -> tuple[m.Value, bool]:
        return m.Const(e.value), False

    def x_BoolLiteral(self, e: ir.BoolLiteral) -> tuple[m.Value, bool]:
        return m.BoolConst(e.value), True

    def x_EnumMember(self, e: ir.EnumMember) -> tuple[m.Value, bool]:
        if e.value is not None:
            return m.Const(e.value), False
        t = e.type
        assert isinstance(t, ir.EnumType)
        return m.Const(t.members.index(e.member)), False

    def x_ErrorMember(self, e: ir.ErrorMember) -> tuple[m.Value, bool]:
        return m.Const(self.s.errors[e.member]), False

    def x_VarRef(self, e: ir.VarRef) -> tuple[m.Value, bool]:
        if e.decl is not None and id(e.decl) in self.params:
            v = m.ActionParam(self.params[id(e.decl)])
            return (m.Expr("d2b", None, v), True) if isinstance(e.type, ir.BoolType) else (v, False)
        return self._read(self.store_of(e), e)

    def x_Member(self, e: ir.Member) -> tuple[m.Value, bool]:
        assert e.expr is not None
        if e.member == "lastIndex":
            base = self.store_of(e.expr)
            assert isinstance(base, StackStore)
            return m.Expr("last_stack_index", None, m.StackRef(base.name)), False
        if isinstance(e.expr.type, ir.StackType) and e.member == "size":
            return m.Const(e.expr.type.size), False
        return self._read(self.store_of(e), e)

    def x_ArrayIndex(self, e: ir.ArrayIndex) -> tuple[m.Value, bool]:
        return self._read(self.store_of(e), e)

    def x_Slice(self, e: ir.Slice) -> tuple[m.Value, bool]:
        assert e.expr is not None
        v = self.data(e.expr)
        shifted = m.Expr(">>", v, m.Const(e.lo)) if e.lo else v
        return m.Expr("&", shifted, m.Const(all_ones(e.hi - e.lo + 1))), False

    def x_Unary(self, e: ir.Unary) -> tuple[m.Value, bool]:
        assert e.expr is not None
        if e.op == "!":
            return m.Expr("not", None, self.cond(e.expr)), True
        v = self.data(e.expr)
        if e.op == "-":
            return self.wrap(e.type, m.Expr("-", None, v)), False
        if e.op == "~":
            return self.wrap(e.type, m.Expr("~", None, v)), False
        raise fail(f"unary {e.op}", e.loc)

    def x_Binary(self, e: ir.Binary) -> tuple[m.Value, bool]:
        assert e.left is not None and e.right is not None
        op = e.op
        if op in ("&&", "||"):
            return m.Expr("and" if op == "&&" else "or", self.cond(e.left), self.cond(e.right)), True
        if op in ("==", "!=") and not scalar_type(e.left.type) and not isinstance(e.left.type, ir.InfIntType):
            same = self.equal(e.left, e.right, e.loc)
            return (same if op == "==" else m.Expr("not", None, same)), True
        if op in ("==", "!=") and isinstance(e.left.type, ir.BoolType):
            return m.Expr(op, self.data(e.left), self.data(e.right)), True
        left, right = self.data(e.left), self.data(e.right)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return m.Expr(op, left, right), True
        if op in ("+", "-", "*", "<<"):
            return self.wrap(e.type, m.Expr(op, left, right)), False
        if op in (">>", "&", "|", "^"):
            return m.Expr(op, left, right), False
        if op in ("|+|", "|-|"):
            raw = m.Expr(op[1], left, right)
            kind = "sat_cast" if isinstance(e.type, ir.IntType) else "usat_cast"
            return m.Expr(kind, raw, m.Const(type_width(e.type))), False
        if op == "++":
            wr = type_width(e.right.type)
            joined = m.Expr("|", m.Expr("<<", m.Expr("&", left, m.Const(all_ones(type_width(e.left.type)))), m.Const(wr)),
                            m.Expr("&", right, m.Const(all_ones(wr))))
            return (self.wrap(e.type, joined) if isinstance(e.type, ir.IntType) else joined), False
        raise fail(f"operator {op} is not lowered", e.loc)

    def x_Mux(self, e: ir.Mux) -> tuple[m.Value, bool]:
        assert e.cond is not None and e.then is not None and e.else_ is not None
        if isinstance(e.type, ir.BoolType):
            return m.Expr("?", self.cond(e.then), self.cond(e.else_), self.cond(e.cond)), True
        return m.Expr("?", self.data(e.then), self.data(e.else_), self.cond(e.cond)), False

    def x_Cast(self, e: ir.Cast) -> tuple[m.Value, bool]:
        assert e.expr is not None
        src, dst = e.expr.type, e.type
        if isinstance(dst, ir.BoolType):
            return self.cond(e.expr), True
        v = self.data(e.expr)
        if isinstance(dst, ir.IntType):
            return m.Expr("two_comp_mod", v, m.Const(dst.width)), False
        if isinstance(dst, ir.BitsType):
            if isinstance(src, ir.BitsType) and src.width <= dst.width:
                return v, False
            return m.Expr("&", v, m.Const(all_ones(dst.width))), False
        return v, False

    def x_ExternMethodCall(self, e: ir.ExternMethodCall) -> tuple[m.Value, bool]:
        """Only a lookahead the parser set into a temporary first (Parsers.hoist_lookaheads) is a value."""
        t = self.lookaheads.get(id(e))
        if t is None:
            raise fail(f"{e.method}() is not lowered as a value here", e.loc)
        return self._read(t, e)

    def x_HeaderMethodCall(self, e: ir.HeaderMethodCall) -> tuple[m.Value, bool]:
        assert e.header is not None
        if e.method != "isValid":
            raise fail(f"{e.method}() used as a value", e.loc)
        s = self.store_of(e.header)
        if isinstance(s, UnionStore):
            return m.Expr("valid_union", None, m.UnionRef(s.name)), True
        if isinstance(s, HeaderStore):
            if isinstance(s.ref, m.HeaderRef):
                return m.Expr("d2b", None, m.Field(s.ref.name, "$valid$")), True
            return m.Expr("valid", None, s.ref), True
        raise fail("isValid() of something that is not a header", e.loc)

    def assign_slice(self, out: list[m.Primitive], lhs: ir.Slice, value: m.Value) -> None:
        """`lhs = value` for a slice: the field's other bits kept, the slice's replaced (as p4c writes it)."""
        assert lhs.expr is not None
        dst = self.store_of(lhs.expr)
        assert isinstance(dst, Scalar)
        w = type_width(dst.type)
        field_mask = all_ones(lhs.hi - lhs.lo + 1) << lhs.lo
        kept = m.Expr("&", dst.ref, m.Const(all_ones(w) & ~field_mask))
        new = m.Expr("&", m.Expr("<<", value, m.Const(lhs.lo)), m.Const(field_mask))
        out.append(m.Primitive("assign", [dst.ref, m.Expr("|", kept, new)]))
