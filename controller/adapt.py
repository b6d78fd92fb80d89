"""Contention awareness: find congested switch-to-switch links and move aggregation trees off them.

Three small pieces:
- `sample` reads, for every switch port that faces another switch, the bytes sent (the
  egress counter `AggEgress.port_tx`, which counts packets after the traffic manager, so it
  is what the link really carried) and the traffic manager's queue depth and rate.
- `congested_links` compares two samples: a link direction is congested when it ran at
  `util_threshold` of its capacity (the queue's shaped rate, else the topology's bw_mbps) or
  its queue held `qdepth_threshold` packets or more.
- `decide` re-cuts the tree of every job that crosses a congested link with those links made
  expensive, and keeps the new tree only if it crosses fewer of them.

A move keeps the job's root and its aggregating switches; only the path between them
changes. The root holds the completed results that a lagging worker may still ask for, and an
aggregating switch's slot region is what the workers' job spec points at, so a path change is
the one re-placement that needs no new job spec and loses no chunk in flight (workers simply
retransmit what the switch-over dropped). `Adapter` runs the loop against live switches and
applies moves through the Installer.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.installer import plan_job
from controller.monitor import port_counters, queue_stats
from controller.placement import JobPlacement, job_tree, place
from controller.topology import Topology

CONGESTION_PENALTY = 1e6  # predicted load put on a congested link so job_tree avoids it
log = logging.getLogger("aggnet.adapt")

Link = frozenset  # frozenset({switch_a, switch_b})


class AdaptError(Exception):
    """A re-placement that would break the running job (its spec changed); one line, exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class PortSample:
    """One switch port that faces another switch, at one moment."""

    t: float  # seconds, monotonic
    tx_bytes: int
    qdepth: int
    rate_bps: float | None  # the traffic manager's shaping on this port (None: unshaped)


@dataclass(frozen=True)
class Congestion:
    link: str  # "s4-s1": the direction that is congested (from-to)
    utilization: float
    qdepth: int


@dataclass(frozen=True)
class Move:
    job: str
    old: JobPlacement
    new: JobPlacement
    avoided: tuple[str, ...]  # congested links the old tree used and the new one does not

    def describe(self) -> str:
        return (f"job {self.job}: moved off {', '.join(self.avoided)}: tree links "
                f"{', '.join(tree_links(self.old.tree))} -> {', '.join(tree_links(self.new.tree))}")


def trunk_ports(topo: Topology) -> dict[str, list[int]]:
    """switch -> its ports that face another switch."""
    return {s: [link.port_on(s) for link in topo.links_of(s) if topo.is_switch(link.other(s))]
            for s in topo.switches}


def sample(topo: Topology, conns: Mapping[str, Any], clock: Callable[[], float] = time.monotonic
           ) -> dict[tuple[str, int], PortSample]:
    """(switch, port) -> tx bytes, queue depth and shaped rate of every switch-facing port."""
    out = {}
    for s, ports in trunk_ports(topo).items():
        counters = port_counters(conns[s], ports)
        queues = queue_stats(conns[s]) or {}
        now = clock()
        for p in ports:
            q = queues.get(str(p), {})
            out[(s, p)] = PortSample(now, counters[p]["tx_bytes"], int(q.get("qdepth", 0)), q.get("rate_bps"))
    return out


def congested_links(topo: Topology, before: Mapping[tuple[str, int], PortSample],
                    after: Mapping[tuple[str, int], PortSample], util_threshold: float = 0.8,
                    qdepth_threshold: int = 16) -> list[Congestion]:
    """Link directions that were (nearly) full between the two samples, by topology order."""
    found = []
    for (s, p), now in after.items():
        then = before.get((s, p))
        if then is None or now.t <= then.t:
            continue
        link = topo.link_between(s, topo.neighbor_on(s, p))
        capacity = now.rate_bps or (link.bw_mbps * 1e6 if link.bw_mbps else None)
        rate = (now.tx_bytes - then.tx_bytes) * 8 / (now.t - then.t)
        util = rate / capacity if capacity else 0.0
        if util >= util_threshold or now.qdepth >= qdepth_threshold:
            found.append(Congestion(f"{s}-{link.other(s)}", round(util, 3), now.qdepth))
    return found


def tree_links(tree: Any) -> list[str]:
    """The tree's switch-to-switch links as "child-parent", top-down."""
    return [f"{v}-{tree.parent[v]}" for v in tree.order if tree.parent[v] is not None]


def _undirected(name: str) -> Link:
    return frozenset(name.split("-"))


