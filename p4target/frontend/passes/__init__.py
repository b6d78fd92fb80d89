"""The front end's passes after type checking: checked IR -> the lowered IR back ends read.

Like p4c's front end (frontends/p4/frontend.cpp), a list of small passes under a small
manager: each pass does one thing, takes the whole Program and changes it in place, and
has a name, so `aggnet p4 compile --list-passes` lists them and `--dump-after NAME` prints
the program after one (frontend/to_p4.py). PASSES below is the order they run in.

ir.py's docstring ("After lowering") lists what the result may contain.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import P4Error
from .. import ir
from ..checker.statements import NO_UNROLL
from .action_args import bind_table_action_args
from .blocks import inline_blocks
from .bmv2_limits import check_bmv2_limits, used_actions
from .bmv2_warnings import warn_bmv2_unsupported
from .digest_lists import name_digest_lists
from .functions import inline_calls, inline_functions
from .hash_data import HashData
from .header_unions import invalidate_union_siblings, lower_header_unions
from .initializers import move_initializers
from .int_values import fold_int_values
from .new_types import erase_new_types
from .parser_ifs import remove_parser_ifs
from .side_effects import SideEffectOrdering
from .strength import reduce_strength, reduce_strength_in_action
from .table_keys import compute_table_keys
from .unroll import OPTION as UNROLL_OPTION
from .unroll import unroll_parser, verify_of
from .walk import map_block_stmts, walk


@dataclass(frozen=True)
class Pass:
    """One front-end pass: `run(program)` changes the program in place."""

    name: str
    run: Callable[[ir.Program], None]

    @property
    def doc(self) -> str:
        """The first paragraph of the pass function's docstring, on one line: what it does."""
        return " ".join((self.run.__doc__ or "").strip().split("\n\n")[0].split())


def v1_blocks(program: ir.Program) -> list[ir.Parser | ir.Control]:
    """The parser and controls the V1Switch instance runs, each once, in package order."""
    m = program.main
    assert m is not None, "the checker guarantees a V1Switch main"
    return list({id(b): b for b in (m.parser, m.verify_checksum, m.ingress, m.egress,
                                    m.compute_checksum, m.deparser)}.values())


def initializers(program: ir.Program) -> None:
    """Block-level variable initializers move to the start of the apply block or start state."""
    for b in v1_blocks(program):
        move_initializers(b)


def side_effects(program: ir.Program) -> None:
    """Every P4 function call gets a statement of its own, in evaluation order."""
    ordering = SideEffectOrdering()
    for f in program.functions.values():
        ordering.run(f)
    for a in program.actions.values():
        a.body.stmts = ordering.run_stmts(a.body.stmts)
    for b in v1_blocks(program):
        ordering.run(b)


def blocks(program: ir.Program) -> None:
    """Sub-parser and sub-control instances are inlined into the V1Switch blocks."""
    for b in v1_blocks(program):
        inline_blocks(b)


def table_keys(program: ir.Program) -> None:
    """A table key that calls something is computed into a variable before each apply of its table."""
    for b in v1_blocks(program):
        if isinstance(b, ir.Control):
            compute_table_keys(b)


def functions(program: ir.Program) -> None:
    """Function calls are inlined (in top-level actions and in the blocks)."""
    for a in program.actions.values():
        a.body.stmts = inline_calls(a.body.stmts)
    for b in v1_blocks(program):
        inline_functions(b)


def parser_ifs(program: ir.Program) -> None:
    """`if` statements in parser states become states of their own."""
    for b in v1_blocks(program):
        if isinstance(b, ir.Parser):
            remove_parser_ifs(b)


def int_values(program: ir.Program) -> None:
    """Int values inlining made known (a sub-control's int parameter) are folded into constants, and `(int)x`
    of a run-time x is 0, as p4c's BMv2 back end computes it (after the unroller, which reads x's value)."""
    fold_int_values(v1_blocks(program), list(program.actions.values()))


def header_unions(program: ir.Program) -> None:
    """Validating a header union member explicitly invalidates its siblings."""
    for a in program.actions.values():
        a.body.stmts = invalidate_union_siblings(a.body.stmts)
    for b in v1_blocks(program):
        lower_header_unions(b)


