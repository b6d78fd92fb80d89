"""The native engine's arrays of cells (the twins of p4target/state/cells.py): registers and counters are numpy
views of its memory, meter cells forward each configuration to its buckets, a value set's members fill its
cells. An extern's module chooses these for its instances (its `native_storage` hook)."""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from p4target import state as st
from p4target.native.binding import Engine
from p4target.native.store.words import WORD_BITS, chunks, words


class NativeMeterCell(st.MeterCell):
    """A meter cell whose accepted configurations also configure the engine's cell."""

    def __init__(self, configure: Callable[[st.MeterConfig | None], None]):
        super().__init__()
        self._configure_native = configure

    def configure(self, config: st.MeterConfig | None, now: float) -> None:
        super().configure(config, now)
        self._configure_native(config)


class NativeMeterArray(st.MeterArray):
    """Indirect meter `mid` of the engine: the configurations, mirrored into it."""

    def __init__(self, schema: st.MeterSchema, engine: Engine, mid: int):
        self.schema = schema
        self.cells = [NativeMeterCell(functools.partial(engine.meter_set, mid, i)) for i in range(schema.size)]


class NativeRegisterArray(st.RegisterArray):
    """`values` is a numpy view of the engine's register cells: one row of words per cell wider than 64 bits."""

    values: np.ndarray

    def __init__(self, schema: st.RegisterSchema, values: np.ndarray):
        self.schema = schema
        self.words = words(schema.bitwidth)
        self.values = values if self.words == 1 else values.reshape(schema.size, self.words)

    def read(self, index: int) -> int:
        cell = self.values[self._index(index)]
        return int(cell) if self.words == 1 else sum(int(w) << (WORD_BITS * k) for k, w in enumerate(cell))

    def write(self, index: int, value: int) -> None:
        if self.words == 1:
            super().write(index, value)
            return
        i = self._index(index)
        st.check_width(f"register {self.schema.name}[{i}]", value, self.schema.bitwidth)
        self.values[i] = chunks(value, self.schema.bitwidth)

    def reset(self) -> None:
        self.values[:] = 0


class NativeCounterArray(st.CounterArray):
    """`packets`/`bytes` are numpy views of the engine's counter cells."""

    packets: np.ndarray
    bytes: np.ndarray

    def __init__(self, schema: st.CounterSchema, cells: tuple[np.ndarray, np.ndarray]):
        self.schema = schema
        self.packets, self.bytes = cells

    def read(self, index: int) -> tuple[int, int]:
        i = self._index(index)
        return int(self.packets[i]), int(self.bytes[i])

    def reset(self) -> None:
        self.packets[:] = 0
        self.bytes[:] = 0


class NativeValueSet(st.ValueSet):
    """A value set whose accepted writes also fill its cells in native memory (backends/c.py's value_set_cells)."""

    def __init__(self, schema: st.ValueSetSchema, cells: np.ndarray):
        super().__init__(schema)
        self.cells = cells

    def write(self, members: list[tuple[int, ...]]) -> None:
        super().write(members)
        flat = [w for m in sorted(self.members) for v, width in zip(m, self.schema.bitwidths) for w in chunks(v, width)]
        self.cells[0] = 0  # no packet sees a half-written set (writes also hold the engine's lock)
        self.cells[1:1 + len(flat)] = flat
        self.cells[0] = len(self.members)
