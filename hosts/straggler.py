"""Emulated slow workers, and who should aggregate while they lag.

A straggler is a worker whose compute takes longer: a fixed delay per step (a busy or
remote worker) and/or a slowdown factor (a worker with a fraction of a CPU: every step's
compute takes `slowdown` times as long), for the whole run or for a period of it: from
start_s to end_s seconds (the cluster's time) after the end of its first step, when every
worker has started. Both are emulated by sleeping after the backward pass, which the step
time then includes, so a slow worker is slow in every scheme alike.

The agent config names them: `"stragglers": {"h2": {"delay_s": 0.2, "start_s": 5, "end_s": 15}}`.

Which hosts aggregate on the stragglers' behalf (MLfabric's "aggregation at idle workers"):
a host that trains nothing is idle all the time; among workers, the fastest ones sit idle
longest while they wait for the slow ones. `pick_aggregators` orders them so.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("delay_s", "slowdown", "start_s", "end_s")


class StragglerError(ValueError):
    """A malformed straggler entry; names the source and the field."""

    exit_code = 2


@dataclass(frozen=True)
class Straggler:
    delay_s: float = 0.0  # added to every step's compute
    slowdown: float = 1.0  # compute takes this many times as long (>= 1)
    start_s: float = 0.0  # slow from this long after the first step ...
    end_s: float = math.inf  # ... until this long after it
    base: float = 1.0  # the slowdown outside [start_s, end_s): 1, or the time scale (slowed)

    def pause_s(self, compute_s: float, elapsed_s: float = 0.0) -> float:
        """How long to sleep after a step's compute that took `compute_s`, `elapsed_s` after the first step."""
        if self.start_s <= elapsed_s < self.end_s:
            return self.delay_s + (self.slowdown - 1.0) * compute_s
        return (self.base - 1.0) * compute_s

    def after_compute(self, compute_s: float, elapsed_s: float = 0.0) -> None:
        pause = self.pause_s(compute_s, elapsed_s)
        if pause > 0:
            time.sleep(pause)

    @property
    def bounded(self) -> bool:
        """Slow for a period only (else `base` never applies)."""
        return self.start_s > 0 or self.end_s < math.inf

    def slowed(self, factor: float) -> Straggler:
        """This straggler on a machine `factor` times slower (a time-scaled run, testbed.timescale): its
        delay, its whole compute and its period last `factor` times as long, so it also pauses
        (factor - 1) x a step's compute when it is no straggler at all."""
        return Straggler(self.delay_s * factor, self.slowdown * factor, self.start_s * factor, self.end_s * factor,
                         self.base * factor if self.bounded else self.base)

    def to_dict(self) -> dict[str, float]:
        out = {"delay_s": self.delay_s, "slowdown": self.slowdown}
        if self.start_s > 0:
            out["start_s"] = self.start_s
        if self.end_s < math.inf:
            out["end_s"] = self.end_s
        return out


def parse_stragglers(data: Any, workers: Iterable[str], source: str) -> dict[str, Straggler]:
    """`{"h2": {"delay_s": 0.2, "slowdown": 2, "start_s": 5, "end_s": 15}}` -> {"h2": Straggler(...)};
    names must be workers."""
    if not isinstance(data, dict):
        raise StragglerError(f"{source}: field 'stragglers': expected an object worker -> "
                             f"{{{', '.join(FIELDS)}}}")
    names = set(workers)
    out = {}
    for name, spec in data.items():
        where = f"stragglers.{name}"
        if name not in names:
            raise StragglerError(f"{source}: field '{where}': {name!r} is not a worker")
        if not isinstance(spec, dict) or set(spec) - set(FIELDS):
            raise StragglerError(f"{source}: field '{where}': expected an object with some of {', '.join(FIELDS)}")
        values = {}
        for key, default, low in (("delay_s", 0.0, 0.0), ("slowdown", 1.0, 1.0), ("start_s", 0.0, 0.0),
                                  ("end_s", math.inf, 0.0)):
            value = spec.get(key, default)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or value < low:
                raise StragglerError(f"{source}: field '{where}.{key}': expected a number >= {low:g}, got {value!r}")
            values[key] = float(value)
        if values["end_s"] <= values["start_s"]:
            raise StragglerError(f"{source}: field '{where}.end_s': must be after start_s ({values['start_s']:g})")
        out[name] = Straggler(**values)
    return out


def pick_aggregators(hosts: Iterable[str], workers: Iterable[str], stragglers: Mapping[str, Straggler],
                     count: int = 2) -> list[str]:
    """`count` distinct hosts to aggregate on, idlest first: non-workers, then workers fastest first.

    Workers are ranked by their extra time per step (delay, then slowdown); ties keep the
    workers' order. The first host is the aggregator, the second its replica.
    """
    workers = list(workers)
    idle = [h for h in hosts if h not in workers]
    none = Straggler()
    by_speed = sorted(workers, key=lambda w: (stragglers.get(w, none).delay_s, stragglers.get(w, none).slowdown))
    chosen = (idle + by_speed)[:count]
    if len(chosen) < count:
        raise StragglerError(f"need {count} hosts to aggregate on, the network has {len(chosen)}")
    return chosen
