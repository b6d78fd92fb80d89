"""Our front end's checked IR lowered into the lowered form, as p4c's BMv2 back end lowers a program.

- Storage: every header becomes a header instance, header stacks and unions keep their
  shape, and every scalar (user metadata fields, locals, action parameters with a direction)
  becomes a field of the `scalars` metadata header.
- Expressions become BMv2 expressions with the truncation P4's widths imply made explicit
  (`& mask` for bit<W>, `two_comp_mod` for int<W>), bools as d2b/b2d where data meets logic.
- Statements in actions become primitive lists; `if` inside them becomes `_jump_if_zero`.
- A control's body becomes a graph: tables, conditionals, and synthesized keyless tables whose
  const default action holds the statements between them (p4c's "tbl_act" tables).
- Parser states become parser ops and transitions; select keys that are not fields are first
  set into scalars. Checksum controls become `checksums` over named calculations.

What this does not lower yet raises `NotLowered` naming the construct and its location.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.interp.schema import digest_name, table_actions
from p4target.lowered import model as m
from p4target.p4info import constant_value, supports_timeout

SCALARS = "scalars"
EMPTY_FIELD_LIST = -1  # the index standing for "no @field_list": an empty list, as p4c makes one
STANDARD_METADATA = "standard_metadata"


class NotLowered(P4Error):
    """A construct this lowering does not handle yet."""


def _fail(message: str, loc: ir.Loc) -> NotLowered:
    return NotLowered(message, loc.file, loc.line, loc.col)


def _mask(width: int) -> int:
    return (1 << width) - 1


# --------------------------------------------------------------------------- storage

@dataclass
class Scalar:
    """A value held in one field: of `scalars`, of a header, or reached through an expression."""

    ref: m.Value  # a Field, or an access_field expression
    type: ir.Type


@dataclass
class HeaderStore:
    ref: m.Value  # HeaderRef, or a dereference expression
    type: ir.HeaderType
    name: str | None = None  # the instance, when static


@dataclass
class StructStore:
    type: ir.StructType
    fields: dict[str, Store] = field(default_factory=dict)


@dataclass
class StackStore:
    name: str
    type: ir.StackType
    elements: list[Store] = field(default_factory=list)


@dataclass
class UnionStore:
    name: str
    type: ir.HeaderUnionType
    members: dict[str, HeaderStore] = field(default_factory=dict)


Store = Scalar | HeaderStore | StructStore | StackStore | UnionStore


def _scalar_type(t: ir.Type) -> bool:
    return isinstance(t, (ir.BitsType, ir.IntType, ir.BoolType, ir.EnumType, ir.ErrorType, ir.VarbitType))


def _width(t: ir.Type) -> int:
    if isinstance(t, ir.ErrorType):
        return 32
    if isinstance(t, ir.EnumType) and t.underlying is None:
        return 32
    return ir.width_of(t)


class _Lowering:
    def __init__(self, program: ir.Program):
        if program.main is None:
            raise P4Error("program has no `V1Switch(...) main;` instantiation", program.source)
        self.ir = program
        self.p = m.Program(program.source)
        self.errors = {name: i for i, name in enumerate(program.errors)}
        self.p.errors = [(name, i) for name, i in self.errors.items()]
        self.scalars = m.HeaderType(SCALARS, 0, [])
        self.p.header_types.append(self.scalars)
        self.p.headers.append(m.Header(SCALARS, 0, SCALARS, True))
        self._types: dict[int, str] = {}  # id(ir.HeaderType) -> header type name
        self._names: set[str] = {SCALARS}
        self.stores: dict[int, Store] = {}  # id(Param/VarDecl) -> storage
        self._ids = {"header": 1, "stack": 0, "union": 0, "union_stack": 0, "action": 0, "table": 0,
                     "cond": 0, "calc": 0, "state": 0, "field_list": 0}
        self.actions: dict[int, m.Action] = {}  # id(ir.Action) -> lowered (table-called actions)
        self.calcs: dict[str, m.Calculation] = {}
        self.field_lists: dict[int, m.FieldList] = {}  # @field_list index -> list
        self.learn_lists: dict[str, m.LearnList] = {}
        self._tmp = 0

    # -- naming and ids

    def next_id(self, kind: str) -> int:
        n = self._ids[kind]
        self._ids[kind] += 1
        return n

    def unique(self, name: str) -> str:
        base, n = name, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    # -- allocation

    def header_type(self, t: ir.HeaderType) -> str:
        name = self._types.get(id(t))
        if name is None:
            fields: list[m.FieldType] = []
            self._flatten_fields(t, "", fields)
            varbit = next((f for f in t.fields if isinstance(f.type, ir.VarbitType)), None)
            max_length = None
            if varbit is not None:
                max_length = sum(_width(f.type) for f in t.fields) // 8
            name = self._types[id(t)] = self.unique(t.name)
            self.p.header_types.append(m.HeaderType(name, len(self.p.header_types), fields, max_length))
        return name

    def _flatten_fields(self, t: ir.StructLikeType, prefix: str, out: list[m.FieldType]) -> None:
        for f in t.fields:
            if isinstance(f.type, ir.StructType):
                self._flatten_fields(f.type, f"{prefix}{f.name}.", out)
            elif isinstance(f.type, ir.VarbitType):
                out.append(m.FieldType(prefix + f.name, None))
            else:
                out.append(m.FieldType(prefix + f.name, _width(f.type), isinstance(f.type, ir.IntType)))

    def alloc(self, path: str, t: ir.Type, loc: ir.Loc, metadata_header: str | None = None) -> Store:
        """Storage for a value of type `t` named after `path`."""
        if _scalar_type(t):
            fname = self.unique(f"{SCALARS}.{path}")[len(SCALARS) + 1:]
            self.scalars.fields.append(m.FieldType(fname, _width(t), isinstance(t, ir.IntType)))
            return Scalar(m.Field(SCALARS, fname), t)
        if isinstance(t, ir.HeaderType):
            name = self.new_header(path, t, metadata=False)
            return self._header_store(name, t)
        if isinstance(t, ir.StructType):
            s = StructStore(t)
            for f in t.fields:
                s.fields[f.name] = self.alloc(f"{path}.{f.name}", f.type, f.loc)
            return s
        if isinstance(t, ir.StackType) and isinstance(t.element, ir.HeaderType):
            name = self.unique(path.replace(".", "_"))
            elements = [self.alloc(f"{path}[{i}]", t.element, loc) for i in range(t.size)]
            ids = [self.p.header(e.name).id for e in elements if isinstance(e, HeaderStore) and e.name]
            self.p.header_stacks.append(m.HeaderStack(name, self.next_id("stack"), self.header_type(t.element), ids))
            return StackStore(name, t, elements)
        if isinstance(t, ir.HeaderUnionType):
            return self.alloc_union(path, t)
        if isinstance(t, ir.StackType) and isinstance(t.element, ir.HeaderUnionType):
            name = self.unique(path.replace(".", "_"))
            unions = [self.alloc_union(f"{path}[{i}]", t.element) for i in range(t.size)]
            utype = self.union_type(t.element)
            self.p.header_union_stacks.append(m.HeaderUnionStack(
                name, self.next_id("union_stack"), utype, [self._union_id(u.name) for u in unions]))
            return StackStore(name, t, list(unions))
        raise _fail(f"values of type {t} cannot be stored by the lowering", loc)

    def new_header(self, path: str, t: ir.HeaderType, metadata: bool) -> str:
        name = self.unique(path.replace(".", "_").replace("[", "_").replace("]", ""))
        self.p.headers.append(m.Header(name, self.next_id("header"), self.header_type(t), metadata))
        return name

    def _header_store(self, name: str, t: ir.HeaderType) -> HeaderStore:
        return HeaderStore(m.HeaderRef(name), t, name)

    def union_type(self, t: ir.HeaderUnionType) -> str:
        for u in self.p.header_union_types:
            if u.name == t.name:
                return u.name
        members = [(f.name, self.header_type(f.type)) for f in t.fields if isinstance(f.type, ir.HeaderType)]
        self.p.header_union_types.append(m.HeaderUnionType(t.name, len(self.p.header_union_types), members))
        return t.name

    def alloc_union(self, path: str, t: ir.HeaderUnionType) -> UnionStore:
        name = self.unique(path.replace(".", "_").replace("[", "_").replace("]", ""))
        u = UnionStore(name, t)
        for f in t.fields:
            assert isinstance(f.type, ir.HeaderType)
            hname = self.new_header(f"{path}.{f.name}", f.type, metadata=False)
            u.members[f.name] = self._header_store(hname, f.type)
        ids = [self.p.header(h.name).id for h in u.members.values() if h.name]
        self.p.header_unions.append(m.HeaderUnion(name, self.next_id("union"), self.union_type(t), ids))
        return u

    def _union_id(self, name: str) -> int:
        return next(u.id for u in self.p.header_unions if u.name == name)

    def storage(self, decl: ir.Param | ir.VarDecl, loc: ir.Loc) -> Store:
        s = self.stores.get(id(decl))
        if s is None:
            s = self.stores[id(decl)] = self.alloc(decl.name, decl.type, loc)
        return s

    def tmp(self, t: ir.Type, loc: ir.Loc) -> Scalar:
        self._tmp += 1
        s = self.alloc(f"tmp{self._tmp}", t, loc)
        assert isinstance(s, Scalar)
        return s

    def setup(self) -> None:
        """The v1model blocks' parameters share one storage, position by position."""
        main = self.ir.main
        assert main is not None
        pp = main.parser.params
        if len(pp) != 4:
            raise _fail("the v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)",
                        main.parser.loc)
        hdr = self.alloc("hdr", pp[1].type, pp[1].loc)
        meta = self.alloc("meta", pp[2].type, pp[2].loc)
        sm_type = pp[3].type
        if not isinstance(sm_type, ir.StructType):
            raise _fail("standard_metadata must be a struct", pp[3].loc)
        fields: list[m.FieldType] = []
        self._flatten_fields(sm_type, "", fields)
        self.p.header_types.append(m.HeaderType(STANDARD_METADATA, len(self.p.header_types), fields))
        self._names.add(STANDARD_METADATA)
        self.p.headers.append(m.Header(STANDARD_METADATA, self.next_id("header"), STANDARD_METADATA, True))
        for f in sm_type.fields:  # the names simple_switch knows them by (queueing_metadata.enq_qdepth, ...)
            alias = f.annotations.get_str("alias")
            if alias is not None:
                self.p.field_aliases[alias] = m.Field(STANDARD_METADATA, f.name)
        sm = StructStore(sm_type, {f.name: Scalar(m.Field(STANDARD_METADATA, f.name), f.type) for f in sm_type.fields})
        roots: list[Store] = [hdr, meta, sm]
        for params, stores in ((main.parser.params[1:], roots), (main.verify_checksum.params, roots[:2]),
                               (main.ingress.params, roots), (main.egress.params, roots),
                               (main.compute_checksum.params, roots[:2]), (main.deparser.params[1:], roots[:1])):
            for p, s in zip(params, stores):
                self.stores[id(p)] = s
        self._field_list_fields(pp[2].type, meta)

    def _field_list_fields(self, t: ir.Type, s: Store) -> None:
        """@field_list(i) user metadata fields (p4c's field lists, by index)."""
        if not isinstance(t, ir.StructType) or not isinstance(s, StructStore):
            return
        for f in t.fields:
            sub = s.fields[f.name]
            a = f.annotations.get("field_list")
            if a is not None:
                for idx in a.args:
                    if isinstance(idx, int):
                        fl = self.field_list(idx)
                        fl.elements += [x.ref for x in _scalars_of(sub) if isinstance(x.ref, m.Field)]
            self._field_list_fields(f.type, sub)

    def field_list(self, index: int) -> m.FieldList:
        """The field list of @field_list(index); ids start at 1 (BMv2 takes no 0), the empty list's is 1."""
        fl = self.field_lists.get(index)
        if fl is None:
            name = "empty" if index == EMPTY_FIELD_LIST else f"field_list{index}"
            fl = self.field_lists[index] = m.FieldList(index + 2, name, [])
        return fl

    # -- expressions

    def store_of(self, e: ir.Expr) -> Store:
        """The storage an l-value (or a whole header/struct/stack value) names."""
        if isinstance(e, ir.VarRef):
            if e.decl is None:
                raise _fail("unresolved variable", e.loc)
            s = self.bound.get(id(e.decl)) if self.bound else None
            if s is not None:
                return s
            return self.storage(e.decl, e.loc)
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
                if e.member == "next":
                    return HeaderStore(m.StackRef(base.name), base.type.element)  # type: ignore[arg-type]
                if e.member == "last" and isinstance(base.type.element, ir.HeaderUnionType):
                    stack = m.UnionStackRef(base.name)
                    union = m.Expr("dereference_union_stack", stack, m.Expr("last_stack_index", None, stack))
                    return UnionStore("", base.type.element, {
                        f.name: HeaderStore(m.Expr("access_union_header", union, m.Const(k)), f.type)  # type: ignore[arg-type]
                        for k, f in enumerate(base.type.element.fields)})
                if e.member == "last":
                    idx = m.Expr("last_stack_index", None, m.StackRef(base.name))
                    return HeaderStore(m.Expr("dereference_header_stack", m.StackRef(base.name), idx),
                                       base.type.element)  # type: ignore[arg-type]
            raise _fail(f"cannot take member {e.member} here", e.loc)
        if isinstance(e, ir.ArrayIndex):
            assert e.expr is not None and e.index is not None
            base = self.store_of(e.expr)
            if not isinstance(base, StackStore):
                raise _fail("indexing something that is not a header stack", e.loc)
            if isinstance(e.index, ir.Constant):
                if not 0 <= e.index.value < len(base.elements):
                    raise _fail(f"index {e.index.value} is out of the stack's bounds", e.loc)
                return base.elements[e.index.value]
            if not isinstance(base.type.element, ir.HeaderType):
                raise _fail("a run-time index into a stack of header unions", e.loc)
            ref = m.Expr("dereference_header_stack", m.StackRef(base.name), self.data(e.index))
            return HeaderStore(ref, base.type.element)
        raise _fail(f"{type(e).__name__} is not an l-value the lowering handles", e.loc)

    def header_field(self, h: HeaderStore, name: str, loc: ir.Loc) -> Store:
        f = h.type.field(name)
        if f is None:
            raise _fail(f"header has no field {name}", loc)
        if isinstance(f.type, ir.StructType):
            sub = StructStore(f.type)
            for g in f.type.fields:
                sub.fields[g.name] = self._field_of(h, f"{name}.{g.name}", g.type)
            return sub
        return self._field_of(h, name, f.type)

    def _field_of(self, h: HeaderStore, fname: str, t: ir.Type) -> Scalar:
        if isinstance(h.ref, m.HeaderRef):
            return Scalar(m.Field(h.ref.name, fname), t)
        type_name = self.header_type(h.type)
        offset = next(i for i, f in enumerate(self.p.header_type(type_name).fields) if f.name == fname)
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
            raise _fail(f"expression {type(e).__name__} is not lowered yet", e.loc)
        return fn(e)

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
        return m.Const(self.errors[e.member]), False

    def _read(self, s: Store, e: ir.Expr) -> tuple[m.Value, bool]:
        if isinstance(s, Scalar):
            if isinstance(s.type, ir.BoolType):
                return m.Expr("d2b", None, s.ref), True
            return s.ref, False
        raise _fail("a header, struct or stack used as a value here", e.loc)

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
        return m.Expr("&", shifted, m.Const(_mask(e.hi - e.lo + 1))), False

    def wrap(self, t: ir.Type, v: m.Value) -> m.Value:
        """Truncate `v` to `t`'s width, as assigning to a field of that type would."""
        if isinstance(t, ir.IntType):
            return m.Expr("two_comp_mod", v, m.Const(t.width))
        if isinstance(t, ir.BitsType):
            return m.Expr("&", v, m.Const(_mask(t.width)))
        return v

    def x_Unary(self, e: ir.Unary) -> tuple[m.Value, bool]:
        assert e.expr is not None
        if e.op == "!":
            return m.Expr("not", None, self.cond(e.expr)), True
        v = self.data(e.expr)
        if e.op == "-":
            return self.wrap(e.type, m.Expr("-", None, v)), False
        if e.op == "~":
            return self.wrap(e.type, m.Expr("~", None, v)), False
        raise _fail(f"unary {e.op}", e.loc)

    def x_Binary(self, e: ir.Binary) -> tuple[m.Value, bool]:
        assert e.left is not None and e.right is not None
        op = e.op
        if op in ("&&", "||"):
            return m.Expr("and" if op == "&&" else "or", self.cond(e.left), self.cond(e.right)), True
        if op in ("==", "!=") and not _scalar_type(e.left.type) and not isinstance(e.left.type, ir.InfIntType):
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
            return m.Expr(kind, raw, m.Const(_width(e.type))), False
        if op == "++":
            wr = _width(e.right.type)
            joined = m.Expr("|", m.Expr("<<", m.Expr("&", left, m.Const(_mask(_width(e.left.type)))), m.Const(wr)),
                            m.Expr("&", right, m.Const(_mask(wr))))
            return (self.wrap(e.type, joined) if isinstance(e.type, ir.IntType) else joined), False
        raise _fail(f"operator {op} is not lowered", e.loc)

    def equal(self, a: ir.Expr, b: ir.Expr, loc: ir.Loc) -> m.Value:
        """`a == b` of headers, structs, unions or stacks: every validity bit and field equal."""
        pairs = list(zip(_leaves(self.store_of(a)), _leaves(self.store_of(b))))
        out: m.Value = m.BoolConst(True)
        for x, y in pairs:
            out = m.Expr("and", out, m.Expr("==", x, y))
        return out

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
            return m.Expr("&", v, m.Const(_mask(dst.width))), False
        return v, False

    def x_HeaderMethodCall(self, e: ir.HeaderMethodCall) -> tuple[m.Value, bool]:
        assert e.header is not None
        if e.method != "isValid":
            raise _fail(f"{e.method}() used as a value", e.loc)
        s = self.store_of(e.header)
        if isinstance(s, UnionStore):
            return m.Expr("valid_union", None, m.UnionRef(s.name)), True
        if isinstance(s, HeaderStore):
            if isinstance(s.ref, m.HeaderRef):
                return m.Expr("d2b", None, m.Field(s.ref.name, "$valid$")), True
            return m.Expr("valid", None, s.ref), True
        raise _fail("isValid() of something that is not a header", e.loc)

    # -- assignments

    def assign(self, out: list[m.Primitive], lhs: ir.Expr, rhs: ir.Expr, loc: ir.Loc) -> None:
        if isinstance(lhs, ir.Slice):
            self.assign_slice(out, lhs, self.data(rhs))
            return
        dst = self.store_of(lhs)
        self.assign_store(out, dst, rhs, loc)

    def assign_store(self, out: list[m.Primitive], dst: Store, rhs: ir.Expr, loc: ir.Loc) -> None:
        if isinstance(dst, Scalar):
            if isinstance(dst.type, ir.VarbitType):
                src = self.store_of(rhs)
                assert isinstance(src, Scalar)
                out.append(m.Primitive("assign_VL", [dst.ref, src.ref]))
                return
            out.append(m.Primitive("assign", [dst.ref, self.data(rhs)]))
            return
        if isinstance(rhs, ir.StructExpr):
            if isinstance(dst, HeaderStore):
                out.append(m.Primitive("add_header", [dst.ref]))
                for name, value in rhs.fields.items():
                    self.assign_store(out, self.header_field(dst, name, loc), value, loc)
                return
            if isinstance(dst, StructStore):
                for name, value in rhs.fields.items():
                    self.assign_store(out, dst.fields[name], value, loc)
                return
        if isinstance(rhs, ir.ExternMethodCall) and rhs.method == "lookahead":
            raise _fail("a header or struct from packet.lookahead()", loc)
        src = self.store_of(rhs)
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
            out.append(m.Primitive("assign_union", [m.UnionRef(dst.name), m.UnionRef(src.name)]))
        elif isinstance(dst, StackStore) and isinstance(src, StackStore):
            if isinstance(dst.type.element, ir.HeaderType):
                out.append(m.Primitive("assign_header_stack", [m.StackRef(dst.name), m.StackRef(src.name)]))
            else:
                raise _fail("assignment of a header union stack", loc)
        else:
            raise _fail("an assignment between values of different shapes", loc)

    def assign_slice(self, out: list[m.Primitive], lhs: ir.Slice, value: m.Value) -> None:
        assert lhs.expr is not None
        dst = self.store_of(lhs.expr)
        assert isinstance(dst, Scalar)
        w = _width(dst.type)
        field_mask = _mask(lhs.hi - lhs.lo + 1) << lhs.lo
        kept = m.Expr("&", dst.ref, m.Const(_mask(w) & ~field_mask))
        new = m.Expr("&", m.Expr("<<", value, m.Const(lhs.lo)), m.Const(field_mask))
        out.append(m.Primitive("assign", [dst.ref, m.Expr("|", kept, new)]))

    # -- statements as primitives (actions, and the simple statements of controls)

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
            out.append(m.Primitive("_jump_if_zero", [m.Expr("b2d", None, self.cond(s.cond)), m.Const(0)]))
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
        elif isinstance(s, ir.Exit) and self.exiting is not None:  # in an inlined action: copy out first
            out.append(m.Primitive("assign", [self.exiting.ref, m.Const(1)]))
            ends.append(len(out))
            out.append(m.Primitive("_jump", [m.Const(-1)]))
        elif isinstance(s, ir.Exit):
            out.append(m.Primitive("exit", []))
        elif isinstance(s, ir.Return):
            ends.append(len(out))
            out.append(m.Primitive("_jump", [m.Const(-1)]))
        elif isinstance(s, ir.VarDeclStmt):
            assert s.decl is not None
            dst = self.storage(s.decl, s.loc)
            if s.decl.init is not None:
                self.assign_store(out, dst, s.decl.init, s.loc)
            else:
                self.reset(out, dst)
        else:
            raise _fail(f"statement {type(s).__name__} is not lowered here", s.loc)

    def switch_prims(self, s: ir.Switch, out: list[m.Primitive], ends: list[int]) -> None:
        """A switch on a value inside an action: a chain of compare-and-jump."""
        assert s.subject is not None
        subject = self.data(s.subject)
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
                        m.Expr("b2d", None, m.Expr("!=", subject, self.data(label))), m.Const(0)]))
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
        for x in _scalars_of(s):
            if not isinstance(x.type, ir.VarbitType):
                out.append(m.Primitive("assign", [x.ref, m.Const(0)]))
        for h in _headers_of(s):
            out.append(m.Primitive("remove_header", [h.ref]))

    def call(self, c: ir.Expr, out: list[m.Primitive], ends: list[int]) -> None:
        if isinstance(c, ir.HeaderMethodCall):
            self.header_method(c, out)
        elif isinstance(c, ir.ExternFunctionCall):
            self.extern_function(c, out)
        elif isinstance(c, ir.ExternMethodCall):
            self.extern_method(c, out)
        elif isinstance(c, ir.ActionCall):
            self.inline_action(c, out)
        else:
            raise _fail(f"{type(c).__name__} inside an action or between tables", c.loc)

    def header_method(self, c: ir.HeaderMethodCall, out: list[m.Primitive]) -> None:
        assert c.header is not None
        s = self.store_of(c.header)
        if c.method in ("setValid", "setInvalid") and isinstance(s, HeaderStore):
            out.append(m.Primitive("add_header" if c.method == "setValid" else "remove_header", [s.ref]))
        elif c.method in ("push_front", "pop_front") and isinstance(s, StackStore):
            out.append(m.Primitive("push" if c.method == "push_front" else "pop",
                                   [m.StackRef(s.name), self.data(c.args[0])]))
        elif c.method == "isValid":
            pass  # a value nobody reads
        else:
            raise _fail(f"{c.method}() here", c.loc)

    def extern_method(self, c: ir.ExternMethodCall, out: list[m.Primitive]) -> None:
        inst = c.target.decl if isinstance(c.target, ir.InstanceRef) else None
        if inst is None:
            raise _fail(f"{c.method}() on something that is not an extern instance", c.loc)
        name, kind, a = inst.control_plane_name, inst.extern, c.args
        if kind == "register" and c.method == "read":
            self.write_via(out, a[0], lambda dst: m.Primitive("register_read", [
                dst, m.Named("register_array", name), self.data(a[1])]))
        elif kind == "register" and c.method == "write":
            out.append(m.Primitive("register_write", [m.Named("register_array", name), self.data(a[0]),
                                                      self.data(a[1])]))
        elif kind == "counter" and c.method == "count":
            out.append(m.Primitive("count", [m.Named("counter_array", name), self.data(a[0])]))
        elif kind == "meter" and c.method == "execute_meter":
            self.write_via(out, a[1], lambda dst: m.Primitive("execute_meter", [
                dst, m.Named("meter_array", name), self.data(a[0])]) if False else m.Primitive(
                "execute_meter", [m.Named("meter_array", name), self.data(a[0]), dst]))
        elif kind in ("direct_counter", "direct_meter"):
            pass  # counted/read by the table on every hit (result_target for a meter's read)
        else:
            raise _fail(f"{kind}.{c.method}() is not lowered", c.loc)

    def write_via(self, out: list[m.Primitive], target: ir.Expr, make) -> None:  # type: ignore[no-untyped-def]
        """A primitive writing `target`: straight into its field, or through a scalar for anything else."""
        if not isinstance(target, ir.Slice):
            s = self.store_of(target)
            if isinstance(s, Scalar) and not isinstance(s.type, ir.BoolType):
                out.append(make(s.ref))
                return
        t = self.tmp(target.type, target.loc)
        out.append(make(t.ref))
        if isinstance(target, ir.Slice):
            self.assign_slice(out, target, t.ref)
        else:
            s = self.store_of(target)
            assert isinstance(s, Scalar)
            out.append(m.Primitive("assign", [s.ref, t.ref]))

    def flat(self, e: ir.Expr) -> list[m.Value]:
        """The fields of a list/struct/header argument (hash, digest, checksum data, log_msg), in order."""
        if isinstance(e, (ir.ListExpr, ir.StructExpr)):
            items = e.items if isinstance(e, ir.ListExpr) else list(e.fields.values())
            return [v for item in items for v in self.flat(item)]
        if _scalar_type(e.type) or isinstance(e.type, ir.InfIntType):
            v, is_bool = self.expr(e)
            if isinstance(v, m.Field) or (is_bool and isinstance(v, m.Expr) and v.op == "d2b"
                                          and isinstance(v.right, m.Field)):
                return [v.right if isinstance(v, m.Expr) else v]  # type: ignore[list-item]
            return [_Typed(self.data(e), _width(e.type) if not isinstance(e.type, ir.InfIntType) else 0)]  # type: ignore[list-item]
        s = self.store_of(e)
        out: list[m.Value] = []
        for leaf in _leaves_no_valid(s):
            out.append(leaf)
        return out

    def calc_inputs(self, e: ir.Expr, loc: ir.Loc) -> list[m.Value]:
        """A calculation's inputs: fields (of any header) and constants with their widths."""
        inputs: list[m.Value] = []
        for v in self.flat(e):
            if isinstance(v, _Typed):
                if isinstance(v.value, m.Const):
                    inputs.append(m.Const(v.value.value & _mask(v.width), v.width))
                    continue
                raise _fail("a computed value in hash or checksum data (store it in a variable first)", loc)
            inputs.append(v)
        return inputs

    def calculation(self, algo: str, inputs: list[m.Value]) -> str:
        name = f"calc_{self.next_id('calc')}"
        self.calcs[name] = m.Calculation(name, len(self.calcs), algo, inputs)
        return name

    def extern_function(self, c: ir.ExternFunctionCall, out: list[m.Primitive]) -> None:
        n, a = c.name, c.args
        if n == "mark_to_drop":
            out.append(m.Primitive("mark_to_drop", [m.HeaderRef(STANDARD_METADATA)]))
        elif n == "hash":
            algo = _algo(a[1])
            calc = self.calculation(algo, self.calc_inputs(a[3], c.loc))
            self.write_via(out, a[0], lambda dst: m.Primitive("modify_field_with_hash_based_offset", [
                dst, self.data(a[2]), m.Named("calculation", calc), self.data(a[4])]))
        elif n == "random":
            self.write_via(out, a[0], lambda dst: m.Primitive("modify_field_rng_uniform", [
                dst, self.data(a[1]), self.data(a[2])]))
        elif n == "digest":
            t = c.type_args[0] if c.type_args else a[1].type
            name = digest_name(t)
            ll = self.learn_lists.get(name)
            if ll is None:
                fields = []
                for v in self.flat(a[1]):
                    if not isinstance(v, m.Field):
                        raise _fail("a digest of values that are not fields", c.loc)
                    fields.append(v)
                ll = self.learn_lists[name] = m.LearnList(len(self.learn_lists) + 1, name, fields)
            out.append(m.Primitive("generate_digest", [self.data(a[0]), m.Const(ll.id)]))
        elif n == "log_msg":
            values = tuple(v.value if isinstance(v, _Typed) else v for v in self.flat(a[1])) if len(a) > 1 else ()
            fmt = a[0].value if isinstance(a[0], ir.StringLiteral) else ""
            out.append(m.Primitive("log_msg", [m.String(fmt), m.ValueList(values)]))
        elif n in ("assert", "assume"):
            out.append(m.Primitive(n, [self.cond(a[0])]))
        elif n == "truncate":
            out.append(m.Primitive("truncate", [self.data(a[0])]))
        elif n in ("clone", "clone3", "clone_preserving_field_list"):
            kind = a[0].member if isinstance(a[0], ir.EnumMember) else None
            if kind not in ("I2E", "E2E"):
                raise _fail("the clone type must be CloneType.I2E or CloneType.E2E", a[0].loc)
            fl = self.field_list_arg(a[2] if n == "clone_preserving_field_list" else None)
            op = "clone_ingress_pkt_to_egress" if kind == "I2E" else "clone_egress_pkt_to_egress"
            out.append(m.Primitive(op, [self.data(a[1]), fl]))
        elif n in ("resubmit", "resubmit_preserving_field_list", "recirculate", "recirculate_preserving_field_list"):
            fl = self.field_list_arg(a[0] if n.endswith("field_list") else None)
            out.append(m.Primitive(n.split("_")[0], [fl]))
        elif n == "verify":
            raise _fail("verify() outside a parser", c.loc)
        else:
            raise _fail(f"extern {n}() is not lowered", c.loc)

    def field_list_arg(self, e: ir.Expr | None) -> m.Const:
        """A field list id: the @field_list index given, or an empty list for none (as p4c makes one)."""
        return m.Const(self.field_list(EMPTY_FIELD_LIST if e is None else constant_value(e)).id)

    def inline_action(self, c: ir.ActionCall, out: list[m.Primitive]) -> None:
        """A control calling an action directly: copy in, the body, copy out (also after `exit`)."""
        a = c.action
        assert a is not None
        saved_params, saved_bound = self.params, self.bound
        self.params, self.bound = {}, dict(self.bound or {})
        copies = []
        for p, arg in zip(a.params, c.args):
            s = self.alloc(f"{a.name}.{p.name}", p.type, p.loc)
            self.bound[id(p)] = s
            if p.direction in ("", "in", "inout"):
                self.assign_store(out, s, arg, c.loc)
            if p.direction in ("out", "inout"):
                copies.append((arg, s))
        saved_exiting = self.exiting
        exiting = self.exiting = self.tmp(ir.BitsType(1), c.loc) if copies and _exits(a.body.stmts) else None
        if exiting is not None:
            out.append(m.Primitive("assign", [exiting.ref, m.Const(0)]))
        body: list[m.Primitive] = []
        ends: list[int] = []
        self.prims(a.body.stmts, body, ends)
        self.exiting = saved_exiting
        base = len(out)
        out += [_relocated(prim, base) for prim in body]
        for i in ends:
            out[base + i] = m.Primitive("_jump", [m.Const(len(out))])
        for arg, s in copies:
            if isinstance(arg, ir.Slice):
                assert isinstance(s, Scalar)
                self.assign_slice(out, arg, s.ref)
            else:
                self.copy(out, self.store_of(arg), s, c.loc)
        if exiting is not None:
            out.append(m.Primitive("_jump_if_zero", [exiting.ref, m.Const(len(out) + 2)]))
            out.append(m.Primitive("exit", []))
        self.params, self.bound = saved_params, saved_bound

    # -- actions called by tables

    exiting: Scalar | None = None  # inside an inlined action with out arguments: set by `exit`
    params: dict[int, int] = {}  # id(data Param) -> runtime data index, inside the action being lowered
    bound: dict[int, Store] | None = None  # id(Param) -> storage, inside an inlined action

    def table_action(self, a: ir.Action) -> m.Action:
        got = self.actions.get(id(a))
        if got is not None:
            return got
        data = a.data_params
        self.params = {id(p): i for i, p in enumerate(data)}
        self.bound = {}
        prims: list[m.Primitive] = []
        ends: list[int] = []
        self.prims(a.body.stmts, prims, ends)
        for i in ends:
            prims[i].parameters[0] = m.Const(len(prims))
        self.params, self.bound = {}, None
        action = m.Action(a.control_plane_name, self.next_id("action"), [(p.name, _width(p.type)) for p in data],
                          prims)
        self.actions[id(a)] = action
        self.p.actions.append(action)
        return action

    def synthesized_action(self, name: str, prims: list[m.Primitive]) -> m.Action:
        action = m.Action(self.unique(name), self.next_id("action"), [], prims)
        self.p.actions.append(action)
        return action

    # -- controls as graphs

    def control(self, name: str, c: ir.Control) -> m.Pipeline:
        self.pl = m.Pipeline(name, len(self.p.pipelines), None, [], [], [])
        self.applied: set[int] = set()
        init: list[m.Primitive] = []
        for d in c.locals:
            if isinstance(d, ir.VarDecl):
                self.reset(init, self.storage(d, d.loc))
        self.pl.init_table = self.block(c.body.stmts, None)
        if init:
            self.pl.init_table = self.act_table(init, self.pl.init_table, c.loc)
        return self.pl

    def block(self, stmts: list[ir.Stmt], nxt: str | None) -> str | None:
        """The node running `stmts` then going to `nxt`."""
        node = nxt
        pending: list[ir.Stmt] = []
        for s in reversed(stmts):
            if isinstance(s, ir.Return):
                node, pending = None, []
                continue
            if _simple(s):
                pending.insert(0, s)
                continue
            if pending:
                node = self.simple_node(pending, node)
                pending = []
            node = self.complex_node(s, node)
        if pending:
            node = self.simple_node(pending, node)
        return node

    def simple_node(self, stmts: list[ir.Stmt], nxt: str | None) -> str | None:
        prims: list[m.Primitive] = []
        ends: list[int] = []
        self.params, self.bound = {}, None
        self.prims(stmts, prims, ends)
        if ends:
            raise _fail("return inside a statement lowered as an action", stmts[0].loc)
        if not prims:
            return nxt
        return self.act_table(prims, nxt, stmts[0].loc)

    def act_table(self, prims: list[m.Primitive], nxt: str | None, loc: ir.Loc) -> str:
        action = self.synthesized_action(f"act{loc.line or ''}", prims)
        name = self.unique(f"tbl_{action.name}")
        self.pl.tables.append(m.Table(
            name, self.next_id("table"), "exact", "simple", 1024, False, False, [], [action.id], [action.name],
            {action.name: nxt}, nxt, m.DefaultEntry(action.id, True, [], True), []))
        return name

    def complex_node(self, s: ir.Stmt, nxt: str | None) -> str | None:
        if isinstance(s, ir.Block):
            return self.block(s.stmts, nxt)
        hoisted = self.hoist_tables(s)
        if hoisted is not None:
            return self.block(hoisted, nxt)
        if isinstance(s, ir.MethodCallStmt):
            c = s.call
            if isinstance(c, ir.TableApply):
                assert c.table is not None
                return self.table(c.table, {}, nxt)
            if isinstance(c, ir.TableHitMiss):
                assert c.table is not None
                return self.table(c.table, {}, nxt)
        if isinstance(s, ir.If):
            assert s.cond is not None
            then = self.block([s.then], nxt) if s.then is not None else nxt
            else_ = self.block([s.else_], nxt) if s.else_ is not None else nxt
            hitmiss = _hit_miss(s.cond)
            if hitmiss is not None:
                table, hit_if_true = hitmiss
                hit, miss = (then, else_) if hit_if_true else (else_, then)
                return self.table(table, {"__HIT__": hit, "__MISS__": miss}, nxt)
            name = self.unique(f"node_{self.next_id('cond')}")
            self.pl.conditionals.append(m.Conditional(name, len(self.pl.conditionals) + 1000 * self.pl.id,
                                                      self.cond(s.cond), then, else_))
            return name
        if isinstance(s, ir.Switch) and isinstance(s.subject, ir.ActionRun):
            applied = s.subject.table
            assert applied is not None
            targets: dict[str, str | None] = {}
            pending: list[str] = []
            default: str | None = nxt  # where actions without a case go (no default case: on)
            for case in s.cases:
                labels = [lab.control_plane_name if isinstance(lab, ir.Action) else None for lab in case.labels]
                if case.body is None:
                    pending += [x for x in labels if x is not None]
                    continue
                node = self.block(case.body.stmts, nxt)
                for lab in pending + labels:
                    if lab is None:
                        default = node
                    else:
                        targets[lab] = node
                pending = []
            return self.table(applied, targets, default)
        raise _fail(f"{type(s).__name__} between tables is not lowered", s.loc)

    def hoist_tables(self, s: ir.Stmt) -> list[ir.Stmt] | None:
        """`s` with the tables its expressions apply moved into statements of their own (None when it has
        none there): `x = a || t.apply().hit` becomes `if (a) tmp = true; else if (t.apply().hit) tmp = true;
        else tmp = false; x = tmp`, keeping P4's short-circuit evaluation."""
        if isinstance(s, ir.If) and s.cond is not None and _has_table(s.cond) and not _is_hit_miss(s.cond):
            pre, cond = self.hoist(s.cond)
            return pre + [ir.If(s.loc, cond=cond, then=s.then or ir.Block(s.loc), else_=s.else_ or ir.Block(s.loc))]
        if isinstance(s, ir.Assign) and s.lhs is not None and s.rhs is not None and _has_table(s.rhs):
            pre, rhs = self.hoist(s.rhs)
            return pre + [ir.Assign(s.loc, lhs=s.lhs, rhs=rhs)]
        if isinstance(s, ir.VarDeclStmt) and s.decl is not None and _has_table(s.decl.init):
            assert s.decl.init is not None
            pre, init = self.hoist(s.decl.init)
            return pre + [ir.Assign(s.loc, ir.VarRef(s.decl.type, s.loc, s.decl.name, s.decl), init)]
        return None

    def hoist(self, e: ir.Expr) -> tuple[list[ir.Stmt], ir.Expr]:
        """(statements, expression) computing `e` where the expression applies no table."""
        if not _has_table(e):
            return [], e
        loc = e.loc
        tmp = ir.VarDecl(f"hoisted{self.next_id('cond')}", e.type)
        ref = ir.VarRef(e.type, loc, tmp.name, tmp)

        def put(value: ir.Expr) -> ir.Stmt:
            return ir.Assign(loc, ref, value)

        def true(flag: bool) -> ir.Expr:
            return ir.BoolLiteral(ir.BoolType(), loc, flag)

        if isinstance(e, ir.TableHitMiss):
            return [ir.If(loc, e, put(true(True)), put(true(False)))], ref
        if isinstance(e, ir.Binary) and e.op in ("&&", "||"):
            assert e.left is not None and e.right is not None
            pre, left = self.hoist(e.left)
            rest, right = self.hoist(e.right)
            evaluate = ir.Block(loc, rest + [put(right)])
            branch = ir.If(loc, left, evaluate, put(true(False))) if e.op == "&&" else \
                ir.If(loc, left, put(true(True)), evaluate)
            return pre + [branch], ref
        if isinstance(e, ir.Mux):
            assert e.cond is not None and e.then is not None and e.else_ is not None
            pre, cond = self.hoist(e.cond)
            then_pre, then = self.hoist(e.then)
            else_pre, else_ = self.hoist(e.else_)
            return pre + [ir.If(loc, cond, ir.Block(loc, then_pre + [put(then)]),
                                ir.Block(loc, else_pre + [put(else_)]))], ref
        pre_all: list[ir.Stmt] = []
        changes = {}
        for name in ("left", "right", "expr"):  # other operators evaluate every operand, left to right
            sub = getattr(e, name, None)
            if isinstance(sub, ir.Expr):
                pre, changes[name] = self.hoist(sub)
                pre_all += pre
        rebuilt = copy.copy(e)
        for name, sub in changes.items():
            setattr(rebuilt, name, sub)
        return pre_all, rebuilt

    def table(self, t: ir.Table, targets: dict[str, str | None], nxt: str | None) -> str:
        """Table `t`'s node: `targets` maps actions (or __HIT__/__MISS__) to next nodes, others go to `nxt`."""
        if id(t) in self.applied:
            raise _fail(f"table {t.name} is applied twice", t.loc)
        self.applied.add(id(t))
        pre: list[m.Primitive] = []
        keys: list[m.KeyElement] = []
        selector_inputs: list[m.Value] = []
        for k in t.keys:
            if k.match_kind == "selector":
                selector_inputs += self.calc_inputs(k.expr, k.loc)
                continue
            keys.append(self.key(k, pre))
        refs = table_actions(self.ir, t)
        actions = [self.table_action(a) for a, _ in refs]
        if "__HIT__" in targets:
            next_tables = dict(targets)
        else:
            next_tables = {a.name: targets.get(a.name, nxt) for a in actions}
        default_entry = None
        if t.default_action is not None:
            da = self.table_action(t.default_action.action)
            data = [constant_value(x) & _mask(w) for x, (_, w) in
                    zip(t.default_action.args[len(t.default_action.args) - len(da.runtime_data):], da.runtime_data)]
            default_entry = m.DefaultEntry(da.id, t.default_action_const, data, t.default_action_const)
        else:
            noaction = next((a for a in actions if a.name == "NoAction"), None)
            if noaction is not None:
                default_entry = m.DefaultEntry(noaction.id, False, [], False)
        entries = [self.const_entry(t, e, keys) for e in t.entries]
        kinds = {k.match_type for k in keys}
        match_type = "range" if "range" in kinds else "ternary" if kinds & {"ternary", "optional"} else (
            "lpm" if "lpm" in kinds else "exact")
        name = t.control_plane_name
        profile = None
        kind = "simple"
        if t.implementation is not None:
            inst = t.implementation
            profile = inst.control_plane_name
            selector = None
            if inst.extern == "action_selector":
                algo = _algo(inst.args[0])
                selector = m.Selector(algo, selector_inputs)
                kind = "indirect_ws"
            else:
                kind = "indirect"
            if all(ap.name != profile for ap in self.pl.action_profiles):
                self.pl.action_profiles.append(m.ActionProfile(profile, len(self.pl.action_profiles),
                                                               inst.size or 0, selector))
        if t.direct_counter is not None:
            self.p.counter_arrays.append(m.CounterArray(t.direct_counter.control_plane_name,
                                                        len(self.p.counter_arrays), 0, True, name))
        direct_meter = None
        if t.direct_meter is not None:
            direct_meter = t.direct_meter.control_plane_name
            target = self.direct_meter_target(t)
            self.p.meter_arrays.append(m.MeterArray(direct_meter, len(self.p.meter_arrays), 0,
                                                    t.direct_meter.kind or "bytes", 2, True, name, target))
        table = m.Table(name, self.next_id("table"), match_type, kind, t.size if t.size is not None else 1024,
                        t.direct_counter is not None, supports_timeout(t), keys, [a.id for a in actions],
                        [a.name for a in actions], next_tables, nxt,
                        default_entry, entries, profile, direct_meter)
        self.pl.tables.append(table)
        return self.act_table(pre, name, t.loc) if pre else name

    def key(self, k: ir.KeyElement, pre: list[m.Primitive]) -> m.KeyElement:
        v = self.data(k.expr)
        if isinstance(v, m.Expr) and v.op == "b2d" and isinstance(v.right, m.Expr) and v.right.op == "d2b" \
                and isinstance(v.right.right, m.Field):
            v = v.right.right  # a bool field or isValid(): its bit
        if isinstance(v, m.Field):
            return m.KeyElement(k.match_kind, v, None, k.name)
        if isinstance(v, m.Expr) and v.op == "&" and isinstance(v.left, m.Field) and isinstance(v.right, m.Const) \
                and not isinstance(k.expr, ir.Slice):
            return m.KeyElement(k.match_kind, v.left, v.right.value, k.name)
        t = self.tmp(ir.BitsType(max(k.width, 1)), k.loc)
        pre.append(m.Primitive("assign", [t.ref, v]))
        assert isinstance(t.ref, m.Field)
        return m.KeyElement(k.match_kind, t.ref, None, k.name)

    def const_entry(self, t: ir.Table, e: ir.TableEntry, keys: list[m.KeyElement]) -> m.TableEntry:
        values = []
        match_keys = [k for k in t.keys if k.match_kind != "selector"]
        for k, lk, ks in zip(match_keys, keys, [ks for k2, ks in zip(t.keys, e.keys) if k2.match_kind != "selector"]):
            w = k.width or 32
            values.append(_match_value(lk.match_type, ks, w))
        action = self.table_action(e.action.action)
        args = e.action.args[len(e.action.args) - len(action.runtime_data):]
        data = [constant_value(x) & _mask(w) for x, (_, w) in zip(args, action.runtime_data)]
        # the lowered form orders priorities as BMv2's JSON does: smaller wins
        return m.TableEntry(values, m.ActionEntry(action.id, data), -(e.priority or 0))

    def direct_meter_target(self, t: ir.Table) -> m.Field | None:
        """Where the table's direct meter color goes: the argument of its `read` in the table's actions."""
        for ref in t.actions:
            for s in _walk_calls(ref.action.body.stmts):
                if isinstance(s, ir.ExternMethodCall) and s.method == "read" and isinstance(s.target, ir.InstanceRef) \
                        and s.target.decl is t.direct_meter:
                    dst = self.store_of(s.args[0])
                    if isinstance(dst, Scalar) and isinstance(dst.ref, m.Field):
                        return dst.ref
        return None

    # -- checksum controls

    def checksums(self, c: ir.Control) -> None:
        for s in _flat_stmts(c.body.stmts):
            if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternFunctionCall):
                call = s.call
                n, a = call.name, call.args
                if n in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                         "update_checksum_with_payload"):
                    inputs = self.calc_inputs(a[1], call.loc)
                    if n.endswith("with_payload"):
                        inputs.append(m.Payload())
                    calc = self.calculation(_algo(a[3]), inputs)
                    target = self.store_of(a[2])
                    assert isinstance(target, Scalar) and isinstance(target.ref, m.Field)
                    verify = n.startswith("verify")
                    self.p.checksums.append(m.Checksum(f"cksum_{len(self.p.checksums)}", len(self.p.checksums),
                                                       target.ref, "generic", calc, verify, not verify,
                                                       self.cond(a[0])))
                    continue
            raise _fail("only verify_checksum/update_checksum calls are lowered in checksum controls", s.loc)

    # -- parser

    def parser(self, p: ir.Parser) -> m.Parser:
        states: list[m.ParseState] = []
        names = {name: name for name in p.states}
        init: list[m.ParserOp] = []
        for d in p.locals:
            if isinstance(d, ir.VarDecl) and d.init is not None:
                prims: list[m.Primitive] = []
                self.assign_store(prims, self.storage(d, d.loc), d.init, d.loc)
                init += [self.as_parser_op(x) for x in prims]
        reject = None
        for name, s in p.states.items():
            ops = list(init) if name == "start" else []
            for stmt in s.body:
                self.parser_stmt(stmt, ops)
            key, transitions = self.transition(s.transition, ops)
            states.append(m.ParseState(names[name], self.next_id("state"), ops, key, transitions))
            if any(t.next_state == "reject" for t in transitions):
                reject = True
        if reject:
            states.append(m.ParseState("reject", self.next_id("state"), [
                m.ParserOp("verify", [m.BoolConst(False), m.Const(self.errors.get("NoError", 0))])], [],
                [m.Transition("default", None, None, None)]))
        return m.Parser("parser", 0, "start", states)

    def as_parser_op(self, prim: m.Primitive) -> m.ParserOp:
        if prim.op == "assign":
            return m.ParserOp("set", prim.parameters)
        return m.ParserOp("primitive", [m.Named("primitive", prim.op)] + prim.parameters)

    def parser_stmt(self, s: ir.Stmt, ops: list[m.ParserOp]) -> None:
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.parser_stmt(x, ops)
            return
        if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternMethodCall) and \
                s.call.target is not None and getattr(s.call.target.type, "name", "") == "packet_in":
            c = s.call
            if c.method == "extract":
                target = self.extract_target(c.args[0])
                if len(c.args) == 2:
                    ops.append(m.ParserOp("extract_VL", [target, self.data(c.args[1])]))
                else:
                    ops.append(m.ParserOp("extract", [target]))
            elif c.method == "advance":
                ops.append(m.ParserOp("advance", [self.data(c.args[0])]))
            elif c.method == "lookahead":  # only its length check matters
                width = ir.width_of(c.type)
                t = self.tmp(ir.BitsType(1), c.loc)
                ops.append(m.ParserOp("set", [t.ref, m.Expr("&", m.Lookahead(0, width), m.Const(0))]))
            else:
                raise _fail(f"packet.{c.method}() in a parser", c.loc)
            return
        if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternFunctionCall) and s.call.name == "verify":
            a = s.call.args
            ops.append(m.ParserOp("verify", [self.cond(a[0]), self.data(a[1])]))
            return
        if isinstance(s, ir.Assign) and isinstance(s.rhs, ir.ExternMethodCall) and s.rhs.method == "lookahead":
            assert s.lhs is not None
            self.lookahead_into(self.store_of(s.lhs), ops, 0)
            return
        if isinstance(s, (ir.If, ir.Switch)):
            raise _fail("an if or switch statement inside a parser state", s.loc)
        prims: list[m.Primitive] = []
        ends: list[int] = []
        self.params, self.bound = {}, None
        self.prim(s, prims, ends)
        ops += [self.as_parser_op(x) for x in prims]

    def lookahead_into(self, dst: Store, ops: list[m.ParserOp], offset: int) -> int:
        """Set `dst` from the bits `offset` past the cursor (a header comes out valid); the bits it took."""
        if isinstance(dst, Scalar):
            width = _width(dst.type)
            ops.append(m.ParserOp("set", [dst.ref, m.Lookahead(offset, width)]))
            return width
        if isinstance(dst, HeaderStore):
            ops.append(self.as_parser_op(m.Primitive("add_header", [dst.ref])))
            used = 0
            for f in _header_leaf_fields(dst.type):
                field = self._field_of(dst, f.name, f.type)
                used += self.lookahead_into(field, ops, offset + used)
            return used
        if isinstance(dst, StructStore):
            used = 0
            for sub in dst.fields.values():
                used += self.lookahead_into(sub, ops, offset + used)
            return used
        raise P4Error("packet.lookahead() into a stack or union")

    def extract_target(self, e: ir.Expr) -> m.Value:
        if isinstance(e, ir.Member) and e.member == "next" and e.expr is not None:
            base = self.store_of(e.expr)
            assert isinstance(base, StackStore)
            return m.StackRef(base.name)
        if isinstance(e, ir.Member) and isinstance(e.expr, ir.Member) and e.expr.member == "next":
            assert e.expr.expr is not None
            base = self.store_of(e.expr.expr)
            assert isinstance(base, StackStore)
            return m.UnionStackField(base.name, e.member, "")
        s = self.store_of(e)
        if isinstance(s, HeaderStore):
            return s.ref
        raise _fail("extract into something that is not a header", e.loc)

    def transition(self, tr: ir.Transition, ops: list[m.ParserOp]) -> tuple[list[m.Value], list[m.Transition]]:
        def target(name: str) -> str | None:
            return None if name == "accept" else name

        if isinstance(tr, ir.DirectTransition):
            return [], [m.Transition("default", None, None, target(tr.next))]
        assert isinstance(tr, ir.SelectTransition)
        keys: list[m.Value] = []
        widths: list[int] = []
        for k in tr.keys:
            w = _width(k.type)
            if isinstance(k, ir.ExternMethodCall) and k.method == "lookahead":
                keys.append(m.Lookahead(0, w))
            else:
                v = self.data(k)
                if not isinstance(v, m.Field):
                    t = self.tmp(ir.BitsType(w), tr.loc)
                    ops.append(m.ParserOp("set", [t.ref, v]))
                    v = t.ref
                keys.append(v)
            widths.append(w)
        transitions = []
        total = sum((w + 7) // 8 * 8 for w in widths)
        for case in tr.cases:
            combos = [(0, 0)]  # (value, mask) of the keys so far; a range key multiplies them
            for ks, w in zip(case.keysets, widths):
                padded = (w + 7) // 8 * 8
                combos = [((v << padded) | kv, (mk << padded) | km) for v, mk in combos for kv, km in _keyset_masks(ks, w)]
            if all(mk == 0 for _, mk in combos):
                transitions.append(m.Transition("default", None, None, target(case.next)))
                break
            for value, mask in combos:
                full = mask == _mask(total)
                transitions.append(m.Transition("hexstr", value, None if full else mask, target(case.next)))
        return keys, transitions

    # -- deparser

    def deparser(self, c: ir.Control) -> m.Deparser:
        order: list[str] = []
        for s in _flat_stmts(c.body.stmts):
            if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternMethodCall) and s.call.method == "emit":
                for h in _headers_of(self.store_of(s.call.args[0])):
                    assert h.name is not None
                    order.append(h.name)
                continue
            raise _fail("only packet.emit() calls are lowered in a deparser", s.loc)
        return m.Deparser("deparser", 0, order)

    # -- the program

    def run(self) -> m.Program:
        self.setup()
        main = self.ir.main
        assert main is not None
        self.p.parsers.append(self.parser(main.parser))
        for ctl in (main.verify_checksum, main.compute_checksum):
            self.checksums(ctl)
        for name, ctl in (("ingress", main.ingress), ("egress", main.egress)):
            self.p.pipelines.append(self.control(name, ctl))
        self.p.deparsers.append(self.deparser(main.deparser))
        for inst in self.ir.all_instances():
            self.instance(inst)
        self.p.calculations = list(self.calcs.values())
        self.p.field_lists = sorted(self.field_lists.values(), key=lambda f: f.id)
        self.p.learn_lists = list(self.learn_lists.values())
        return self.p

    def instance(self, inst: ir.ExternInstance) -> None:
        name = inst.control_plane_name
        if inst.extern == "register":
            self.p.register_arrays.append(m.RegisterArray(name, len(self.p.register_arrays), inst.size or 0,
                                                          _width(inst.type_args[0])))
        elif inst.extern == "counter":
            self.p.counter_arrays.append(m.CounterArray(name, len(self.p.counter_arrays), inst.size or 0, False, None))
        elif inst.extern == "meter":
            self.p.meter_arrays.append(m.MeterArray(name, len(self.p.meter_arrays), inst.size or 0,
                                                    inst.kind or "bytes", 2, False, None, None))


