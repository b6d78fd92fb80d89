"""Emulated slow workers, and who should aggregate while they lag.

A straggler is a worker whose compute takes longer: a fixed delay per step (a busy or
remote worker) and/or a slowdown factor (a worker with a fraction of a CPU: every step's
compute takes `slowdown` times as long), for the whole run or for a window of it: from
start_s to end_s seconds (the cluster's time) after the end of its first step, when every
worker has started (aggnet run --straggle). Besides, periods of a schedule (a scenario's
stragglers: testbed.timeline) make compute take a factor as long again; they are on
time.monotonic() (the clock every process on the machine shares), so that every job of a
scenario sees the cluster's one timeline. All are emulated by sleeping after the backward pass
(a model workload stretches its slept compute instead), which the step time then includes, so a
slow worker is slow in every scheme alike.

The agent config names them: `"stragglers": {"h2": {"delay_s": 0.2, "start_s": 5, "end_s": 15,
"periods": [[START, END, FACTOR], ...]}}`.

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

FIELDS = ("delay_s", "slowdown", "start_s", "end_s", "periods")


class StragglerError(ValueError):
    """A malformed straggler entry; names the source and the field."""

    exit_code = 2


Period = tuple[float, float, float]  # (start, end) on time.monotonic(), and the factor in between


@dataclass(frozen=True)
class Straggler:
    delay_s: float = 0.0  # added to every step's compute
    slowdown: float = 1.0  # compute takes this many times as long (>= 1)
    start_s: float = 0.0  # slow from this long after the first step ...
    end_s: float = math.inf  # ... until this long after it
    base: float = 1.0  # the slowdown outside [start_s, end_s): 1, or the time scale (slowed)
    periods: tuple[Period, ...] = ()  # compute takes this many times as long again in each period

    def slowing(self, elapsed_s: float = 0.0, now: float | None = None) -> tuple[float, float]:
        """(delay, factor): a step's compute that ends `elapsed_s` after the first step, at `now` on
        time.monotonic() (default: now), takes factor x as long plus delay."""
        delay, factor = (self.delay_s, self.slowdown) if self.start_s <= elapsed_s < self.end_s else (0.0, self.base)
        now = time.monotonic() if now is None else now
        return delay, factor * max((f for start, end, f in self.periods if start <= now < end), default=1.0)

    def pause_s(self, compute_s: float, elapsed_s: float = 0.0, now: float | None = None) -> float:
        """How long to sleep after a step's compute that took `compute_s`, `elapsed_s` after the first step."""
        delay, factor = self.slowing(elapsed_s, now)
        return delay + (factor - 1.0) * compute_s

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
        delay, its whole compute and its window last `factor` times as long, so it also pauses
        (factor - 1) x a step's compute when it is no straggler at all (its periods are on the
        machine's clock already)."""
        return Straggler(self.delay_s * factor, self.slowdown * factor, self.start_s * factor, self.end_s * factor,
                         self.base * factor if self.bounded else self.base, self.periods)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"delay_s": self.delay_s, "slowdown": self.slowdown}
        if self.start_s > 0:
            out["start_s"] = self.start_s
        if self.end_s < math.inf:
            out["end_s"] = self.end_s
        if self.periods:
            out["periods"] = [list(p) for p in self.periods]
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
            if not _number(value) or math.isnan(value) or value < low:
                raise StragglerError(f"{source}: field '{where}.{key}': expected a number >= {low:g}, got {value!r}")
            values[key] = float(value)
        if values["end_s"] <= values["start_s"]:
            raise StragglerError(f"{source}: field '{where}.end_s': must be after start_s ({values['start_s']:g})")
        out[name] = Straggler(**values, periods=_periods(spec.get("periods", []), f"{source}: field '{where}.periods'"))
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _periods(data: Any, where: str) -> tuple[Period, ...]:
    """[[start, end, factor], ...] with start < end and factor >= 1."""
    if not isinstance(data, list):
        raise StragglerError(f"{where}: expected a list of [start, end, factor]")
    out = []
    for i, p in enumerate(data):
        if not (isinstance(p, list) and len(p) == 3 and all(_number(v) for v in p) and p[0] < p[1] and p[2] >= 1):
            raise StragglerError(f"{where}[{i}]: expected [start, end, factor] with start < end and factor >= 1, "
                                 f"got {p!r}")
        out.append((float(p[0]), float(p[1]), float(p[2])))
    return tuple(out)


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
