"""Where values live: header instances, stacks, unions, and the fields of `scalars`."""
from __future__ import annotations

from dataclasses import dataclass, field

from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import EMPTY_FIELD_LIST, SCALARS, STANDARD_METADATA, fail, scalar_type, type_width


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


def scalars_of(s: Store) -> list[Scalar]:
    if isinstance(s, Scalar):
        return [s]
    if isinstance(s, StructStore):
        return [x for f in s.fields.values() for x in scalars_of(f)]
    return []


def headers_of(s: Store) -> list[HeaderStore]:
    if isinstance(s, HeaderStore):
        return [s]
    if isinstance(s, StructStore):
        return [h for f in s.fields.values() for h in headers_of(f)]
    if isinstance(s, StackStore):
        return [h for e in s.elements for h in headers_of(e)]
    if isinstance(s, UnionStore):
        return list(s.members.values())
    return []


def leaves(s: Store) -> list[m.Value]:
    """Every value `==` compares: validity bits and fields, in order."""
    if isinstance(s, Scalar):
        return [s.ref]
    if isinstance(s, HeaderStore):
        out: list[m.Value] = []
        if isinstance(s.ref, m.HeaderRef):
            out.append(m.Field(s.ref.name, "$valid$"))
            out += [m.Field(s.ref.name, f.name) for f in header_leaf_fields(s.type)]
            return out
        raise P4Error("== of a header reached through a run-time index")
    if isinstance(s, StructStore):
        return [x for f in s.fields.values() for x in leaves(f)]
    if isinstance(s, StackStore):
        return [x for e in s.elements for x in leaves(e)]
    if isinstance(s, UnionStore):
        return [x for h in s.members.values() for x in leaves(h)]
    return []


def leaves_no_valid(s: Store) -> list[m.Value]:
    return [v for v in leaves(s) if not (isinstance(v, m.Field) and v.field == "$valid$")]


def header_leaf_fields(t: ir.HeaderType) -> list[ir.Field]:
    """A header's fields with struct-typed ones flattened (at any depth) to `s.f`, `s.t.f`..."""
    return _leaf_fields(t.fields, "")


def _leaf_fields(fields: list[ir.Field], prefix: str) -> list[ir.Field]:
    out = []
    for f in fields:
        if isinstance(f.type, ir.StructType):
            out += _leaf_fields(f.type.fields, f"{prefix}{f.name}.")
        else:
            out.append(ir.Field(prefix + f.name, f.type) if prefix else f)
    return out


class Storage:
    """The program being built and the storage of every parameter and variable."""

    def __init__(self, program: ir.Program):
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
        self.field_lists: dict[int, m.FieldList] = {}  # @field_list index -> list
        self._tmp = 0

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

    def header_type(self, t: ir.HeaderType) -> str:
        name = self._types.get(id(t))
        if name is None:
            fields: list[m.FieldType] = []
            self._flatten_fields(t, "", fields)
            varbit = next((f for f in t.fields if isinstance(f.type, ir.VarbitType)), None)
            max_length = None
            if varbit is not None:
                max_length = sum(type_width(f.type) for f in t.fields) // 8
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
                out.append(m.FieldType(prefix + f.name, type_width(f.type), isinstance(f.type, ir.IntType)))

    def alloc(self, path: str, t: ir.Type, loc: ir.Loc, metadata_header: str | None = None) -> Store:
        """Storage for a value of type `t` named after `path`."""
        if isinstance(t, ir.VarbitType):
            return self.varbit_variable(path, t)
        if scalar_type(t):
            fname = self.unique(f"{SCALARS}.{path}")[len(SCALARS) + 1:]
            self.scalars.fields.append(m.FieldType(fname, type_width(t), isinstance(t, ir.IntType)))
            return Scalar(m.Field(SCALARS, fname), t)
        if isinstance(t, ir.HeaderType):
            name = self.new_header(path, t, metadata=False)
            return self._header_store(name, t)
        if isinstance(t, ir.TupleType):  # a struct field's tuple: stored as a variable's is, fields f0, f1, ...
            t = ir.StructType(str(t), [ir.Field(f"f{i}", e) for i, e in enumerate(t.elements)])
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
        raise fail(f"values of type {t} cannot be stored by the lowering", loc)

    def varbit_variable(self, path: str, t: ir.VarbitType) -> Scalar:
        """A varbit variable as a metadata header of its own, type `$varbitW` with one field, as p4c
        stores it: BMv2 assigns a varbit only into a variable-length field, which `scalars` has none of."""
        tname = f"$varbit{t.max_width}"
        if not any(h.name == tname for h in self.p.header_types):
            self._names.add(tname)
            self.p.header_types.append(m.HeaderType(tname, len(self.p.header_types), [m.FieldType("field", None)],
                                                    (t.max_width + 7) // 8))
        name = self.unique(path.replace(".", "_").replace("[", "_").replace("]", ""))
        self.p.headers.append(m.Header(name, self.next_id("header"), tname, True))
        return Scalar(m.Field(name, "field"), t)

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
            raise fail("the v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)",
                        main.parser.loc)
        hdr = self.alloc("hdr", pp[1].type, pp[1].loc)
        meta = self.alloc("meta", pp[2].type, pp[2].loc)
        sm_type = pp[3].type
        if not isinstance(sm_type, ir.StructType):
            raise fail("standard_metadata must be a struct", pp[3].loc)
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
                        fl.elements += [x.ref for x in scalars_of(sub) if isinstance(x.ref, m.Field)]
            self._field_list_fields(f.type, sub)

    def field_list(self, index: int) -> m.FieldList:
        """The field list of @field_list(index); ids start at 1 (BMv2 takes no 0), the empty list's is 1."""
        fl = self.field_lists.get(index)
        if fl is None:
            name = "empty" if index == EMPTY_FIELD_LIST else f"field_list{index}"
            fl = self.field_lists[index] = m.FieldList(index + 2, name, [])
        return fl
