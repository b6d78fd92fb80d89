"""verify_checksum, update_checksum (and _with_payload): a calculation over header fields (and the payload)
compared with, or written into, a field, in the checksum controls: lowered to the lowered form's `checksums`,
which the back ends print (their gen_checksums) between the parser and the ingress (verify) and before the
deparser (update)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.extern_registry import Extern, register
from p4target.externs.base import Call, fail
from p4target.frontend import ir
from p4target.frontend.passes.bmv2_limits import describe
from p4target.frontend.passes.hash_data import is_plain
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import hash_algorithm
from p4target.lowered.from_ir.storage import Scalar

if TYPE_CHECKING:
    from p4target.lowered.from_ir.externs import Externs


@register
class Checksum(Extern):
    functions = ("verify_checksum", "update_checksum", "verify_checksum_with_payload", "update_checksum_with_payload")

    def check_call(self, c: Call) -> None:
        """p4c's BMv2 back end reads fields and constants only in a checksum's data: no computation."""
        assert isinstance(c, ir.ExternFunctionCall)
        data = c.args[1]
        for item in data.items if isinstance(data, ir.ListExpr) else [data]:
            if not is_plain(item):
                raise fail(f"{describe(item)}: Computations are not supported in {c.name}", item.loc)

    def checksum(self, x: Externs, c: ir.ExternFunctionCall) -> bool:
        """A call in a checksum control: a checksum of the program (only there: elsewhere `lower` refuses it)."""
        a = c.args
        inputs = x.v.calc_inputs(a[1], c.loc)
        if c.name.endswith("with_payload"):
            inputs.append(m.Payload())
        calc = x.calculation(hash_algorithm(a[3]), inputs)
        target = x.v.store_of(a[2])
        assert isinstance(target, Scalar) and isinstance(target.ref, m.Field)
        verify = c.name.startswith("verify")
        sums = x.s.p.checksums
        sums.append(m.Checksum(f"cksum_{len(sums)}", len(sums), target.ref, "generic", calc, verify, not verify,
                               x.v.cond(a[0])))
        return True

