"""v1model's externs as BMv2 primitives, calculations, field lists and learn lists."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import EMPTY_FIELD_LIST, STANDARD_METADATA, Part, digest_name, fail
from p4target.lowered.from_ir.storage import Scalar
from p4target.lowered.from_ir.values import Typed
from p4target.p4info import constant_value


def hash_algorithm(e: ir.Expr) -> str:
    if not isinstance(e, ir.EnumMember):
        raise fail("a run-time hash algorithm (it must be a HashAlgorithm constant)", e.loc)
    return e.member


class Externs(Part):
    """Extern calls; the calculations and learn lists they need."""

    def __init__(self, hub: Any):
        super().__init__(hub)
        self.calcs: dict[str, m.Calculation] = {}
        self.learn_lists: dict[str, m.LearnList] = {}

    def extern_method(self, c: ir.ExternMethodCall, out: list[m.Primitive]) -> None:
        inst = c.target.decl if isinstance(c.target, ir.InstanceRef) else None
        if inst is None:
            raise fail(f"{c.method}() on something that is not an extern instance", c.loc)
        name, kind, a = inst.control_plane_name, inst.extern, c.args
        if kind == "register" and c.method == "read":
            self.write_via(out, a[0], lambda dst: m.Primitive("register_read", [
                dst, m.Named("register_array", name), self.v.data(a[1])]))
        elif kind == "register" and c.method == "write":
            out.append(m.Primitive("register_write", [m.Named("register_array", name), self.v.data(a[0]),
                                                      self.v.data(a[1])]))
        elif kind == "counter" and c.method == "count":
            out.append(m.Primitive("count", [m.Named("counter_array", name), self.v.data(a[0])]))
        elif kind == "meter" and c.method == "execute_meter":
            self.write_via(out, a[1], lambda dst: m.Primitive("execute_meter", [
                m.Named("meter_array", name), self.v.data(a[0]), dst]))
        elif kind in ("direct_counter", "direct_meter"):
            pass  # counted/read by the table on every hit (result_target for a meter's read)
        else:
            raise fail(f"{kind}.{c.method}() is not lowered", c.loc)

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
            self.st.assign_slice(out, target, t.ref)
        else:
            s = self.v.store_of(target)
            assert isinstance(s, Scalar)
            out.append(m.Primitive("assign", [s.ref, t.ref]))

    def calculation(self, algo: str, inputs: list[m.Value]) -> str:
        name = f"calc_{self.s.next_id('calc')}"
        self.calcs[name] = m.Calculation(name, len(self.calcs), algo, inputs)
        return name

    def extern_function(self, c: ir.ExternFunctionCall, out: list[m.Primitive]) -> None:
        n, a = c.name, c.args
        if n == "mark_to_drop":
            out.append(m.Primitive("mark_to_drop", [m.HeaderRef(STANDARD_METADATA)]))
        elif n == "hash":
            algo = hash_algorithm(a[1])
            calc = self.calculation(algo, self.v.calc_inputs(a[3], c.loc))
            self.write_via(out, a[0], lambda dst: m.Primitive("modify_field_with_hash_based_offset", [
                dst, self.v.data(a[2]), m.Named("calculation", calc), self.v.data(a[4])]))
        elif n == "random":
            self.write_via(out, a[0], lambda dst: m.Primitive("modify_field_rng_uniform", [
                dst, self.v.data(a[1]), self.v.data(a[2])]))
        elif n == "digest":
            t = c.type_args[0] if c.type_args else a[1].type
            name = digest_name(t)
            ll = self.learn_lists.get(name)
            if ll is None:
                fields = []
                for v in self.v.flat(a[1]):
                    if not isinstance(v, m.Field):
                        raise fail("a digest of values that are not fields", c.loc)
                    fields.append(v)
                ll = self.learn_lists[name] = m.LearnList(len(self.learn_lists) + 1, name, fields)
            out.append(m.Primitive("generate_digest", [self.v.data(a[0]), m.Const(ll.id)]))
        elif n == "log_msg":
            values = tuple(v.value if isinstance(v, Typed) else v for v in self.v.flat(a[1])) if len(a) > 1 else ()
            fmt = a[0].value if isinstance(a[0], ir.StringLiteral) else ""
            out.append(m.Primitive("log_msg", [m.String(fmt), m.ValueList(values)]))
        elif n in ("assert", "assume"):
            out.append(m.Primitive(n, [self.v.cond(a[0])], str(c.loc)))
        elif n == "truncate":
            out.append(m.Primitive("truncate", [self.v.data(a[0])]))
        elif n in ("clone", "clone3", "clone_preserving_field_list"):
            kind = a[0].member if isinstance(a[0], ir.EnumMember) else None
            if kind not in ("I2E", "E2E"):
                raise fail("the clone type must be CloneType.I2E or CloneType.E2E", a[0].loc)
            fl = self.field_list_arg(a[2] if n == "clone_preserving_field_list" else None)
            op = "clone_ingress_pkt_to_egress" if kind == "I2E" else "clone_egress_pkt_to_egress"
            out.append(m.Primitive(op, [self.v.data(a[1]), fl]))
        elif n in ("resubmit", "resubmit_preserving_field_list", "recirculate", "recirculate_preserving_field_list"):
            fl = self.field_list_arg(a[0] if n.endswith("field_list") else None)
            out.append(m.Primitive(n.split("_")[0], [fl]))
        elif n == "verify":
            raise fail("verify() outside a parser", c.loc)
        else:
            raise fail(f"extern {n}() is not lowered", c.loc)

    def field_list_arg(self, e: ir.Expr | None) -> m.Const:
        """A field list id: the @field_list index given, or an empty list for none (as p4c makes one)."""
        return m.Const(self.s.field_list(EMPTY_FIELD_LIST if e is None else constant_value(e)).id)
