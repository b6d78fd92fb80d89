"""A scenario's dynamic conditions, seeded and reproducible, as one timeline in the cluster's time.

A scenario file (testbed.scenario) describes what changes while its jobs run; `build` turns it into
a `Timeline` (the same for every mode, and for every run with the same seed):

- jobs arrive at their `start_s` and leave when their iterations (or steps) are done;
- background traffic: the periodic flows of `traffic[]` (on/off), flows drawn from a distribution
  (`random_traffic[]`: arrivals a Poisson process, sizes Pareto, heavy-tailed, each sent at its
  rate between a random source and destination of the lists) and flows replayed from a trace
  file (`trace_traffic[]`, format below). Flows between the same two hosts share one sender
  (`BackgroundFlow`), whose rate at any time is the sum of the flows it sends then;
- stragglers: a worker whose compute takes `factor` times as long in a period, on a schedule
  (`stragglers[]`) or at random (`random_stragglers[]`: periods starting as a Poisson process, each
  on a worker drawn from the list).

Every time and rate is the cluster's (`scale: F` runs it F times slower, and a scenario of model jobs
sending G of their gradients sends G of every flow: `Timeline.scaled`). Random
draws come from one stream per entry, seeded by the scenario's seed and the entry's place, so adding
an entry leaves the others' draws alone.

A trace file is CSV, one flow a line, `#` starting a comment:

    # start_s, src, dst, size_mb, rate_mbps[, proto]
    0.5, h3, h6, 120, 40000
    1.2, h6, h9, 8.5, 25000, tcp

A flow sends size_mb megabytes (10**6) at rate_mbps from start_s on (the cluster's seconds after
the scenario starts); proto is udp (default) or tcp. A line that cannot be read is one error naming
the file and line.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import FieldProblem, option
from hosts.traffic import PROTOCOLS, Interval, periodic

TRAFFIC_PORT_BASE = 5001
# Interval: (start_s, end_s, rate_mbps) of a sender, (start_s, end_s, factor) of a worker


class TraceError(ValueError):
    """A trace file that cannot be replayed: one line naming the file and line."""

    exit_code = 2


@dataclass(frozen=True)
class RandomTraffic:
    """Background flows drawn from a distribution: Poisson arrivals, Pareto (heavy-tailed) sizes."""

    name: str = option(help="these flows' name (their senders are NAME.SRC-DST)")
    src: tuple[str, ...] = option((), help="hosts a flow may come from")
    dst: tuple[str, ...] = option((), help="hosts a flow may go to (never its source)")
    proto: str = option("udp", choices=PROTOCOLS)
    rate_mbps: float = option(1000.0, minimum=1e-3, help="each flow's rate (the cluster's Mb/s)")
    mean_size_mb: float = option(10.0, minimum=1e-6, help="mean flow size (MB)")
    shape: float = option(1.5, minimum=1.01, maximum=10.0, help="Pareto shape of the sizes (smaller: heavier tail)")
    mean_gap_s: float = option(1.0, minimum=1e-6, help="mean time between flow arrivals (exponential)")
    start_s: float = option(0.0, minimum=0, help="first possible arrival")
    until_s: float = option(10.0, minimum=1e-6, help="no flow arrives or sends after this")
    size: int = option(1400, minimum=1, maximum=65000, help="bytes a write")

    def __post_init__(self) -> None:
        if not self.src or not self.dst:
            raise FieldProblem("src" if not self.src else "dst", "name at least one host")
        if all(d == s for s in self.src for d in self.dst):
            raise FieldProblem("dst", "a flow needs two different hosts")
        if self.until_s <= self.start_s:
            raise FieldProblem("until_s", f"must be after start_s ({self.start_s:g}), got {self.until_s:g}")


@dataclass(frozen=True)
class TraceTraffic:
    """Background flows replayed from a trace file (module docstring: the format)."""

    file: str = option(help="CSV trace (a path, relative to the scenario file)")
    name: str = option("trace", help="these flows' name (their senders are NAME.SRC-DST)")
    size: int = option(1400, minimum=1, maximum=65000, help="bytes a write")


@dataclass(frozen=True)
class SlowPeriod:
    """A straggler on a schedule: `worker`'s compute takes `factor` times as long for a while."""

    worker: str = option(help="the worker host")
    factor: float = option(2.0, minimum=1.0, help="compute takes this many times as long")
    start_s: float = option(0.0, minimum=0, help="when it starts (the cluster's seconds)")
    duration_s: float = option(1.0, minimum=1e-6)