def unroll(program: ir.Program) -> None:
    """Parser loops over a stack at a variable index are unrolled into constant indexes, as p4c's --loopsUnroll does.

    Only when the program asks for it as p4c's samples do, `@command_line("--loopsUnroll")`, and only
    parsers with a stack index that is not a constant change."""
    if UNROLL_OPTION in program.command_line:
        for b in v1_blocks(program):
            if isinstance(b, ir.Parser):
                unroll_parser(b, verify_of(program))


def strength(program: ir.Program) -> None:
    """Division and modulo by powers of two become shifts and masks."""
    for a in program.actions.values():
        reduce_strength_in_action(a)
    for b in v1_blocks(program):
        reduce_strength(b)


def hash_data(program: ir.Program) -> None:
    """A computed value in hash()'s data list is stored in a temporary first."""
    rewrite = HashData()
    for a in program.actions.values():
        a.body.stmts = rewrite.run_stmts(a.body.stmts)
    for b in v1_blocks(program):
        map_block_stmts(b, rewrite.run_stmts)


def digest_lists(program: ir.Program) -> None:
    """A digest of a list `{a, b}` gets a struct type of its own, digest_N, as p4c names it."""
    code: list = [a.body for a in program.actions.values()]
    for b in v1_blocks(program):
        code += [d.body for d in b.locals if isinstance(d, ir.Action)]
        code.append(b.body if isinstance(b, ir.Control) else list(b.states.values()))
    name_digest_lists(program, code)


def action_args(program: ir.Program) -> None:
    """Actions whose directional parameters a table's action list binds are specialized."""
    for b in v1_blocks(program):
        if isinstance(b, ir.Control):
            bind_table_action_args(b)


def prune(program: ir.Program) -> None:
    """Only what the V1Switch instance uses stays.

    That is its parser and controls (functions are all inlined); a top-level extern instance
    becomes a local of the first block using it (keeping its global name), an unused one goes
    (as in p4c). So does a direct counter or meter no table names and no code calls, with
    p4c's warning: it has no table to count for, and P4Info lists none."""
    blocks = v1_blocks(program)
    program.parsers = {b.name: b for b in blocks if isinstance(b, ir.Parser)}
    program.controls = {b.name: b for b in blocks if isinstance(b, ir.Control)}
    program.functions = {}
    for control in program.controls.values():
        _drop_unused_direct_resources(program, control)
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


def _drop_unused_direct_resources(program: ir.Program, control: ir.Control) -> None:
    attached = {id(d) for t in control.tables.values() for d in (t.direct_counter, t.direct_meter) if d is not None}
    code = [control.body] + [d.body for d in control.locals if isinstance(d, ir.Action)]
    called = {id(n.decl) for n in walk(code) if isinstance(n, ir.InstanceRef)}
    for d in list(control.locals):
        if (isinstance(d, ir.ExternInstance) and d.extern in ("direct_counter", "direct_meter")
                and id(d) not in attached and id(d) not in called):
            control.locals.remove(d)
            control.instances.pop(d.name, None)
            kind = d.extern.replace("_", " ")
            program.warnings.append(f"{d.loc}: warning: {control.name}.{d.name}: {kind} not attached to any table; ignoring")


def check_action_names(program: ir.Program) -> None:
    """No two actions the program uses have the same control-plane name (p4c's DuplicateActionControlPlaneNameCheck).

    As p4c, after inlining: top-level actions and then each control's, the blocks in the order they are declared,
    a control's own actions before those inlined into it; the later of two is blamed, each named as written."""
    controls = [b for b in v1_blocks(program) if isinstance(b, ir.Control)]
    used = {id(a) for a in used_actions([t for c in controls for t in c.tables.values()], [c.body for c in controls])}
    groups: list[tuple[ir.Loc, list[ir.Action]]] = [(a.loc, [a]) for a in program.actions.values()]
    for c in controls:
        own = [a for a in c.actions.values() if a.control == c.name]
        groups.append((c.loc, own + [a for a in c.actions.values() if a.control != c.name]))
    seen: dict[str, ir.Action] = {}
    for _, actions in sorted(groups, key=lambda g: (g[0].file == program.source, g[0].line)):
        for action in (a for a in actions if id(a) in used):
            other = seen.setdefault(action.control_plane_name, action)
            if other is not action:
                raise P4Error(f"{_written_name(action)}: conflicting control plane name: {_written_name(other)}",
                              action.loc.file, action.loc.line, action.loc.col)