@dataclass(frozen=True)
class _Typed:
    """A computed value with its width, inside flattened extern data."""

    value: m.Value
    width: int


def _algo(e: ir.Expr) -> str:
    if not isinstance(e, ir.EnumMember):
        raise _fail("a run-time hash algorithm (it must be a HashAlgorithm constant)", e.loc)
    return e.member


def _match_value(kind: str, ks: ir.KeySet, w: int) -> m.MatchValue:
    full = _mask(w)
    if isinstance(ks, ir.KsDefault):
        return {"exact": m.MatchValue(kind, key=0), "lpm": m.MatchValue(kind, key=0, prefix_length=0),
                "ternary": m.MatchValue(kind, key=0, mask=0), "optional": m.MatchValue(kind, key=0, mask=0),
                "range": m.MatchValue(kind, start=0, end=full)}.get(kind, m.MatchValue(kind, key=0))
    if isinstance(ks, ir.KsValue):
        v = constant_value(ks.value) & full
        if kind == "lpm":
            return m.MatchValue(kind, key=v, prefix_length=w)
        if kind in ("ternary", "optional"):
            return m.MatchValue(kind, key=v, mask=full)
        if kind == "range":
            return m.MatchValue(kind, start=v, end=v)
        return m.MatchValue(kind, key=v)
    if isinstance(ks, ir.KsMask):
        mask = constant_value(ks.mask) & full
        v = constant_value(ks.value) & mask
        if kind == "lpm":
            return m.MatchValue(kind, key=v, prefix_length=bin(mask).count("1"))
        return m.MatchValue(kind, key=v, mask=mask)
    if isinstance(ks, ir.KsRange):
        return m.MatchValue(kind, start=constant_value(ks.lo) & full, end=constant_value(ks.hi) & full)
    raise P4Error(f"keyset {type(ks).__name__}")