def decide(topo: Topology, placements: list[JobPlacement], congested: Iterable[str],
           algo: str = "soar") -> tuple[list[JobPlacement], list[Move]]:
    """New placements for all jobs (same order) and the moves among them (see the module docstring).

    `congested`: link names "a-b" (either direction counts). Jobs are considered in order;
    each new tree is cut with the congested links penalized and the other jobs' message load
    predicted, and is kept only if it keeps the job's aggregating switches and crosses fewer
    congested links than the current one.
    """
    hot = {_undirected(name) for name in congested}
    current = list(placements)
    moves = []
    for i, jp in enumerate(current):
        crossed = [name for name in tree_links(jp.tree) if _undirected(name) in hot]
        if not crossed or jp.fallback is not None or jp.tree.sink is not None:
            continue
        others = current[:i] + current[i + 1:]
        candidate = _replace_tree(topo, jp, others, hot, algo)
        if candidate is None:
            continue
        still = [name for name in tree_links(candidate.tree) if _undirected(name) in hot]
        if len(still) < len(crossed):
            current[i] = candidate
            avoided = tuple(n for n in crossed if _undirected(n) not in {_undirected(m) for m in still})
            moves.append(Move(jp.job.name, jp, candidate, avoided))
    return current, moves


def _replace_tree(topo: Topology, jp: JobPlacement, others: list[JobPlacement], hot: set[Link],
                  algo: str) -> JobPlacement | None:
    """The job's tree cut around `hot`, same root and aggregating switches; None if that is impossible."""
    load: dict[Link, float] = {link: CONGESTION_PENALTY for link in hot}
    free = {name: sw.slots for name, sw in topo.switches.items()}
    for other in others:
        for name, count in other.placement.messages.items():
            key = _undirected(name)
            load[key] = load.get(key, 0.0) + count
        for s in other.placement.aggregators:
            free[s] -= other.job.slots
    tree = job_tree(topo, list(jp.job.workers), jp.tree.root, load)
    eligible = [s for s in tree.switches if free[s] >= jp.job.slots]
    candidate = replace(jp, tree=tree, placement=place(tree, jp.job.k, algo, eligible))
    if plan_job(candidate, 1).aggregators != plan_job(jp, 1).aggregators:
        return None
    return candidate


class Adapter:
    """The control loop: sample every `period_s`, detect congestion, move trees, reinstall.

    `installer` is the running controller.installer.Installer; `placements` are the jobs it
    has installed (in-network ones), in install order. Every move is recorded in `events`
    with its time since `start()`, for results JSON.
    """

    def __init__(self, topo: Topology, installer: Any, placements: list[JobPlacement], period_s: float = 1.0,
                 util_threshold: float = 0.8, qdepth_threshold: int = 16, algo: str = "soar",
                 clock: Callable[[], float] = time.monotonic):
        self.topo = topo
        self.installer = installer
        self.placements = list(placements)
        self.period_s = period_s
        self.util_threshold = util_threshold
        self.qdepth_threshold = qdepth_threshold
        self.algo = algo
        self.clock = clock
        self.events: list[dict] = []
        self.samples = 0  # switch samples taken: the loop ran (results.json), whether or not anything moved
        self.error: Exception | None = None
        self._last: dict | None = None
        self._t0 = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self) -> list[Move]:
        """One round: sample; on congestion decide and install the moves."""
        now = sample(self.topo, self.installer.connections, self.clock)
        self.samples += 1
        before, self._last = self._last, now
        if before is None:
            return []
        hot = congested_links(self.topo, before, now, self.util_threshold, self.qdepth_threshold)
        if not hot:
            return []
        new, moves = decide(self.topo, self.placements, [c.link for c in hot], self.algo)
        if moves:
            self._apply(new, moves, hot)
        return moves

    def _apply(self, new: list[JobPlacement], moves: list[Move], hot: list[Congestion]) -> None:
        before = {name: (plan.job_id, plan.slot_base) for name, plan in self.installer.plans.items()}
        started = self.clock()
        self.installer.install(new)
        for name, plan in self.installer.plans.items():
            if name in before and (plan.job_id, plan.slot_base) != before[name]:
                raise AdaptError(f"job {name}: re-placement changed its job id or slot region; "
                                 f"its workers' job spec is now wrong")
        self.placements = new
        for move in moves:
            event = {"t_s": round(started - self._t0, 3), "job": move.job, "avoided": list(move.avoided),
                     "tree": tree_links(move.new.tree), "install_s": round(self.clock() - started, 3),
                     "congested": [{"link": c.link, "utilization": c.utilization, "qdepth": c.qdepth} for c in hot]}
            self.events.append(event)
            log.info("%s (install %.3f s)", move.describe(), event["install_s"])

    # -- background thread

    def start(self) -> Adapter:
        self._t0 = self.clock()
        self._thread = threading.Thread(target=self._run, name="aggnet-adapt", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - reported by the scenario, the loop stops
                self.error = exc
                log.error("adaptation stopped: %s", exc)
                return
