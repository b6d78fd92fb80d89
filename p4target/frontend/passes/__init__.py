"""The front end's passes after type checking: checked IR -> the lowered IR back ends read.

Like p4c's front end (frontends/p4/frontend.cpp), a list of small passes, each in its own
module and each doing one thing:

1. initializers: control-level variable initializers move to the apply block;
2. side_effects: every P4 function call gets a statement of its own, in evaluation order;
3. blocks: sub-parser and sub-control instances are inlined into the v1model blocks;
4. functions: function calls are inlined;
5. header_unions: validating a union member explicitly invalidates its siblings;
6. strength: division and modulo by powers of two become shifts and masks;
7. action_args: actions whose directional parameters a table binds are specialized;
8. prune: only what the V1Switch instance uses stays in the Program;
9. new_types: `type` declarations, checked, give way to their underlying types;
10. bmv2_limits: what p4c's BMv2 back end rejects is rejected here too.

ir.py's docstring ("After lowering") lists what the result may contain.
"""
from __future__ import annotations

from ...errors import P4Error
from .. import ir
from .action_args import bind_table_action_args
from .blocks import inline_blocks
from .bmv2_limits import check_bmv2_limits
from .functions import inline_calls, inline_functions
from .header_unions import invalidate_union_siblings, lower_header_unions
from .initializers import move_initializers
from .new_types import erase_new_types
from .side_effects import SideEffectOrdering
from .strength import reduce_strength, reduce_strength_in_action
from .walk import walk


def lower(program: ir.Program) -> ir.Program:
    """Run the passes over a checked program, in place; returns it."""
    m = program.main
    blocks = list({id(b): b for b in (m.parser, m.verify_checksum, m.ingress, m.egress,
                                       m.compute_checksum, m.deparser)}.values())
    for b in blocks:
        if isinstance(b, ir.Control):
            move_initializers(b)
    ordering = SideEffectOrdering()
    for f in program.functions.values():
        ordering.run(f)
    for a in program.actions.values():
        a.body.stmts = ordering.run_stmts(a.body.stmts)
    for b in blocks:
        ordering.run(b)
    for b in blocks:
        inline_blocks(b)
    for a in program.actions.values():
        a.body.stmts = inline_calls(a.body.stmts)
    for b in blocks:
        inline_functions(b)
    for a in program.actions.values():
        a.body.stmts = invalidate_union_siblings(a.body.stmts)
        reduce_strength_in_action(a)
    for b in blocks:
        lower_header_unions(b)
        reduce_strength(b)
        if isinstance(b, ir.Control):
            bind_table_action_args(b)
    prune(program, blocks)
    check_lowered(program)
    check_unique_names(program)
    erase_new_types(program)
    check_bmv2_limits(program)
    return program


def prune(program: ir.Program, blocks: list) -> None:
    """Keep the parser and controls the V1Switch instance runs (functions are all inlined);
    a top-level extern instance becomes a local of the first block using it (keeping its
    global name), an unused one goes (as in p4c)."""
    program.parsers = {b.name: b for b in blocks if isinstance(b, ir.Parser)}
    program.controls = {b.name: b for b in blocks if isinstance(b, ir.Control)}
    program.functions = {}
    for inst in program.instances:
        for b in blocks:
            code = [b.body if isinstance(b, ir.Control) else list(b.states.values())]
            code += [d.body for d in b.locals if isinstance(d, ir.Action)]
            if any(isinstance(n, ir.InstanceRef) and n.decl is inst for n in walk(code)):
                b.locals.append(inst)
                if isinstance(b, ir.Control):
                    b.instances[inst.name] = inst
                break
    program.instances = []


def check_unique_names(program: ir.Program) -> None:
    """Control-plane names of one kind of object are unique, as P4Info needs (p4c refuses a
    program whose @name annotations give two tables, or two registers, the same name)."""
    seen: dict[tuple[str, str], object] = {}
    objects = [("table", t) for t in program.all_tables()] + [(i.extern, i) for i in program.all_instances()]
    for kind, obj in objects:
        key = (kind, obj.control_plane_name)
        if seen.setdefault(key, obj) is not obj:
            raise P4Error(f"Name '{obj.control_plane_name}' is used for multiple {kind} objects in the P4Info message",
                          obj.loc.file, obj.loc.line, obj.loc.col)


def check_lowered(program: ir.Program) -> None:
    """Nothing the passes should have removed is left (else: a construct they cannot lower)."""
    roots: list = [a.body for a in program.all_actions()]
    for b in list(program.parsers.values()) + list(program.controls.values()):
        roots.append(b.body if isinstance(b, ir.Control) else list(b.states.values()))
        for d in b.locals:
            if isinstance(d, ir.BlockInstance):
                raise P4Error(f"unsupported: instance {d.name} here", d.loc.file, d.loc.line, d.loc.col)
            if isinstance(d, ir.VarDecl) and d.init is not None:
                roots.append(d.init)
    for n in walk(roots):
        if isinstance(n, (ir.FunctionCall, ir.ApplyCall)):
            what = "function call" if isinstance(n, ir.FunctionCall) else "apply call"
            raise P4Error(f"unsupported: {what} in this position", n.loc.file, n.loc.line, n.loc.col)