def _keyset_masks(ks: ir.KeySet, w: int) -> list[tuple[int, int]]:
    """A select keyset as (value, mask) pairs; a range as the prefixes covering it, as p4c expands it."""
    if isinstance(ks, ir.KsDefault):
        return [(0, 0)]
    if isinstance(ks, ir.KsValue):
        return [(constant_value(ks.value) & _mask(w), _mask(w))]
    if isinstance(ks, ir.KsMask):
        km = constant_value(ks.mask) & _mask(w)
        return [(constant_value(ks.value) & km, km)]
    assert isinstance(ks, ir.KsRange)
    lo, hi = constant_value(ks.lo) & _mask(w), constant_value(ks.hi) & _mask(w)
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << w
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, _mask(w) & ~(size - 1)))
        lo += size
    return out


def _scalars_of(s: Store) -> list[Scalar]:
    if isinstance(s, Scalar):
        return [s]
    if isinstance(s, StructStore):
        return [x for f in s.fields.values() for x in _scalars_of(f)]
    return []


def _headers_of(s: Store) -> list[HeaderStore]:
    if isinstance(s, HeaderStore):
        return [s]
    if isinstance(s, StructStore):
        return [h for f in s.fields.values() for h in _headers_of(f)]
    if isinstance(s, StackStore):
        return [h for e in s.elements for h in _headers_of(e)]
    if isinstance(s, UnionStore):
        return list(s.members.values())
    return []


