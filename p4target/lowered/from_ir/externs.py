"""v1model's externs as BMv2 primitives, calculations, field lists and learn lists: each call lowered by
its extern's module (p4target.externs), through the helpers here."""
from __future__ import annotations

from collections.abc import Callable

from p4target.extern_registry import for_call
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import EMPTY_FIELD_LIST, NotLowered, fail
from p4target.lowered.from_ir.storage import Scalar, Storage
from p4target.lowered.from_ir.values import Values


class Externs:
    """Extern calls; the calculations and learn lists they need."""

    def __init__(self, storage: Storage, values: Values):
        self.s, self.v = storage, values
        self.calcs: dict[str, m.Calculation] = {}
        self.learn_lists: dict[str, m.LearnList] = {}

    def extern_method(self, c: ir.ExternMethodCall, out: list[m.Primitive]) -> None:
        self.instance_name(c)
        self.extern_call(c, out)

    def extern_function(self, c: ir.ExternFunctionCall, out: list[m.Primitive]) -> None:
        if c.name == "verify":
            raise fail("verify() outside a parser", c.loc)
        self.extern_call(c, out)

    def extern_call(self, c: ir.ExternCall, out: list[m.Primitive]) -> None:
        ext = for_call(c)
        if ext is None:
            raise self.not_lowered(c)
        ext.lower(self, c, out)

    def not_lowered(self, c: ir.ExternCall) -> NotLowered:
        if isinstance(c, ir.ExternFunctionCall):
            return fail(f"extern {c.name}() is not lowered", c.loc)
        return fail(f"{getattr(c.target.type, 'name', '?')}.{c.method}() is not lowered", c.loc)

    def instance_name(self, c: ir.ExternMethodCall) -> str:
        """The control-plane name of the extern instance a method is called on."""
        inst = c.target.decl if isinstance(c.target, ir.InstanceRef) else None
        if inst is None:
            raise fail(f"{c.method}() on something that is not an extern instance", c.loc)
        return inst.control_plane_name

    def write_via(self, out: list[m.Primitive], target: ir.Expr, make: Callable[[m.Value], m.Primitive]) -> None:
        """A primitive writing `target`: straight into its field, or through a scalar for anything else."""
        if not isinstance(target, ir.Slice):
            s = self.v.store_of(target)
            if isinstance(s, Scalar) and not isinstance(s.type, ir.BoolType):
                out.append(make(s.ref))
                return
        t = self.s.tmp(target.type, target.loc)
        out.append(make(t.ref))
        if isinstance(target, ir.Slice):
            self.v.assign_slice(out, target, t.ref)
        else:
            s = self.v.store_of(target)
            assert isinstance(s, Scalar)
            out.append(m.Primitive("assign", [s.ref, t.ref]))

    def calculation(self, algo: str, inputs: list[m.Value]) -> str:
        name = f"calc_{self.s.next_id('calc')}"
        self.calcs[name] = m.Calculation(name, len(self.calcs), algo, inputs)
        return name

    def field_list_arg(self, e: ir.Expr | None) -> m.Const:
        """A field list id: the @field_list index given, or an empty list for none (as p4c makes one)."""
        return m.Const(self.s.field_list(EMPTY_FIELD_LIST if e is None else ir.constant_value(e)).id)