def _written_name(action: ir.Action) -> str:
    return action.annotations.get_str("name") or action.name


def check_p4runtime(program: ir.Program) -> None:
    """What p4c's P4Info serializer refuses, refused before BMv2's back-end limits, as p4c checks it first.

    Control-plane names of one kind of object are unique (@name annotations may give two tables, or two registers,
    the same name); the parameters of the actions tables list are bit<>, int<>, bool, type or enum values."""
    for action in (ref.action for t in program.all_tables() for ref in t.actions):
        for p in action.data_params:
            if not isinstance(p.type, (ir.BitsType, ir.IntType, ir.BoolType, ir.NewType, ir.EnumType)):
                raise P4Error(f"Action parameter {p.name} has a type which is not bit<>, int<>, bool, type or "
                              "serializable enum", p.loc.file, p.loc.line, p.loc.col)
    seen: dict[tuple[str, str], object] = {}
    objects = [("table", t) for t in program.all_tables()] + [(i.extern, i) for i in program.all_instances()]
    for kind, obj in objects:
        key = (kind, obj.control_plane_name)
        if seen.setdefault(key, obj) is not obj:
            raise P4Error(f"Name '{obj.control_plane_name}' is used for multiple {kind} objects in the P4Info message",
                          obj.loc.file, obj.loc.line, obj.loc.col)


def check_lowered(program: ir.Program) -> None:
    """Nothing the passes should have removed is left (else: a construct they cannot lower).

    Nor a loop (a function's whose trip count is not known at compile time) outside an action: BMv2 runs loops
    only in actions. (p4c 1.2.5.16 compiles one in an apply block so that its body runs once.)"""
    roots: list = [a.body for a in program.all_actions()]
    for b in list(program.parsers.values()) + list(program.controls.values()):
        code = b.body if isinstance(b, ir.Control) else list(b.states.values())
        loop = next((n for n in walk(code) if isinstance(n, ir.Loop)), None)
        if loop is not None:
            raise P4Error("unsupported: a for loop whose trip count is not known at compile time, in a function called "
                          f"outside an action {NO_UNROLL}", loop.loc.file, loop.loc.line, loop.loc.col)
        roots.append(code)
        for d in b.locals:
            if isinstance(d, ir.BlockInstance):
                raise P4Error(f"unsupported: instance {d.name} here", d.loc.file, d.loc.line, d.loc.col)
            if isinstance(d, ir.VarDecl) and d.init is not None:
                roots.append(d.init)
    for n in walk(roots):
        if isinstance(n, (ir.FunctionCall, ir.ApplyCall)):
            what = "function call" if isinstance(n, ir.FunctionCall) else "apply call"
            raise P4Error(f"unsupported: {what} in this position", n.loc.file, n.loc.line, n.loc.col)


PASSES: tuple[Pass, ...] = (
    Pass("initializers", initializers),
    Pass("side_effects", side_effects),
    Pass("blocks", blocks),
    Pass("action_names", check_action_names),
    Pass("table_keys", table_keys),
    Pass("functions", functions),
    Pass("header_unions", header_unions),
    Pass("parser_ifs", parser_ifs),
    Pass("unroll", unroll),
    Pass("int_values", int_values),
    Pass("strength", strength),
    Pass("hash_data", hash_data),
    Pass("digest_lists", digest_lists),
    Pass("action_args", action_args),
    Pass("prune", prune),
    Pass("check_lowered", check_lowered),
    Pass("p4runtime", check_p4runtime),
    Pass("new_types", erase_new_types),
    Pass("bmv2_limits", check_bmv2_limits),
    Pass("bmv2_warnings", warn_bmv2_unsupported),
)
PASS_NAMES = tuple(p.name for p in PASSES)


def lower(program: ir.Program, after: Callable[[str, ir.Program], None] | None = None) -> ir.Program:
    """Run the passes over a checked program, in place; returns it. `after(name, program)`
    is called after each pass (how --dump-after sees the program)."""
    for p in PASSES:
        p.run(program)
        if after is not None:
            after(p.name, program)
    return program
