"""What every back end of the lowered form shares: where each value of a packet lives.

A packet is one array `F` of slots: per header instance a validity slot, then its fields in
order, then (for a header with a variable-length field) that field's length in bits; then per
header stack (and header union stack) its next index; then the per-packet bookkeeping slots
the v1model flow needs (`HIDDEN`). The Python back end holds an unbounded int per field; the C
back end holds u64 bit patterns, a field wider than 64 bits in one slot per 64-bit chunk (least
significant first): `Layout(program, chunk_bits=64)`.
"""
from __future__ import annotations

from p4target.errors import P4Error
from p4target.lowered import model as m

HIDDEN = ("clone_session", "clone_type", "clone_fl", "resubmit", "recirculate", "truncate", "payload", "exit")


class Unsupported(P4Error):
    """A construct of the lowered form a back end does not run."""


class Layout:
    """Slots of every header instance, stack and bookkeeping value (see the module docstring)."""

    def __init__(self, p: m.Program, chunk_bits: int | None = None):
        self.p = p
        self.types = {t.name: t for t in p.header_types}
        self.type_of = {h.name: self.types[h.header_type] for h in p.headers}
        # each field's index by name: compiling looks one up per access (a scan over 364 lanes was its main cost)
        self.field_at = {t.name: {f.name: k for k, f in enumerate(t.fields)} for t in p.header_types}
        self.chunk_bits = chunk_bits
        # per header type: each field's slot offset from the header's base, then the varbit length's offset
        self.offsets: dict[str, list[int]] = {}
        for t in p.header_types:
            at, offsets = 1, []
            for f in t.fields:
                offsets.append(at)
                at += self.chunks(t, f)
            self.offsets[t.name] = offsets + [at]
        self.base: dict[str, int] = {}
        self.size: dict[str, int] = {}  # slots a header takes
        self.initial: list = []
        ordered = ([h for h in p.headers if not h.metadata] + [h for h in p.headers if h.name == "standard_metadata"]
                   + [h for h in p.headers if h.metadata and h.name != "standard_metadata"])
        self.meta_range = (0, 0)
        for h in ordered:
            if h.metadata and h.name != "standard_metadata" and self.meta_range == (0, 0):
                self.meta_range = (len(self.initial), 0)
            t = self.types[h.header_type]
            self.base[h.name] = len(self.initial)
            self.size[h.name] = self.slots(t)
            self.initial += [h.metadata] + [0] * (self.slots(t) - 1)
        self.meta_range = (self.meta_range[0] or len(self.initial), len(self.initial))
        by_id = {h.id: h.name for h in p.headers}
        self.stacks = {s.name: [by_id[i] for i in s.header_ids] for s in p.header_stacks}
        self.stack_type = {s.name: s.header_type for s in p.header_stacks}
        self.next_index = {}
        self.scratch: dict[str, int] = {}  # per stack: a header taking accesses past its end (P4: undefined)
        for s in p.header_stacks:
            self.next_index[s.name] = len(self.initial)
            self.initial.append(0)
            self.scratch[s.name] = len(self.initial)
            self.initial += [False] + [0] * (self.slots(self.types[s.header_type]) - 1)
        union_types = {u.name: u for u in p.header_union_types}
        self.unions = {u.name: [by_id[i] for i in u.header_ids] for u in p.header_unions}
        self.union_type = {u.name: union_types[u.union_type] for u in p.header_unions}
        union_by_id = {u.id: u.name for u in p.header_unions}
        self.union_stacks = {us.name: [union_by_id[i] for i in us.header_union_ids] for us in p.header_union_stacks}
        self.union_stack_type = {us.name: union_types[us.union_type] for us in p.header_union_stacks}
        for us in p.header_union_stacks:
            self.next_index[us.name] = len(self.initial)
            self.initial.append(0)
        self.member_of = {h: u for u, hs in self.unions.items() for h in hs}
        self.hidden = {}
        for name in HIDDEN:
            self.hidden[name] = len(self.initial)
            self.initial.append(None if name != "payload" else b"")
        sm = self.base.get("standard_metadata")
        if sm is None:
            raise P4Error("the program has no standard_metadata header (not a v1model program?)", p.source)
        self.sm = {f.name: sm + off for f, off in zip(self.types["standard_metadata"].fields,
                                                      self.offsets["standard_metadata"])}

    def header_type(self, name: str) -> m.HeaderType:
        return self.type_of[name]

    def field_slot(self, f: m.Field) -> tuple[int, m.FieldType | None]:
        """(slot, type) of a field; type None for `$valid$` (the validity slot)."""
        b = self.base[f.header]
        if f.field == "$valid$":
            return b, None
        t = self.type_of[f.header]
        k = self.field_at[t.name][f.field]
        return b + self.offsets[t.name][k], t.fields[k]

    def header_type_of(self, v: m.Value | None) -> m.HeaderType:
        """The type of the header a HeaderRef, stack element or union member names."""
        if isinstance(v, m.HeaderRef):
            return self.header_type(v.name)
        if isinstance(v, m.Expr) and v.op == "dereference_header_stack" and isinstance(v.left, m.StackRef):
            return self.types[self.stack_type[v.left.name]]
        if isinstance(v, m.Expr) and v.op == "access_union_header" and isinstance(v.right, m.Const):
            ut = (self.union_type[v.left.name] if isinstance(v.left, m.UnionRef)
                  else self.union_stack_type[v.left.left.name])  # type: ignore[union-attr]
            return self.types[ut.headers[v.right.value][1]]
        raise Unsupported(f"{type(v).__name__} does not name a header here", self.p.source)

    def field_index(self, type_name: str, field: str) -> tuple[int, m.FieldType]:
        """(index, type) of a field of header type `type_name`."""
        t = self.types[type_name]
        k = self.field_at[type_name].get(field)
        if k is None:
            raise Unsupported(f"header type {type_name} has no field {field}", self.p.source)
        return k, t.fields[k]

    def slots(self, t: m.HeaderType) -> int:
        """Slots a header of type `t` takes: validity, fields, varbit length."""
        return self.offsets[t.name][-1] + int(t.max_length is not None)

    @staticmethod
    def field_bits(t: m.HeaderType, f: m.FieldType) -> int:
        """A field's width, or the most bits of header type `t`'s variable-length field."""
        return f.width if f.width is not None else (t.max_length or 0) * 8 - sum(x.width or 0 for x in t.fields)

    def chunks(self, t: m.HeaderType, f: m.FieldType) -> int:
        """Slots field `f` of header type `t` takes."""
        return 1 if self.chunk_bits is None else max(1, -(-self.field_bits(t, f) // self.chunk_bits))

    def width(self, f: m.Field) -> int:
        """A field's width in bits (`$valid$` is 1, a varbit 0)."""
        _, ftype = self.field_slot(f)
        return 1 if ftype is None else (ftype.width or 0)

    def key_part_width(self, v: m.Value) -> int:
        """Bits of one part of a parser transition key."""
        if isinstance(v, m.Field):
            return self.width(v)
        if isinstance(v, m.Lookahead):
            return v.width
        if isinstance(v, m.StackField):
            return self.field_index(self.stack_type[v.stack], v.field)[1].width or 0
        raise Unsupported(f"a parser transition key cannot be a {type(v).__name__}", self.p.source)
