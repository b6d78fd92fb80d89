"""Flat storage layout of one packet's data: every P4 value gets a fixed slot in a list.

P4 has no recursion, so every header field, metadata field, local variable and action
parameter can live at a static index of ONE Python list per packet (the "frame").
Copying a packet (clone, multicast) is a list copy; generated code reads `F[17]`.

Layouts:
- a scalar (bit/int/bool/enum/error) is an `int` slot;
- a wide `bit<W>` (W > WIDE_BITS) is `WideLayout`: ceil(W/32) slots of 32-bit chunks, most
  significant first (as on the wire). Lanes packed into one wide header field are then
  read and written as small ints, one slot each, instead of shifting and masking a
  W-bit int per access; a whole-value use joins the chunks;
- a varbit<W> is `VarbitLayout`: a slot for its value and one for its current length in bits;
- a header is `HeaderLayout`: a validity slot followed by its field slots;
- a struct/header union is `StructLayout` (fields in order);
- a stack is `StackLayout`: a next-index slot and `size` elements laid out contiguously
  with a constant stride, so element i's slot is element 0's slot + i * stride.
A layout covers the half-open slot range [first, end), so struct copy is a list slice.

A scalar variable declared inside a block (an action's or an apply block's temporaries)
is only ever used by the one generated function that holds that block, so it is a
`Local`: a Python local variable of that function rather than a slot.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from p4target.errors import P4Error
from p4target.frontend import ir


@dataclass
class HeaderLayout:
    type: ir.HeaderType
    valid: int
    fields: dict[str, int | WideLayout]  # field name -> slot (chunks for a wide field)
    first: int
    end: int


class Local(str):
    """Storage of a block-local scalar variable: the name of a Python local variable."""


WIDE_BITS = 128  # bit<W> wider than this is stored in chunks (bit<128> IPv6 addresses stay one int)
CHUNK_BITS = 32


@dataclass
class WideLayout:
    """bit<width> in `end - first` chunk slots; the chunk in slot `end - 1 - j` holds bits
    [32j, 32j + 31] (so only the first, most significant chunk may be narrower)."""

    width: int
    first: int
    end: int

    @property
    def chunks(self) -> int:
        return self.end - self.first

    def chunk_slot(self, bit: int) -> int:
        """The slot of the chunk holding bit number `bit` (0 = least significant)."""
        return self.end - 1 - bit // CHUNK_BITS


@dataclass
class VarbitLayout:
    """varbit<max_width>: the value in slot `first`, its length in bits in slot `first + 1`."""

    max_width: int
    first: int
    end: int

    @property
    def length(self) -> int:
        return self.first + 1


@dataclass
class StructLayout:
    type: ir.StructLikeType
    fields: dict[str, Layout]
    first: int
    end: int


@dataclass
class StackLayout:
    type: ir.StackType
    next_index: int
    elements: list[HeaderLayout]
    stride: int
    first: int
    end: int


Layout = int | Local | WideLayout | VarbitLayout | HeaderLayout | StructLayout | StackLayout


def span(layout: Layout) -> tuple[int, int]:
    """[first, end) slot range of any layout."""
    if isinstance(layout, int):
        return layout, layout + 1
    return layout.first, layout.end


@dataclass
class Frame:
    """Allocator of slots; `initial` is the template list every packet starts from."""

    initial: list = field(default_factory=list)
    wide_bits: int = WIDE_BITS  # bit<W> wider than this gets 32-bit chunks (the native engine uses 64)

    def slot(self, value: object = 0) -> int:
        self.initial.append(value)
        return len(self.initial) - 1

    def alloc(self, t: ir.Type, loc: ir.Loc = ir.NOWHERE) -> Layout:
        """Allocate storage for a value of type `t`; everything starts as 0/False/invalid."""
        if isinstance(t, ir.HeaderType):
            first = self.slot(False)
            fields = {}
            for f in t.fields:
                if isinstance(f.type, (ir.VarbitType, ir.StructType)) or isinstance(f.type, ir.BitsType) and f.type.width > self.wide_bits:
                    fields[f.name] = self.alloc(f.type, f.loc)
                else:
                    fields[f.name] = self.slot(False if isinstance(f.type, ir.BoolType) else 0)
            return HeaderLayout(t, first, fields, first, len(self.initial))
        if isinstance(t, (ir.StructType, ir.HeaderUnionType)):
            first = len(self.initial)
            fields = {f.name: self.alloc(f.type, f.loc) for f in t.fields}
            return StructLayout(t, fields, first, len(self.initial))
        if isinstance(t, ir.StackType):
            first = self.slot(0)
            elements = [self.alloc(t.element, loc) for _ in range(t.size)]
            stride = (elements[0].end - elements[0].first) if elements else 0
            return StackLayout(t, first, elements, stride, first, len(self.initial))
        if isinstance(t, ir.VarbitType):
            first = self.slot(0)
            self.slot(0)
            return VarbitLayout(t.max_width, first, first + 2)
        if isinstance(t, ir.BoolType):
            return self.slot(False)
        if isinstance(t, ir.BitsType) and t.width > self.wide_bits:
            first = len(self.initial)
            for _ in range(-(-t.width // CHUNK_BITS)):
                self.slot(0)
            return WideLayout(t.width, first, len(self.initial))
        if isinstance(t, (ir.BitsType, ir.IntType, ir.EnumType, ir.ErrorType, ir.InfIntType)):
            return self.slot(0)
        raise P4Error(f"values of type {t} are not supported by the embedded interpreter", loc.file, loc.line, loc.col)
