"""verify_checksum, update_checksum (and _with_payload): a calculation over header fields (and the payload)
compared with, or written into, a field, in the checksum controls: the lowered form's `checksums`, run
by the back ends between the parser and the ingress (verify) and before the deparser (update)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from p4target.externs.base import Extern, register
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import hash_algorithm
from p4target.lowered.from_ir.storage import Scalar

if TYPE_CHECKING:
    from p4target.backends.c import _Printer as CPrinter
    from p4target.backends.python_values import PyValues as PyPrinter
    from p4target.lowered.from_ir.externs import Externs


@register
class Checksum(Extern):
    functions = ("verify_checksum", "update_checksum", "verify_checksum_with_payload", "update_checksum_with_payload")

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


def python_checksums(pr: PyPrinter, fname: str, verify: bool) -> bool:
    """Print the Python function of the verify (or update) checksums; False where there are none."""
    sums = [c for c in pr.p.checksums if (c.verify if verify else c.update)]
    if not sums:
        return False
    pr.emit(f"def {fname}(F):", 0)
    for c in sums:
        cond = pr.rv(c.if_cond) if c.if_cond is not None else "True"
        pr.emit(f"if {cond}:", 1)
        target, _ = pr.field_lv(c.target)
        if verify:
            pr.emit(f"if {pr.calc(c.calculation)} != F[{target}]: F[{pr.L.sm['checksum_error']}] = 1", 2)
        else:
            pr.store(c.target, pr.calc(c.calculation), 2)
    return True


def c_checksums(pr: CPrinter, fname: str, verify: bool) -> None:
    """Print the C function of the verify (or update) checksums."""
    pr.ctx = "node"
    pr.emit(f"static void {fname}(pk_t *p) {{", 0)
    pr.emit("u64 *F = p->F; (void)F;", 1)
    for c in pr.p.checksums:
        if not (c.verify if verify else c.update):
            continue
        pr.emit(f"if ({pr.rv(c.if_cond) if c.if_cond is not None else '1'}) {{", 1)
        pr.check(2)
        value = pr.calc(c.calculation, 2)
        if verify:
            target, ftype = pr.field_lv(c.target)
            pr.emit(f"if ((i128){value} != {pr.read(target, ftype)}) F[{pr.L.sm['checksum_error']}] = 1;", 2)
        else:
            pr.store(c.target, value, 2)
        pr.emit("}", 1)
    pr.emit("}", 0)
