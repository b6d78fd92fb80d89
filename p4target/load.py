"""The one loading path: a P4 program -> its lowered form and its schema, each made once -> an engine running it.

A program comes as P4 source (our front end; `from_source` through the cache of compiled.py, which
also gives its P4Info; `from_file` for a file and -D defines), or as p4c's BMv2 JSON (the lowered form as
it is; a P4Info sent with it names what the JSON lacks), from a file or a device config. `pipeline` then picks
the engine: `native` (the form printed as C, built and loaded; for P4 source bound for it, the form and its
C come printed once per machine from compiled.printed) or `python` (printed as Python); a program the
native engine cannot run goes to the Python engine with ONE warning line saying why, unless
$AGGNET_NATIVE_ONLY is set (the test suite sets it): then that is a NativeUnavailable error, so a run
meant for the native engine never passes on the Python one unseen. The switch, the P4Runtime device,
the STF runner, the command line and the tests load programs here and nowhere else; the engines
(pipeline.Pipeline, native.pipeline.NativePipeline) take only the lowered form and its schema.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from finsy.proto import p4i

from p4target.backends.c import CProgram
from p4target.backends.layout import Unsupported
from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.limits import check_state_cap
from p4target.lowered import bmv2_json
from p4target.lowered import model as m
from p4target.lowered.from_ir import NotLowered, lower_program
from p4target.lowered.schema import build_schema
from p4target.native.build import BuildError
from p4target.native.pipeline import NativePipeline
from p4target.state import ProgramSchema

if TYPE_CHECKING:
    from p4target.native.binding import Trace
    from p4target.pipeline import Pipeline

ENGINES = ("native", "python")
NATIVE_ONLY_ENV = "AGGNET_NATIVE_ONLY"
log = logging.getLogger("aggnet.native")


class NativeUnavailable(P4Error):
    """The native engine cannot run a program and $AGGNET_NATIVE_ONLY forbids the fallback to Python."""


@dataclass
class Loaded:
    """A program as the engines take it: its lowered form, its schema, and the P4Info naming its objects (ours
    for P4 source, the one sent with p4c's JSON; None when there is none) and, when it came printed already
    (compiled.printed), the C the native engine builds."""

    form: m.Program
    schema: ProgramSchema
    p4info: p4i.P4Info | None = None
    cprog: CProgram | None = None


def lowered(program: ir.Program | m.Program, p4info: p4i.P4Info | None = None) -> Loaded:
    """Our front end's checked program, lowered (or a lowered form as it is), and its schema."""
    form = program if isinstance(program, m.Program) else lower_program(program)
    return Loaded(form, build_schema(form), p4info)


def from_source(text: str, filename: str, engine: str = "python") -> Loaded:
    """P4 source reported as `filename` (the front end's output cached by hash; for the native `engine` the
    lowered form and its C too, made once per machine); P4Error on a bad program."""
    from p4target.compiled import front_end, printed

    made = printed(text, filename) if engine == "native" else None
    if made is not None:
        form, cprog, info = made
        return Loaded(form, build_schema(form), info, cprog)
    program, info = front_end(text, filename)
    return lowered(program, info)


def from_json(data: bytes | str, filename: str, p4info: p4i.P4Info | None = None) -> Loaded:
    """p4c's BMv2 JSON; what the JSON lacks (action scopes, counter units, selector group sizes) from `p4info` when
    given. P4Error naming the JSON path of a malformed part."""
    form = bmv2_json.loads(data, filename)
    if p4info is not None:
        keep_p4info_details(form, p4info)
    return lowered(form, p4info)


def from_file(path: str, defines: dict[str, str] | None = None) -> Loaded:
    """The program at `path`: p4c's BMv2 JSON (PROG.json, as simple_switch takes it) or P4 source (with -D
    `defines`), with our P4Info."""
    from p4target.frontend import load_program
    from p4target.p4info import build_p4info

    if path.endswith(".json"):
        return lowered(bmv2_json.load_file(path))
    program = load_program(path, defines=defines)
    return lowered(program, build_p4info(program))


def _loaded(program: Loaded | ir.Program | m.Program) -> Loaded:
    return program if isinstance(program, Loaded) else lowered(program)


def native(program: Loaded | ir.Program | m.Program, seed: int = 0, trace: Trace | None = None) -> NativePipeline:
    """`program` on the native engine; NotLowered/Unsupported for what it cannot print, BuildError when gcc fails."""
    loaded = _loaded(program)
    return NativePipeline(loaded.form, loaded.schema, seed, trace, loaded.cprog)


def native_or_reason(program: Loaded | ir.Program | m.Program, seed: int = 0) -> tuple[NativePipeline | None, str]:
    """`program` on the native engine, or None and why the native engine cannot run it."""
    try:
        return native(program, seed), ""
    except (NotLowered, Unsupported) as exc:
        return None, f"the native engine lacks {exc.message}"
    except BuildError as exc:
        return None, str(exc)


def pipeline(program: Loaded | ir.Program | m.Program, engine: str = "native", seed: int = 0, *,
             state_cap_mb: int | None = None, vectorize: bool = True) -> Pipeline | NativePipeline:
    """`program` running on `engine` ('native' or 'python'; native falls back to python with one warning line,
    NativeUnavailable instead when $AGGNET_NATIVE_ONLY is set).
    `state_cap_mb`: StateError (before anything is allocated) when the program's state may take more;
    `vectorize`: the Python engine's numpy code for unrolled lane runs (off only to compare with plain code)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    loaded = _loaded(program)
    if state_cap_mb is not None:
        check_state_cap(loaded.schema, state_cap_mb)
    if engine == "native":
        running, reason = native_or_reason(loaded, seed)
        if running is not None:
            return running
        if os.environ.get(NATIVE_ONLY_ENV):
            raise NativeUnavailable(f"the native engine cannot run it ({reason}) and ${NATIVE_ONLY_ENV} forbids "
                                    "the Python engine", loaded.form.source)
        log.warning("%s: running on the Python engine: %s", loaded.form.source, reason)
    from p4target.pipeline import Pipeline  # imported only where it runs: a switch on the native engine starts sooner

    return Pipeline(loaded.form, loaded.schema, seed, vectorize)


def keep_p4info_details(program: m.Program, info: p4i.P4Info) -> None:
    """Set what BMv2's JSON lacks from the P4Info that came with p4c's JSON: the tables' @defaultonly/@tableonly
    actions, counter units and selectors' max_group_size, so the control plane refuses what simple_switch_grpc
    refuses with that P4Info and the State is the one our front end gives."""
    actions = {a.preamble.id: a.preamble.name for a in info.actions}
    scopes = {t.preamble.name: t.action_refs for t in info.tables}
    for table in (t for pl in program.pipelines for t in pl.tables):
        refs = scopes.get(table.name, ())
        table.default_only = frozenset(actions.get(r.id, "") for r in refs if r.scope == p4i.ActionRef.Scope.DEFAULT_ONLY)
        table.table_only = frozenset(actions.get(r.id, "") for r in refs if r.scope == p4i.ActionRef.Scope.TABLE_ONLY)
    units = {c.preamble.name: p4i.CounterSpec.Unit.Name(c.spec.unit).lower() for c in info.counters}
    units.update((c.preamble.name, p4i.CounterSpec.Unit.Name(c.spec.unit).lower()) for c in info.direct_counters)
    for c in program.counter_arrays:
        unit = units.get(c.name, "unspecified")
        if unit != "unspecified":
            c.type = "packets_and_bytes" if unit == "both" else unit
    group_sizes = {ap.preamble.name: ap.max_group_size for ap in info.action_profiles}
    for profile in (ap for pl in program.pipelines for ap in pl.action_profiles):
        if profile.selector is not None:
            profile.max_group_size = group_sizes.get(profile.name, 0)
