"""Is this run evidence about the network, or about this machine? (the Mininet-HiFi argument)

An emulation says something about links only while no switch or host process, and not the
machine's cores, is the bottleneck. Mininet-HiFi checks this over the time the experiment's
traffic ran, and so does each run here, over its measured phases:

- a model workload's communication phases: the union over workers of the intervals during which
  any of a worker's bucket all-reduces was in flight. DDP overlaps them with the backward pass,
  so over a whole iteration a link that was saturated whenever it had work averages far below
  its rate (the iteration is mostly compute), and the question is what bound the communication;
- else the workload window (from the first worker's start of the measured work to the last
  worker's end: the timed all-reduce of a benchmark, the training steps of a training run);
- else the whole time the run's host processes ran, when no worker reported either.

Over the phases' total length T it measures:

- every link direction's utilization: bits the switches' port counters saw it carry, over the
  bits the link could carry in T (a direction out of a switch from its tx counter, into a switch
  from its rx counter): its rate over T, plus a full token bucket at the start of each phase (a
  shaped link sends its bucket at once after an idle time: a switch's traffic manager
  DEFAULT_BURST_S of its rate, a sixth of a 30 ms phase, which the rate alone would count as 117%
  busy; a host's tbf two frames, testbed.network.host_tbf_command).
  Counters are read once, after the run: outside the phases hosts send only set-up packets (a
  warm-up all-reduce of a few values, TCP handshakes), a few packets a link, and a model
  workload's compute sends nothing, so the bytes counted are the phases' (a test compares a
  worker link's bytes with its all-reduces' packets: tests/test_e2e_timescale.py);
- every switch process's busy fraction: CPU time it used in the phases over T (a packet loop
  that waits in poll() when idle uses CPU only while it moves packets);
- every host process's CPU use, the same way;
- how busy the machine's cores were (all processes and the kernel's packet work, from
  /proc/stat, on the cores the run may use: `usable_cpus`): many processes on few cores can bind a
  run that no single process does;
- the packets the traffic managers dropped (tail drops and emulated loss), per switch.

CPU times are sampled every SAMPLE_S on a thread of their own and interpolated to each phase's
edges. A scenario (several jobs, background traffic at any time) also samples the bytes every link
direction carried (`LinkMeter`: the kernel's counters of the switches' interfaces), so that one
job's verdict counts only what links carried during that job's phases (`report`'s `link_meter`),
on the links its traffic crosses (`links`), and its own processes (`processes`).

With the link meter the verdict is also resolved in time (`over_time`): the phases cut at its
samples, each slice is bound by a link (one of the links at >= BUSY in it), else by a process (>= BUSY of
a core), else by the cores (>= BUSY), else by nothing, and the report gives each's share of the phases'
time and each link's and process's. Under background
traffic that moves between links (a scenario's elephants, on for 0.4 s then elsewhere) a job's
communication can be bound by a link all the time and by no single link on average.

The bottleneck is what ran closest to its limit: a link direction at >= BUSY of its rate,
else a process at >= BUSY of a core or the cores at >= BUSY. A run whose bottleneck is not a link
gets a one-line warning: its times describe this machine, not the network. When the cores bound
it, the warning ends with the time scale (--scale F') at which the same run would have been
link-bound (`scale_that_binds_links`): the cores were busy c of the time while the busiest link ran
at u of its rate, and at F' = F * c / (u * BUSY) (the next of testbed.timescale.STEPS) the links' time
has grown to cover the same CPU work with the cores below BUSY.
"""
from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from p4target.tm import DEFAULT_BURST_S
from testbed.network import FRAME_BYTES, HOST_BURST_FRAMES
from testbed.timescale import step_up

BUSY = 0.9  # of a link's rate, of one core, or of all cores
SAMPLE_S = 0.05
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MACHINE = "machine"  # the meter's name for all cores together
BOUND_BY = {"link": "links", "process": "processes"}  # over_time's key for each kind's names

Window = tuple[float, float]  # (start, end) on time.monotonic(), one clock for every process here


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, all threads) the process has used so far, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def usable_cpus() -> list[int]:
    """The cores this process may run on (its affinity: `taskset -c 0 aggnet run ...`, a container's
    cpuset), which every process of the run inherits: the machine the run has, not the one it is on."""
    return sorted(os.sched_getaffinity(0))


