"""Is this run evidence about the network, or about this machine? (the Mininet-HiFi argument)

An emulation says something about links only while no switch or host process is the
bottleneck. Each run measures, over the time its host processes run:

- every link direction's utilization: bits the switches' port counters saw it carry, over the
  link's rate and that time (a direction out of a switch from its tx counter, into a switch
  from its rx counter);
- every switch process's busy fraction: CPU time it used over the wall time (a packet loop that
  waits in poll() when idle uses CPU only while it moves packets);
- every host process's CPU use, the same way;
- the packets the traffic managers dropped (tail drops and emulated loss), per switch.

The bottleneck is what ran closest to its limit: a link direction at >= BUSY of its rate, else a
process at >= BUSY of a core. A run whose bottleneck is a process gets a one-line warning: its
times describe this machine, not the network.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BUSY = 0.9  # of a link's rate, or of one core
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) the process has used so far, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@dataclass
class CpuMeter:
    """CPU seconds of named processes between start() and the last sample() before they ended."""

    started: float = 0.0
    first: dict[str, float] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    last_at: dict[str, float] = field(default_factory=dict)

    def start(self, pids: Mapping[str, int]) -> None:
        self.started = time.monotonic()
        self.sample(pids)

    def sample(self, pids: Mapping[str, int]) -> None:
        """Read every live process's CPU time (call often: a process's last sample is its total)."""
        now = time.monotonic()
        for name, pid in pids.items():
            used = cpu_seconds(pid)
            if used is None:
                continue
            self.first.setdefault(name, used)
            self.last[name], self.last_at[name] = used, now

    def fractions(self) -> dict[str, float]:
        """Per process: CPU seconds used over the seconds it was watched (1.0 = one core)."""
        out = {}
        for name, used in self.last.items():
            wall = self.last_at[name] - self.started
            if wall > 0:
                out[name] = round((used - self.first[name]) / wall, 3)
        return out


def link_utilization(topology: Any, counters: Mapping[str, Any], seconds: float) -> dict[str, float]:
    """"a->b" -> bits carried over bits the link's rate allows in `seconds`, for every shaped link
    direction the switches' counters saw (unshaped links have no rate to compare with)."""
    out: dict[str, float] = {}
    if seconds <= 0:
        return out
    for link in topology.links:
        if not link.bw_mbps:
            continue
        for src, dst in ((link.a, link.b), (link.b, link.a)):
            if topology.is_switch(src):
                sent = _port(counters, src, link.port_on(src))
                carried = sent["tx_bytes"] if sent is not None else None
            else:
                got = _port(counters, dst, link.port_on(dst))
                carried = got["rx_bytes"] if got is not None else None
            if carried is not None:
                out[f"{src}->{dst}"] = round(carried * 8 / (link.bw_mbps * 1e6 * seconds), 3)
    return out


def _port(counters: Mapping[str, Any], switch: str, port: int) -> Mapping[str, int] | None:
    ports = counters.get(switch, {}).get("ports", {})
    return ports.get(port, ports.get(str(port)))


def queue_drops(queues: Mapping[str, Any]) -> dict[str, int]:
    """Per switch: packets its traffic manager dropped (tail drops and emulated loss, all ports)."""
    return {switch: sum(q.get("tail_drops", 0) + q.get("loss_drops", 0) for q in ports.values())
            for switch, ports in queues.items() if ports}


def assess(links: Mapping[str, float], switches: Mapping[str, float], hosts: Mapping[str, float]) -> dict:
    """The bottleneck and, when a process rather than a link bound the run, a one-line warning."""
    candidates = [("link", name, u) for name, u in links.items()]
    candidates += [("switch", name, u) for name, u in switches.items()]
    candidates += [("host process", name, u) for name, u in hosts.items()]
    if not candidates:
        return {"bottleneck": None, "warning": None}
    kind, name, load = max(candidates, key=lambda c: (c[2] >= BUSY, c[0] == "link", c[2]))
    bottleneck = {"kind": kind, "name": name, "load": load} if load >= BUSY else None
    warning = None
    if bottleneck and kind != "link":
        busiest = max(links.values(), default=0.0)
        warning = (f"fidelity: {kind} {name} was busy {load:.0%} of a core while the busiest link ran at "
                   f"{busiest:.0%} of its rate: this run measured the machine, not the network")
    return {"bottleneck": bottleneck, "warning": warning}


def report(topology: Any, counters: Mapping[str, Any], queues: Mapping[str, Any], seconds: float,
           cpu: Mapping[str, float], switch_names: set[str]) -> dict:
    """The `fidelity` section of results.json (see the module docstring)."""
    links = link_utilization(topology, counters, seconds)
    switches = {n: u for n, u in cpu.items() if n in switch_names}
    hosts = {n: u for n, u in cpu.items() if n not in switch_names}
    return {"seconds": round(seconds, 3), "link_utilization": links, "switch_busy": switches, "host_cpu": hosts,
            "queue_drops": queue_drops(queues), **assess(links, switches, hosts)}