def _leaves(s: Store) -> list[m.Value]:
    """Every value `==` compares: validity bits and fields, in order."""
    if isinstance(s, Scalar):
        return [s.ref]
    if isinstance(s, HeaderStore):
        out: list[m.Value] = []
        if isinstance(s.ref, m.HeaderRef):
            out.append(m.Field(s.ref.name, "$valid$"))
            out += [m.Field(s.ref.name, f.name) for f in _header_leaf_fields(s.type)]
            return out
        raise P4Error("== of a header reached through a run-time index")
    if isinstance(s, StructStore):
        return [x for f in s.fields.values() for x in _leaves(f)]
    if isinstance(s, StackStore):
        return [x for e in s.elements for x in _leaves(e)]
    if isinstance(s, UnionStore):
        return [x for h in s.members.values() for x in _leaves(h)]
    return []


def _leaves_no_valid(s: Store) -> list[m.Value]:
    return [v for v in _leaves(s) if not (isinstance(v, m.Field) and v.field == "$valid$")]


def _header_leaf_fields(t: ir.HeaderType) -> list[ir.Field]:
    out = []
    for f in t.fields:
        if isinstance(f.type, ir.StructType):
            out += [ir.Field(f"{f.name}.{g.name}", g.type) for g in f.type.fields]
        else:
            out.append(f)
    return out


