"""The native engine's pipeline object, and the one place that chooses an engine.

`make_pipeline(program, engine)` returns a `NativePipeline` (the program compiled to C,
built and loaded: our front end's IR by p4target/native/cgen.py, the lowered form read from
p4c's BMv2 JSON by p4target/backends/c.py; an IR program with a construct cgen.py lacks is
lowered and printed by backends/c.py instead) or the Python engine's `Pipeline`; a program
the native engine cannot run goes to the Python engine with ONE warning line naming the
construct. Both offer `.state` (a State) and `.process(port, data)`; the switch process
drives a NativePipeline's packet loop in C (p4target/switch.py).
"""
from __future__ import annotations

import logging

from p4target.backends import c as lowered_c
from p4target.backends.layout import Unsupported as LoweredUnsupported
from p4target.frontend import ir
from p4target.interp.schema import build_schema
from p4target.lowered import model as lowered
from p4target.lowered.from_ir import NotLowered, lower_program
from p4target.lowered.schema import build_schema as build_lowered_schema
from p4target.native.build import BuildError, build
from p4target.native.cgen import CProgram, Unsupported, generate_c
from p4target.native.engine import Engine, Trace
from p4target.native.store import NativeState

ENGINES = ("native", "python")
log = logging.getLogger("aggnet.native")


class NativePipeline:
    """A program running on the native engine; `engine` is its ctypes interface."""

    engine_name = "native"

    def __init__(self, program: ir.Program | lowered.Program, seed: int = 0, cprog: CProgram | None = None,
                 trace: Trace | None = None):
        if cprog is None:
            program, cprog = _generate(program)
        self.program = program  # the form the C was printed from (an IR program may come back lowered)
        self.source = cprog.source  # the generated C, for debugging
        self.engine = Engine(build(cprog.source), seed, trace)
        schema = build_lowered_schema(program) if isinstance(program, lowered.Program) else build_schema(program)
        schema.digests = tuple(sorted(name for name, _ in cprog.digests))
        self.state = NativeState(schema, self.engine, cprog)
        if trace is not None:
            for name, register in self.state.registers.items():
                trace.watch(cprog.registers[name], register.values)
            for name, value_set in self.state.value_sets.items():  # its members live in engine cells too
                trace.watch(cprog.value_sets[name], value_set.cells)

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """The whole pipeline with empty queues: the packets that leave, in order."""
        with self.state.lock:
            out = self.engine.process(port, data)
        self.state.pump_events()
        return out

    def close(self) -> None:
        """Free the engine (only once nothing uses this pipeline any more)."""
        self.engine.close()


def _generate(program: ir.Program | lowered.Program) -> tuple[ir.Program | lowered.Program, CProgram]:
    """The C of either form of a program, and the form it was printed from: an IR program whose
    constructs cgen.py lacks (wide values, run-time stack indexes, varbits, ...) goes through the
    lowered form's printer, which runs every program p4c's JSON can express."""
    if isinstance(program, lowered.Program):
        return program, lowered_c.generate_c(program)
    try:
        return program, generate_c(program)
    except Unsupported:
        lowered_program = lower_program(program)
        return lowered_program, lowered_c.generate_c(lowered_program)


def native_or_reason(program: ir.Program | lowered.Program, seed: int = 0) -> tuple[NativePipeline | None, str]:
    """A NativePipeline for `program`, or None and why the native engine cannot run it."""
    try:
        printed, cprog = _generate(program)
        return NativePipeline(printed, seed, cprog), ""
    except NotLowered as exc:
        return None, f"the native engine lacks {exc.message}"
    except LoweredUnsupported as exc:
        return None, f"the native engine lacks {exc.message}"
    except BuildError as exc:
        return None, str(exc)


def make_pipeline(program: ir.Program | lowered.Program, engine: str = "native", seed: int = 0):
    """A pipeline on `engine` ('native' or 'python'); native falls back to python with one warning."""
    from p4target.pipeline import Pipeline

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    if engine == "native":
        pipeline, reason = native_or_reason(program, seed)
        if pipeline is not None:
            return pipeline
        log.warning("%s: running on the Python engine: %s", program.source, reason)
    return Pipeline(program, seed)