def machine_busy_seconds() -> float:
    """CPU seconds the usable cores spent not idle since boot (processes, interrupts, the kernel's packet work)."""
    wanted = {f"cpu{n}" for n in usable_cpus()}
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *values = line.split()
            if not name.startswith("cpu"):
                break
            if name in wanted:
                ticks = [int(v) for v in values[:8]]  # user nice system idle iowait irq softirq steal
                busy += sum(ticks) - ticks[3] - ticks[4]
    return busy / CLOCK_TICKS


class Meter:
    """Cumulative counters (`read`) sampled every SAMPLE_S on a thread until stop(); `used` reads
    what any of them grew by in windows of that time."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, int], list[tuple[float, float]]] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def read(self) -> list[tuple[tuple[str, int], float | None]]:
        """((name, id), the counter now; None when it is gone) of every counter."""
        raise NotImplementedError

    def start(self) -> Meter:
        self.sample()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join()
        self.sample()

    def _run(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            try:
                self.sample()
            except (AttributeError, RuntimeError):  # the run changed its processes under us: the next sample sees
                continue

    def sample(self) -> None:
        """Read every counter (one that is gone keeps its last sample as its total)."""
        now = time.monotonic()
        for key, value in self.read():
            if value is not None:
                self.series.setdefault(key, []).append((now, value))

    def span(self) -> Window:
        """From the first sample to the last."""
        times = [t for series in self.series.values() for t, _ in series]
        return (min(times), max(times)) if times else (0.0, 0.0)

    def used(self, *windows: Window) -> dict[str, float]:
        """Per name: what its counters grew by in the windows, added up."""
        out: dict[str, float] = {}
        for (name, _), series in self.series.items():
            spent = sum(_at(series, end) - _at(series, start) for start, end in windows)
            out[name] = out.get(name, 0.0) + spent
        return out


class CpuMeter(Meter):
    """CPU seconds of named processes, and of the machine (MACHINE: summed over all cores)."""

    def __init__(self, pids: Callable[[], Mapping[str, int]]):
        super().__init__()
        self.pids = pids  # asked at every sample: a restarted process comes back under its name

    def read(self) -> list[tuple[tuple[str, int], float | None]]:
        readings: list[tuple[tuple[str, int], float | None]] = [((MACHINE, 0), machine_busy_seconds())]
        return readings + [((name, pid), cpu_seconds(pid)) for name, pid in dict(self.pids()).items()]


class LinkMeter(Meter):
    """Bytes every link direction ("a->b") carried, from a kernel byte counter of an interface of the
    switch at one end (testbed.network.Testbed.link_counter_files)."""

    def __init__(self, files: Mapping[str, str]):
        super().__init__()
        self.files = dict(files)

    def read(self) -> list[tuple[tuple[str, int], float | None]]:
        return [((name, 0), _read_int(path)) for name, path in self.files.items()]


def _read_int(path: str) -> float | None:
    try:
        with open(path) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def _at(series: list[tuple[float, float]], t: float) -> float:
    """A cumulative counter at time t, linear between the samples around it (flat outside them)."""
    i = bisect.bisect_left(series, t, key=lambda sample: sample[0])  # the first sample at or after t
    if i == 0:
        return series[0][1]
    if i == len(series):
        return series[-1][1]
    (t0, v0), (t1, v1) = series[i - 1], series[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1


def workload_window(windows: Iterable[Window]) -> Window | None:
    """From the earliest start to the latest end of the workers' windows; None without any."""
    spans = list(windows)
    return (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None


def union(intervals: Iterable[Window]) -> list[Window]:
    """The intervals merged where they overlap or touch, in order: the time at least one of them covers."""
    out: list[Window] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def intersection(per_worker: Sequence[Iterable[Window]]) -> list[Window]:
    """The time every one of the lists covers: when all workers of a job had an all-reduce in
    flight, the only time a synchronous all-reduce makes progress (a straggler's wait is not)."""
    common: list[Window] | None = None
    for intervals in per_worker:
        mine = union(intervals)
        common = mine if common is None else [(max(a, c), min(b, d)) for a, b in common for c, d in mine
                                              if max(a, c) < min(b, d)]
    return common or []


def link_utilization(topology: Any, counters: Mapping[str, Any], seconds: float, phases: int = 1,
                     carried: Mapping[str, float] | None = None) -> dict[str, float]:
    """"a->b" -> bits carried over bits the link allows in `phases` busy times of `seconds` in all,
    for every shaped link direction the switches' counters saw (unshaped links have no rate to
    compare with); `carried`: the bytes of each direction in the phases instead (a LinkMeter's)."""
    out: dict[str, float] = {}
    if seconds <= 0:
        return out
    for link in topology.links:
        if not link.bw_mbps:
            continue
        rate_bytes = link.bw_mbps * 1e6 / 8
        for src, dst in ((link.a, link.b), (link.b, link.a)):
            name = f"{src}->{dst}"
            if topology.is_switch(src):
                port, key = _port(counters, src, link.port_on(src)), "tx_bytes"
                bucket = max(FRAME_BYTES, rate_bytes * DEFAULT_BURST_S)  # p4target.tm.TokenBucket
            else:
                port, key = _port(counters, dst, link.port_on(dst)), "rx_bytes"
                bucket = HOST_BURST_FRAMES * FRAME_BYTES
            nbytes = carried.get(name) if carried is not None else port[key] if port is not None else None
            if nbytes is not None:  # each phase may start with a full token bucket
                out[name] = round(nbytes / (rate_bytes * seconds + phases * bucket), 3)
    return out


def direction_rates(topology: Any) -> dict[str, float]:
    """"a->b" -> bytes a second, for every direction of every shaped link."""
    return {f"{src}->{dst}": link.bw_mbps * 1e6 / 8 for link in topology.links if link.bw_mbps
            for src, dst in ((link.a, link.b), (link.b, link.a))}


def over_time(rates: Mapping[str, float], phases: Sequence[Window], link_meter: LinkMeter, meter: CpuMeter,
              ncores: int, processes: Collection[str]) -> dict:
    """What bound each slice of the phases, cut at the link meter's samples (module docstring), in `assess`'s
    order: a link at >= BUSY of its rate, else one of `processes` at >= BUSY of a core, else the cores, else
    nothing. The share of the phases' time each kind bound ("link", "process", "machine", "none"), and
    each link's and process's ("links", "processes")."""
    samples = sorted({t for series in link_meter.series.values() for t, _ in series})
    shares = {"link": 0.0, "process": 0.0, "machine": 0.0, "none": 0.0}
    named: dict[str, dict[str, float]] = {"link": {}, "process": {}}
    total = 0.0
    for start, end in phases:
        cuts = [start, *(t for t in samples if start < t < end), end]
        for a, b in zip(cuts, cuts[1:]):
            seconds = b - a
            carried, used = link_meter.used((a, b)), meter.used((a, b))
            loads = {"link": {n: carried[n] / (rate * seconds) for n, rate in rates.items() if n in carried},
                     "process": {n: used[n] / seconds for n in processes if n in used}}
            kind = next((k for k in ("link", "process") if max(loads[k].values(), default=0.0) >= BUSY), None)
            if kind is not None:
                busiest = max(loads[kind], key=loads[kind].__getitem__)
                named[kind][busiest] = named[kind].get(busiest, 0.0) + seconds
            else:
                kind = "machine" if used.get(MACHINE, 0.0) / (ncores * seconds) >= BUSY else "none"
            shares[kind] += seconds
            total += seconds
    if total <= 0:
        return {}
    return {**{k: round(v / total, 3) for k, v in shares.items()},
            **{BOUND_BY[kind]: {n: round(v / total, 3) for n, v in sorted(times.items(), key=lambda kv: -kv[1])}
               for kind, times in named.items()}}


def link_bound_seconds(topology: Any, counters: Mapping[str, Any]) -> float | None:
    """The time the busiest shaped link direction needed for the bytes it carried, at its rate: how long the
    run's traffic takes when the links bind it. None when no shaped link carried anything."""
    busiest = None
    for link in topology.links:
        if not link.bw_mbps:
            continue
        for src, dst in ((link.a, link.b), (link.b, link.a)):
            port = _port(counters, src, link.port_on(src)) if topology.is_switch(src) else \
                _port(counters, dst, link.port_on(dst))
            carried = None if port is None else port["tx_bytes" if topology.is_switch(src) else "rx_bytes"]
            if carried:
                seconds = carried * 8 / (link.bw_mbps * 1e6)
                busiest = seconds if busiest is None else max(busiest, seconds)
    return busiest


def scale_that_binds_links(bottleneck: Mapping[str, Any] | None, links: Mapping[str, float], factor: float) -> float | None:
    """The time scale at which a run the cores bound would have been link-bound (module docstring); None when
    the cores did not bind it or no shaped link carried its traffic."""
    busiest = max(links.values(), default=0.0)
    if not bottleneck or bottleneck["kind"] != "machine" or busiest <= 0:
        return None
    return step_up(factor * bottleneck["load"] / (busiest * BUSY))


def _port(counters: Mapping[str, Any], switch: str, port: int) -> Mapping[str, int] | None:
    ports = counters.get(switch, {}).get("ports", {})
    return ports.get(port, ports.get(str(port)))


def queue_drops(queues: Mapping[str, Any]) -> dict[str, int]:
    """Per switch: packets its traffic manager dropped (tail drops and emulated loss, all ports)."""
    return {switch: sum(q.get("tail_drops", 0) + q.get("loss_drops", 0) for q in ports.values())
            for switch, ports in queues.items() if ports}


def assess(links: Mapping[str, float], switches: Mapping[str, float], hosts: Mapping[str, float],
           cores: float | None = None, ncores: int = 1, scale: float = 1.0) -> dict:
    """The bottleneck and, when something other than a link bound the run, a one-line warning (with the time
    scale that would have let the links bind, when the cores bound it: `links_bind_at_scale`)."""
    candidates = [("link", name, u) for name, u in links.items()]
    candidates += [("switch", name, u) for name, u in switches.items()]
    candidates += [("host process", name, u) for name, u in hosts.items()]
    if cores is not None:
        candidates.append(("machine", f"{ncores} cores", cores))
    if not candidates:
        return {"bottleneck": None, "warning": None, "links_bind_at_scale": None}
    kind, name, load = max(candidates, key=lambda c: (c[2] >= BUSY, c[0] == "link", c[0] != "machine", c[2]))
    bottleneck = {"kind": kind, "name": name, "load": load} if load >= BUSY else None
    warning = None
    if bottleneck and kind != "link":
        what = (f"the machine's {ncores} cores were {load:.0%} busy" if kind == "machine"
                else f"{kind} {name} was busy {load:.0%} of a core")
        busiest = max(links.values(), default=0.0)
        warning = (f"fidelity: {what} while the busiest link ran at {busiest:.0%} of its rate: "
                   f"this run measured the machine, not the network")
    needed = scale_that_binds_links(bottleneck, links, scale)
    if warning and needed is not None:
        warning += f"; at --scale {needed:g} the links would have bound it"
    return {"bottleneck": bottleneck, "warning": warning, "links_bind_at_scale": needed}


def report(topology: Any, counters: Mapping[str, Any], queues: Mapping[str, Any], phases: Sequence[Window],
           measured_over: str, meter: CpuMeter, switch_names: set[str], scale: float = 1.0,
           link_meter: LinkMeter | None = None, links: Collection[str] | None = None,
           processes: Collection[str] | None = None) -> dict:
    """The `fidelity` section of results.json (see the module docstring), measured over the phases
    (disjoint windows) of a run at time scale `scale`; measured_over says what they are ("communication",
    "workload" or "run"). With `link_meter` the links' bytes are what it saw in the phases; `links` and
    `processes` keep only those link directions and host processes (one job's, in a scenario)."""
    seconds = sum(end - start for start, end in phases)
    carried = link_meter.used(*phases) if link_meter is not None and seconds > 0 else None
    util = link_utilization(topology, counters, seconds, len(phases), carried)
    util = {n: u for n, u in util.items() if links is None or n in links}
    used = meter.used(*phases) if seconds > 0 else {}
    ncores = len(usable_cpus())
    cores = round(used.pop(MACHINE) / (ncores * seconds), 3) if MACHINE in used else None
    cpu = {n: round(u / seconds, 3) for n, u in used.items()}
    switches = {n: u for n, u in cpu.items() if n in switch_names}
    hosts = {n: u for n, u in cpu.items() if n not in switch_names and (processes is None or n in processes)}
    out = {"seconds": round(seconds, 3), "measured_over": measured_over, "phases": len(phases),
           "link_utilization": util, "switch_busy": switches, "host_cpu": hosts, "cores_busy": cores,
           "queue_drops": queue_drops(queues), **assess(util, switches, hosts, cores, ncores, scale)}
    if link_meter is not None and seconds > 0:
        rates = {n: r for n, r in direction_rates(topology).items() if links is None or n in links}
        out["over_time"] = over_time(rates, phases, link_meter, meter, ncores, {*switches, *hosts})
    return out