@dataclass(frozen=True)
class RandomStragglers:
    """Stragglers at random: periods starting as a Poisson process, each on a worker drawn from `workers`."""

    workers: tuple[str, ...] = option((), help="workers that may straggle (default: every job's)")
    factor: float = option(2.0, minimum=1.0)
    duration_s: float = option(1.0, minimum=1e-6, help="each period's length")
    mean_gap_s: float = option(5.0, minimum=1e-6, help="mean time between period starts (exponential)")
    start_s: float = option(0.0, minimum=0)
    until_s: float = option(60.0, minimum=1e-6, help="no period starts after this")


@dataclass(frozen=True)
class BackgroundFlow:
    """One sender of background traffic and its schedule: at any time it sends the sum of the rates of
    the intervals it is in."""

    name: str
    src: str
    dst: str
    proto: str
    port: int
    size: int  # bytes a write
    intervals: tuple[Interval, ...]

    @property
    def end_s(self) -> float:
        return max((end for _, end, _ in self.intervals), default=0.0)

    @property
    def megabytes(self) -> float:
        """What its schedule sends (MB)."""
        return sum((end - start) * rate / 8 for start, end, rate in self.intervals)


@dataclass(frozen=True)
class Timeline:
    """When jobs arrive, what background traffic runs, when workers straggle (module docstring)."""

    arrivals: Mapping[str, float]  # job -> start_s
    flows: tuple[BackgroundFlow, ...]
    slowdowns: Mapping[str, tuple[Interval, ...]]  # worker -> (start_s, end_s, factor)

    def scaled(self, factor: float, data_scale: float = 1.0) -> Timeline:
        """The same timeline on a machine `factor` times slower: times x factor, rates / factor; rates
        also x data_scale when every byte of the cluster is sent at that fraction (testbed.scenario)."""
        if factor == 1 and data_scale == 1:
            return self
        flows = tuple(dataclasses.replace(f, intervals=tuple((s * factor, e * factor, r * data_scale / factor)
                                                             for s, e, r in f.intervals)) for f in self.flows)
        return Timeline({j: t * factor for j, t in self.arrivals.items()}, flows,
                        {w: tuple((s * factor, e * factor, f) for s, e, f in ps) for w, ps in self.slowdowns.items()})

    def to_json(self) -> dict:
        """What results.json records (the cluster's time)."""
        return {"arrivals": dict(self.arrivals),
                "flows": [{"name": f.name, "src": f.src, "dst": f.dst, "proto": f.proto, "port": f.port,
                           "megabytes": round(f.megabytes, 3), "intervals": [list(i) for i in f.intervals]}
                          for f in self.flows],
                "slowdowns": {w: [list(p) for p in ps] for w, ps in self.slowdowns.items()}}


def build(scn: Any, seed: int) -> Timeline:
    """The timeline of scenario `scn` (testbed.scenario.Scenario, checked against its topology).
    `traffic[i]` is named flow<i+1> and uses port 5001 + i unless it says otherwise; the other
    senders take the next ports no flow uses."""
    flows = [BackgroundFlow(f.name or f"flow{i + 1}", f.src, f.dst, f.proto, f.port or TRAFFIC_PORT_BASE + i, f.size,
                            periodic(f.start_s, f.duration_s, f.on_s, f.off_s, f.rate_mbps))
             for i, f in enumerate(scn.traffic)]
    drawn: list[tuple[str, int, list[tuple[str, str, str, Interval]]]] = []
    for i, r in enumerate(scn.random_traffic):
        drawn.append((r.name, r.size, draw_flows(r, random.Random(f"{seed}:random_traffic:{i}"))))
    for t in scn.trace_traffic:
        drawn.append((t.name, t.size, read_trace(t.file)))
    used = {f.port for f in flows}
    port = TRAFFIC_PORT_BASE
    for name, size, items in drawn:
        for (src, dst, proto), intervals in _by_pair(items).items():
            while port in used:
                port += 1
            used.add(port)
            flows.append(BackgroundFlow(f"{name}.{src}-{dst}", src, dst, proto, port, size, tuple(intervals)))
    slowdowns: dict[str, list[Interval]] = {}
    for p in scn.stragglers:
        slowdowns.setdefault(p.worker, []).append((p.start_s, p.start_s + p.duration_s, p.factor))
    every_worker = [w for job in scn.jobs for w in job.workers]
    for i, r in enumerate(scn.random_stragglers):
        for worker, period in draw_stragglers(r, r.workers or tuple(every_worker),
                                              random.Random(f"{seed}:random_stragglers:{i}")):
            slowdowns.setdefault(worker, []).append(period)
    return Timeline({job.name: job.start_s for job in scn.jobs}, tuple(flows),
                    {w: tuple(sorted(ps)) for w, ps in slowdowns.items()})


