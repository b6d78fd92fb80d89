"""The native engine's pipeline object: a program's lowered form printed as C, built and loaded.

`NativePipeline(form, schema)` prints the lowered form (p4target.lowered: our front end's IR lowered by
lowered.from_ir, or p4c's BMv2 JSON read as it is) as C with p4target/backends/c.py, builds it and
loads it (or takes the C printed already: p4target.compiled.printed); p4target.load makes the form and
its schema once and chooses this engine or the Python one. It offers `.state` (a NativeState) and
`.process(port, data)` as the Python engine's Pipeline does; the switch process drives its packet
loop in C (p4target/switch.py).
"""
from __future__ import annotations

from p4target import state as st
from p4target.backends.c import CProgram, generate_c
from p4target.lowered import model as lowered
from p4target.native.binding import Engine, Trace
from p4target.native.build import build
from p4target.native.store import NativeState


class NativePipeline:
    """A program running on the native engine; `engine` is its ctypes interface."""

    engine_name = "native"

    def __init__(self, program: lowered.Program, schema: st.ProgramSchema, seed: int = 0, trace: Trace | None = None,
                 cprog: CProgram | None = None):
        """`program`: the lowered form the C is printed from (Unsupported naming what the C printer lacks; BuildError
        when the C compiler fails); `cprog`: its C, printed already."""
        self.program = program
        if cprog is None:
            cprog = generate_c(program)
        self.source = cprog.source  # the generated C, for debugging
        with build(cprog.source) as library:
            self.engine = Engine(library, seed, trace)
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
