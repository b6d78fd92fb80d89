"""The native engine's pipeline object, and the one place that chooses an engine.

`make_pipeline(program, engine)` returns a `NativePipeline` (the program's lowered form,
p4target.lowered: our front end's IR lowered by lowered.from_ir or p4c's BMv2 JSON read as it is,
printed as C by p4target/backends/c.py, built and loaded) or the Python engine's `Pipeline`; a
program the native engine cannot run (the C compiler failed, or a construct neither the lowering
nor the printer takes) goes to the Python engine with ONE warning line saying why, unless
$AGGNET_NATIVE_ONLY is set (the test suite sets it): then that is a NativeUnavailable error, so a run
meant for the native engine never passes on the Python one unseen. Both offer
`.state` (a State) and `.process(port, data)`; the switch process drives a NativePipeline's
packet loop in C (p4target/switch.py).
"""
from __future__ import annotations

import logging
import os

from p4target.backends.c import CProgram, generate_c
from p4target.backends.layout import Unsupported
from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.lowered import model as lowered
from p4target.lowered.from_ir import NotLowered, lower_program
from p4target.lowered.schema import build_schema as build_lowered_schema
from p4target.native.build import BuildError, build
from p4target.native.engine import Engine, Trace
from p4target.native.store import NativeState

ENGINES = ("native", "python")
NATIVE_ONLY_ENV = "AGGNET_NATIVE_ONLY"
log = logging.getLogger("aggnet.native")


class NativeUnavailable(P4Error):
    """The native engine cannot run a program and $AGGNET_NATIVE_ONLY forbids the fallback to Python."""


class NativePipeline:
    """A program running on the native engine; `engine` is its ctypes interface."""

    engine_name = "native"

    def __init__(self, program: ir.Program | lowered.Program, seed: int = 0, trace: Trace | None = None,
                 cprog: CProgram | None = None):
        if cprog is None:
            self.program, cprog = generate(program)  # the lowered form the C was printed from
        else:
            assert isinstance(program, lowered.Program), "C is printed from a lowered program"
            self.program = program
        self.source = cprog.source  # the generated C, for debugging
        with build(cprog.source) as library:
            self.engine = Engine(library, seed, trace)
        schema = build_lowered_schema(self.program)
        schema.digests = tuple(sorted(name for name, _ in cprog.digests))
        self.state = NativeState(schema, self.engine, cprog)
        if trace is not None:
            for rid, cells in self.state.cells:
                trace.watch(rid, cells)

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """The whole pipeline with empty queues: the packets that leave, in order."""
        with self.state.lock:
            out = self.engine.process(port, data)
        self.state.pump_events()
        return out

    def close(self) -> None:
        """Free the engine (only once nothing uses this pipeline any more); the entries its tables stored keep
        their last counters as plain values."""
        self.state.detach_entries()
        self.engine.close()


def generate(program: ir.Program | lowered.Program) -> tuple[lowered.Program, CProgram]:
    """The lowered form of a program (an IR program is lowered first) and its C."""
    printed = lower_program(program) if isinstance(program, ir.Program) else program
    return printed, generate_c(printed)


def native_or_reason(program: ir.Program | lowered.Program, seed: int = 0,
                     cprog: CProgram | None = None) -> tuple[NativePipeline | None, str]:
    """A NativePipeline for `program` (`cprog`: its C, printed already), or None and why the native engine cannot
    run it."""
    try:
        return NativePipeline(program, seed, cprog=cprog), ""
    except (NotLowered, Unsupported) as exc:
        return None, f"the native engine lacks {exc.message}"
    except BuildError as exc:
        return None, str(exc)


def make_pipeline(program: ir.Program | lowered.Program, engine: str = "native", seed: int = 0,
                  cprog: CProgram | None = None):
    """A pipeline on `engine` ('native' or 'python'); native falls back to python with one warning
    (NativeUnavailable instead when $AGGNET_NATIVE_ONLY is set). `cprog`: the C printed from `program` (lowered)
    already (p4target.compiled.printed)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    if engine == "native":
        pipeline, reason = native_or_reason(program, seed, cprog)
        if pipeline is not None:
            return pipeline
        if os.environ.get(NATIVE_ONLY_ENV):
            raise NativeUnavailable(f"the native engine cannot run it ({reason}) and ${NATIVE_ONLY_ENV} forbids "
                                    "the Python engine", program.source)
        log.warning("%s: running on the Python engine: %s", program.source, reason)
    from p4target.pipeline import Pipeline  # imported only where it runs: a switch on the native engine starts sooner

    return Pipeline(program, seed)