def _simple(s: ir.Stmt) -> bool:
    """A statement with no table application or return in it: it can be primitives of one action."""
    if isinstance(s, ir.Return):
        return False
    if isinstance(s, ir.MethodCallStmt):
        return not isinstance(s.call, (ir.TableApply, ir.TableHitMiss))
    if isinstance(s, ir.Assign):
        return not _has_table(s.rhs)
    if isinstance(s, ir.VarDeclStmt):
        return s.decl is None or not _has_table(s.decl.init)
    if isinstance(s, ir.Block):
        return all(_simple(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return not _has_table(s.cond) and all(_simple(x) for x in (s.then, s.else_) if x is not None)
    if isinstance(s, ir.Switch):
        return not isinstance(s.subject, ir.ActionRun) and all(
            case.body is None or _simple(case.body) for case in s.cases)
    return True


def _has_table(e: ir.Expr | None) -> bool:
    if e is None:
        return False
    if isinstance(e, (ir.TableHitMiss, ir.ActionRun, ir.TableApply)):
        return True
    return any(_has_table(getattr(e, name, None)) for name in ("left", "right", "expr", "cond", "then", "else_")
               if isinstance(getattr(e, name, None), ir.Expr))


def _is_hit_miss(e: ir.Expr) -> bool:
    return isinstance(e, ir.TableHitMiss) or (isinstance(e, ir.Unary) and e.op == "!" and e.expr is not None
                                              and _is_hit_miss(e.expr))


def _hit_miss(e: ir.Expr) -> tuple[ir.Table, bool] | None:
    """(table, whether `e` is true on a hit) for `t.apply().hit`, `.miss` and their negations."""
    if isinstance(e, ir.TableHitMiss):
        assert e.table is not None
        return e.table, e.which == "hit"
    if isinstance(e, ir.Unary) and e.op == "!" and e.expr is not None:
        inner = _hit_miss(e.expr)
        return (inner[0], not inner[1]) if inner else None
    if _has_table(e):
        raise _fail("a table application inside a larger condition", e.loc)
    return None


def _flat_stmts(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in stmts:
        out += _flat_stmts(s.stmts) if isinstance(s, ir.Block) else [s]
    return out


def _walk_calls(stmts: list[ir.Stmt]) -> list[ir.Expr]:
    out: list[ir.Expr] = []
    for s in stmts:
        if isinstance(s, ir.Block):
            out += _walk_calls(s.stmts)
        elif isinstance(s, ir.MethodCallStmt) and s.call is not None:
            out.append(s.call)
        elif isinstance(s, ir.If):
            out += _walk_calls([x for x in (s.then, s.else_) if x is not None])
    return out


def _exits(stmts: list[ir.Stmt]) -> bool:
    """Whether an `exit` is among these statements (at any depth)."""
    for s in stmts:
        if isinstance(s, ir.Exit):
            return True
        inner = [x for x in (getattr(s, "then", None), getattr(s, "else_", None)) if x is not None]
        inner += getattr(s, "stmts", [])
        inner += [c.body for c in getattr(s, "cases", []) if c.body is not None]
        if inner and _exits(inner):
            return True
    return False


def _relocated(prim: m.Primitive, base: int) -> m.Primitive:
    """A primitive moved `base` places down its action: its jump targets move with it."""
    if prim.op == "_jump" and isinstance(prim.parameters[0], m.Const) and prim.parameters[0].value >= 0:
        return m.Primitive("_jump", [m.Const(prim.parameters[0].value + base)])
    if prim.op == "_jump_if_zero" and isinstance(prim.parameters[1], m.Const):
        return m.Primitive("_jump_if_zero", [prim.parameters[0], m.Const(prim.parameters[1].value + base)])
    return prim


def lower_program(program: ir.Program) -> m.Program:
    """Our front end's checked, lowered IR as the lowered form (NotLowered for what it cannot lower yet)."""
    return _Lowering(program).run()
