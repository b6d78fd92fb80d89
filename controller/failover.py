"""Switch and link failures: notice them, then route and aggregate around them.

Detection (`FailureDetector.poll`, called every `interval_s`):
- a switch is dead when its P4Runtime stream has ended (`SwitchConnection.alive` is
  false: the process exited and gRPC saw the connection close; no RPC per poll);
- a link is down when a switch-side interface of it reports operstate "down" (the port
  status the kernel keeps for the veth; `ip link set ... down` on either end, or Mininet's
  configLinkStatus, shows up there at once).
A failure is thus noticed within one interval plus the moment gRPC needs to see a closed
connection (milliseconds); `detect()` returns the failure and how long it took.

Recovery (`Failover.recover`): the topology without the dead switch or link; routes and the
job's tree recomputed on it (controller.routing, controller.placement); every surviving
switch made to match through a fresh Installer. The job is first removed everywhere and
then installed again, so every aggregating switch gets its slot registers zeroed: slots
that held half-summed chunks of the interrupted step must not answer the resumed one.
Workers that hung off a dead switch cannot be routed around: FailoverError names them.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from controller.installer import Installer, Program
from controller.placement import Job, JobPlacement, place_jobs
from controller.topology import Topology
from protocol.job import JobSpec
from protocol.wire import DEFAULT_ECN_FRACTION

log = logging.getLogger("aggnet.failover")
SYSFS_NET = "/sys/class/net"


class FailoverError(Exception):
    """The network cannot carry the job any more (a worker cut off, nothing left to route on)."""

    exit_code = 1


@dataclass(frozen=True)
class Failure:
    kind: str  # "switch" | "link"
    name: str  # "s1", or "s3-s1" for a link
    detected_after_s: float = 0.0  # from the first poll that could have seen it... to the poll that did

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def surviving_topology(topo: Topology, dead_switches: tuple[str, ...] = (),
                       down_links: tuple[tuple[str, str], ...] = ()) -> Topology:
    """`topo` without the dead switches (and their links) and without the down links."""
    unknown = [s for s in dead_switches if s not in topo.switches]
    if unknown:
        raise FailoverError(f"{topo.source}: no switch named {unknown[0]!r}")
    down = {frozenset(pair) for pair in down_links}
    for pair in down:
        a, b = tuple(pair)
        topo.link_between(a, b)  # KeyError naming the pair when there is no such link
    links = tuple(link for link in topo.links if frozenset((link.a, link.b)) not in down
                  and link.a not in dead_switches and link.b not in dead_switches)
    switches = {n: s for n, s in topo.switches.items() if n not in dead_switches}
    linked = {node for link in links for node in (link.a, link.b)}
    hosts = {n: h for n, h in topo.hosts.items() if n in linked}  # a dead switch's hosts are gone too
    left = dataclasses.replace(topo, hosts=hosts, switches=switches, links=links)
    graph = left.graph()
    if not switches or not nx.is_connected(graph):
        parts = sorted(sorted(c) for c in nx.connected_components(graph)) if switches else []
        lost = ", ".join(list(dead_switches) + [f"{a}-{b}" for a, b in down_links])
        detail = f" ({len(parts)} parts, one is {', '.join(parts[-1])})" if parts else ""
        raise FailoverError(f"{topo.source}: the network falls apart without {lost}{detail}")
    return left


def replan(topo: Topology, job: Job, algo: str = "soar", seed: int = 0) -> JobPlacement:
    """The job's tree and aggregators on `topo`; FailoverError when a worker is cut off."""
    cut = [h for h in job.workers if h not in topo.hosts]
    if cut:
        raise FailoverError(f"job {job.name}: worker(s) {', '.join(cut)} cut off from the others "
                            f"(their switch or every path to them failed)")
    return place_jobs(topo, [job], algo, seed=seed)[0]


class FailureDetector:
    """Polls switches over P4Runtime and switch-to-switch links through interface state."""

    def __init__(self, topo: Topology, connections: Mapping[str, Any], interval_s: float = 0.1,
                 link_state: Callable[[str], str] | None = None):
        self.topo = topo
        self.connections = dict(connections)
        self.interval_s = interval_s
        self.link_state = link_state or interface_state
        self.fabric_links = [link for link in topo.links if topo.is_switch(link.a) and topo.is_switch(link.b)]

    def poll(self) -> Failure | None:
        """The first failure visible now, else None."""
        for name, conn in self.connections.items():
            if not conn.alive:  # its P4Runtime stream ended: the switch process is gone
                log.info("switch %s: P4Runtime stream ended", name)
                return Failure("switch", name)
        for link in self.fabric_links:
            for node in (link.a, link.b):
                if self.link_state(self.topo.intf_name(node, link.port_on(node))) == "down":
                    return Failure("link", f"{link.a}-{link.b}")
        return None

    def detect(self, timeout_s: float) -> Failure | None:
        """Poll until a failure shows (returned with the time since the last clean poll) or timeout."""
        deadline = time.monotonic() + timeout_s
        last_clean = time.monotonic()
        while time.monotonic() < deadline:
            failure = self.poll()
            if failure is not None:
                return dataclasses.replace(failure, detected_after_s=time.monotonic() - last_clean)
            last_clean = time.monotonic()
            time.sleep(self.interval_s)
        return None


def interface_state(intf: str) -> str:
    """The kernel's operstate of an interface ("up", "down", ...); "missing" when it is gone."""
    try:
        with open(os.path.join(SYSFS_NET, intf, "operstate")) as fh:
            state = fh.read().strip()
    except OSError:
        return "missing"
    return "down" if state == "lowerlayerdown" else state


class Failover:
    """Keeps one job running across failures: each `recover` shrinks the topology and reinstalls."""

    def __init__(self, topo: Topology, program: Program, connections: Mapping[str, Any], job: Job,
                 algo: str = "soar", seed: int = 0, agg_ip: str | None = None, timeout_s: float = 0.05,
                 ecn_fraction: float = DEFAULT_ECN_FRACTION):
        self.topo = topo
        self.program = program
        self.connections = dict(connections)
        self.job = job
        self.algo = algo
        self.seed = seed
        self.installer_args: dict[str, Any] = {"timeout_s": timeout_s, "ecn_fraction": ecn_fraction,
                                               **({"agg_ip": agg_ip} if agg_ip else {})}
        self.dead: list[str] = []
        self.down: list[tuple[str, str]] = []
        self.placement: JobPlacement | None = None

    def install(self) -> JobSpec:
        """(Re)install routes and the job on the current topology, zeroing the job's slots."""
        self.placement = replan(self.topo, self.job, self.algo, self.seed)
        installer = Installer(self.topo, self.program, self.connections, **self.installer_args)
        installer.install([])  # the job's entries go first: re-inserting them zeroes every region
        specs, _ = installer.install([self.placement])
        log.info("job %s: root %s, aggregators %s", self.job.name, self.placement.tree.root,
                 ", ".join(sorted(installer.plans[self.job.name].aggregators)))
        return specs[self.job.name]

    def recover(self, failure: Failure) -> JobSpec:
        """Take the failed switch or link out and reinstall; returns the job's new spec."""
        if failure.kind == "switch":
            self.dead.append(failure.name)
            conn = self.connections.pop(failure.name, None)
            if conn is not None:
                conn.close()
            self.topo = surviving_topology(self.topo, dead_switches=(failure.name,))
        else:
            a, b = failure.name.split("-")
            self.down.append((a, b))
            self.topo = surviving_topology(self.topo, down_links=((a, b),))
        log.info("recovering from %s", failure)
        return self.install()
