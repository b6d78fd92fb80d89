"""Arrays of cells: registers, counters, meters (and their meter cells), parser value sets, with their schemas.

The Python engine's storage, indexed in place by the printed code; the native engine's counterparts
(p4target/native/store/cells.py) keep the same cells in its memory. Which storage an extern's instances
get is its module's choice (the registry's `storage` hooks), so a register-like extern reuses these.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from p4target.state.errors import InvalidArgument, ResourceExhausted, check_index, check_width

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class RegisterSchema:
    name: str
    bitwidth: int
    size: int
    extern: str = "register"  # the extern type whose module keeps its cells (p4target.extern_registry.keeper)


COUNTER_TYPES = ("packets", "bytes", "packets_and_bytes")


@dataclass(frozen=True)
class CounterSchema:
    name: str
    size: int
    type: str = "packets_and_bytes"  # one of COUNTER_TYPES
    extern: str = "counter"  # the extern type whose module keeps its cells


@dataclass(frozen=True)
class DirectCounterSchema:
    name: str
    table: str
    type: str = "packets_and_bytes"


METER_TYPES = ("packets", "bytes")
GREEN, YELLOW, RED = 0, 1, 2  # v1model meter colors


@dataclass(frozen=True)
class MeterSchema:
    name: str
    size: int
    type: str = "bytes"  # one of METER_TYPES
    extern: str = "meter"  # the extern type whose module keeps its cells


@dataclass(frozen=True)
class DirectMeterSchema:
    name: str
    table: str
    type: str = "bytes"


@dataclass(frozen=True)
class ValueSetSchema:
    """A parser value set: each member is one value per select key (of `bitwidths`), at most `size` members."""

    name: str
    bitwidths: tuple[int, ...]
    size: int


@dataclass(frozen=True)
class MeterConfig:
    """Two-rate three-color marker (RFC 2698, color-blind) as BMv2 meters run it.

    Rates are units per second and bursts units, the unit being bytes or packets
    (the meter's type), as in P4Runtime's MeterConfig.
    """

    cir: int
    cburst: int
    pir: int
    pburst: int


def check_meter_config(config: MeterConfig) -> None:
    """InvalidArgument unless the rates and bursts are unsigned 64-bit and pir >= cir."""
    for name in ("cir", "cburst", "pir", "pburst"):
        check_width(f"meter config {name}", getattr(config, name), 64)
    if config.pir < config.cir:
        raise InvalidArgument("meter config: pir must be >= cir")


class MeterCell:
    """One meter instance: its config (None = unconfigured, always GREEN) and token buckets."""

    __slots__ = ("config", "committed", "peak", "last")

    def __init__(self) -> None:
        self.config: MeterConfig | None = None
        self.committed = self.peak = 0.0
        self.last = 0.0

    def configure(self, config: MeterConfig | None, now: float) -> None:
        if config is not None:
            check_meter_config(config)
        self.config = config
        if config is not None:  # buckets start full
            self.committed, self.peak, self.last = float(config.cburst), float(config.pburst), now

    def execute(self, amount: int, now: float) -> int:
        """Color of a packet of `amount` units arriving at time `now` (seconds)."""
        c = self.config
        if c is None:
            return GREEN
        elapsed = max(0.0, now - self.last)
        self.last = now
        self.peak = min(float(c.pburst), self.peak + elapsed * c.pir)
        self.committed = min(float(c.cburst), self.committed + elapsed * c.cir)
        if self.peak < amount:
            return RED
        self.peak -= amount
        if self.committed < amount:
            return YELLOW
        self.committed -= amount
        return GREEN


class RegisterArray:
    """`values` is a plain list the pipeline indexes directly; it is never replaced."""

    def __init__(self, schema: RegisterSchema):
        self.schema = schema
        self.values: list[int] | np.ndarray = [0] * schema.size  # the native engine's: a view of its memory

    def _index(self, index: int) -> int:
        return check_index(f"register {self.schema.name}", index, self.schema.size)

    def read(self, index: int) -> int:
        return self.values[self._index(index)]

    def write(self, index: int, value: int) -> None:
        i = self._index(index)
        check_width(f"register {self.schema.name}[{i}]", value, self.schema.bitwidth)
        self.values[i] = value

    def reset(self) -> None:
        self.values[:] = [0] * self.schema.size


class ValueSet:
    """`members` is the set the parser tests select keys against (tuples, one value per key); never replaced."""

    def __init__(self, schema: ValueSetSchema):
        self.schema = schema
        self.members: set[tuple[int, ...]] = set()

    def write(self, members: list[tuple[int, ...]]) -> None:
        """Make the set exactly `members` (P4Runtime writes a value set whole)."""
        name = self.schema.name
        for m in members:
            if len(m) != len(self.schema.bitwidths):
                raise InvalidArgument(f"value set {name}: a member has {len(m)} values, expected {len(self.schema.bitwidths)}")
            for v, w in zip(m, self.schema.bitwidths):
                check_width(f"value set {name} member", v, w)
        if len(set(members)) > self.schema.size:
            raise ResourceExhausted(f"value set {name}: {len(set(members))} members, it holds {self.schema.size}")
        self.members.clear()
        self.members.update(members)


def counter_values(what: str, packets: int, nbytes: int) -> tuple[int, int]:
    """(packets, bytes) to write into a counter cell; InvalidArgument unless both fit its 64 unsigned bits."""
    check_width(f"{what} packets", packets, 64)
    check_width(f"{what} bytes", nbytes, 64)
    return packets, nbytes


class CounterArray:
    """Indirect counter: `packets[i]`, `bytes[i]` lists the pipeline updates in place."""

    def __init__(self, schema: CounterSchema):
        self.schema = schema
        self.packets: list[int] | np.ndarray = [0] * schema.size  # the native engine's: views of its memory
        self.bytes: list[int] | np.ndarray = [0] * schema.size

    def _index(self, index: int) -> int:
        return check_index(f"counter {self.schema.name}", index, self.schema.size)

    def read(self, index: int) -> tuple[int, int]:
        """(packets, bytes) of cell `index`."""
        i = self._index(index)
        return self.packets[i], self.bytes[i]

    def write(self, index: int, packets: int = 0, nbytes: int = 0) -> None:
        i = self._index(index)
        self.packets[i], self.bytes[i] = counter_values(f"counter {self.schema.name}", packets, nbytes)

    def reset(self) -> None:
        self.packets[:] = [0] * self.schema.size
        self.bytes[:] = [0] * self.schema.size


class MeterArray:
    """Indirect meter: one MeterCell per index."""

    def __init__(self, schema: MeterSchema):
        self.schema = schema
        self.cells = [MeterCell() for _ in range(schema.size)]

    def cell(self, index: int) -> MeterCell:
        return self.cells[check_index(f"meter {self.schema.name}", index, self.schema.size)]

    def reset(self) -> None:
        for c in self.cells:
            c.configure(None, 0.0)
