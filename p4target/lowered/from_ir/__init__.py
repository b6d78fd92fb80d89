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

What this does not lower yet raises `NotLowered` naming the construct and its location."""
from __future__ import annotations

from p4target.errors import P4Error
from p4target.extern_registry import for_type
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import NotLowered, type_width
from p4target.lowered.from_ir.controls import Controls
from p4target.lowered.from_ir.externs import Externs
from p4target.lowered.from_ir.parsers import Parsers
from p4target.lowered.from_ir.statements import Statements
from p4target.lowered.from_ir.storage import Storage
from p4target.lowered.from_ir.values import Values

__all__ = ["NotLowered", "lower_program"]


class _Hub:
    """The parts of one lowering, each given the parts it calls (each only parts made before it: no part knows
    one above it)."""

    def __init__(self, program: ir.Program):
        self.storage = Storage(program)
        self.values = Values(self.storage)
        self.externs = Externs(self.storage, self.values)
        self.statements = Statements(self.storage, self.values, self.externs)
        self.controls = Controls(self.storage, self.values, self.statements, self.externs)
        self.parsers = Parsers(self.storage, self.values, self.statements)


def lower_program(program: ir.Program) -> m.Program:
    """Our front end's checked, lowered IR as the lowered form (NotLowered for what it cannot lower yet)."""
    if program.main is None:
        raise P4Error("program has no `V1Switch(...) main;` instantiation", program.source)
    hub = _Hub(program)
    s, p, main = hub.storage, hub.storage.p, program.main
    s.setup()
    p.parsers.append(hub.parsers.parser(main.parser))
    for ctl in (main.verify_checksum, main.compute_checksum):
        hub.controls.checksums(ctl)
    for name, ctl in (("ingress", main.ingress), ("egress", main.egress)):
        p.pipelines.append(hub.controls.control(name, ctl))
    p.deparsers.append(hub.parsers.deparser(main.deparser))
    for inst in program.all_instances():
        _instance(p, inst)
    p.parse_vsets = [m.ParseVset(vs.control_plane_name, i, sum(type_width(f.type) for f in vs.fields), vs.size)
                     for i, vs in enumerate(program.value_sets())]
    p.calculations = list(hub.externs.calcs.values())
    p.field_lists = sorted(s.field_lists.values(), key=lambda f: f.id)
    p.learn_lists = list(hub.externs.learn_lists.values())
    return p


def _instance(p: m.Program, inst: ir.ExternInstance) -> None:
    """What an extern instance is in the lowered program (register, counter and meter arrays; direct ones come
    with their tables), as its extern's module says."""
    ext = for_type(inst.extern)
    if ext is not None:
        ext.instance(p, inst)