def draw_flows(r: RandomTraffic, rng: random.Random) -> list[tuple[str, str, str, Interval]]:
    """(src, dst, proto, interval) of every flow `r` draws: arrivals a Poisson process from start_s,
    sizes Pareto with mean mean_size_mb, each sent at rate_mbps, cut at until_s."""
    scale_mb = r.mean_size_mb * (r.shape - 1) / r.shape  # a Pareto's minimum, for that mean
    out: list[tuple[str, str, str, Interval]] = []
    t = r.start_s
    while True:
        t += rng.expovariate(1 / r.mean_gap_s)
        if t >= r.until_s:
            return out
        size_mb = scale_mb * rng.paretovariate(r.shape)
        src = rng.choice(r.src)
        dst = rng.choice([d for d in r.dst if d != src] or [None])
        if dst is not None:
            out.append((src, dst, r.proto, (t, min(t + size_mb * 8 / r.rate_mbps, r.until_s), r.rate_mbps)))


def draw_stragglers(r: RandomStragglers, workers: Sequence[str], rng: random.Random) -> list[tuple[str, Interval]]:
    """(worker, (start, end, factor)) of every period `r` draws."""
    out: list[tuple[str, Interval]] = []
    t = r.start_s
    while True:
        t += rng.expovariate(1 / r.mean_gap_s)
        if t >= r.until_s:
            return out
        out.append((rng.choice(list(workers)), (t, t + r.duration_s, r.factor)))


def read_trace(path: str) -> list[tuple[str, str, str, Interval]]:
    """The flows of a trace file (module docstring); TraceError names the file and line."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from None
    out = []
    for number, row in enumerate(csv.reader(text.splitlines()), 1):
        cells = [c.strip() for c in row]
        if not cells or not cells[0] or cells[0].startswith("#"):
            continue
        where = f"{path}:{number}"
        if len(cells) not in (5, 6):
            raise TraceError(f"{where}: expected start_s, src, dst, size_mb, rate_mbps[, proto], got {len(cells)} "
                             "fields")
        start, size, rate = (_number(cells[i], where, name, low) for i, name, low in
                             ((0, "start_s", 0.0), (3, "size_mb", 1e-9), (4, "rate_mbps", 1e-9)))
        proto = cells[5] if len(cells) == 6 else "udp"
        if proto not in PROTOCOLS:
            raise TraceError(f"{where}: proto {proto!r} is not one of {', '.join(PROTOCOLS)}")
        if cells[1] == cells[2]:
            raise TraceError(f"{where}: a flow needs two different hosts, got {cells[1]} twice")
        out.append((cells[1], cells[2], proto, (start, start + size * 8 / rate, rate)))
    return out


def _number(text: str, where: str, name: str, low: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {name} {text!r} is not a number") from None
    if not math.isfinite(value) or value < low:
        raise TraceError(f"{where}: {name} must be {'>= 0' if low == 0 else '> 0'}, got {text}")
    return value


def trace_hosts(path: str) -> set[str]:
    """Every host a trace file names."""
    return {h for src, dst, _, _ in read_trace(path) for h in (src, dst)}


def _by_pair(items: Iterable[tuple[str, str, str, Interval]]) -> dict[tuple[str, str, str], list[Interval]]:
    out: dict[tuple[str, str, str], list[Interval]] = {}
    for src, dst, proto, interval in items:
        out.setdefault((src, dst, proto), []).append(interval)
    return {pair: sorted(intervals) for pair, intervals in out.items()}
