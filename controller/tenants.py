"""Admission of several training jobs onto one fabric: who gets in-network aggregation.

Each switch has a slot budget (`slots` in the topology, or a scenario's override) that the
jobs aggregating on it share. `admit` places the jobs in the order given with those budgets
in force (controller.placement.place_jobs does the sharing), then says for every job, in one
line, whether it got in-network capacity, fell back to host aggregation, or, under the
"reject" policy, was turned away. Scenario results carry these lines verbatim.

`isolation_risks` names the places where aggnet.p4 cannot keep jobs apart: a switch that
only forwards for job A (aggregate=0) passes on any packet carrying A's job id, whatever
port it came in on, so a host of another job attached there could inject into A's tree.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Mapping

from controller.placement import Job, JobPlacement, PlacementError, place_jobs
from controller.topology import Topology

POLICIES = ("downgrade", "reject")
IN_NETWORK, HOST, REJECTED = "in-network", "host", "rejected"


@dataclass(frozen=True)
class Admission:
    """The admission decision for one job, with the one-line message a user reads."""

    job: str
    status: str  # IN_NETWORK | HOST | REJECTED
    aggregators: tuple[str, ...]  # switches holding the job's slots (empty unless in-network)
    slots: int
    message: str

    def to_json(self) -> dict:
        return {"job": self.job, "status": self.status, "aggregators": list(self.aggregators),
                "slots": self.slots, "message": self.message}


@dataclass(frozen=True)
class Tenancy:
    """Every admitted job's placement plus the decision for every job asked for."""

    placements: tuple[JobPlacement, ...]  # in-network and host-aggregated jobs, not rejected ones
    admissions: tuple[Admission, ...]

    def in_network(self) -> list[JobPlacement]:
        """The placements the installer puts into the switches."""
        return [jp for jp in self.placements if jp.fallback is None and jp.tree.sink is None]

    def admission(self, job: str) -> Admission:
        return next(a for a in self.admissions if a.job == job)


def with_slot_budgets(topo: Topology, budgets: Mapping[str, int]) -> Topology:
    """The topology with some switches' slot budgets replaced (PlacementError naming an unknown switch)."""
    for name, slots in budgets.items():
        if name not in topo.switches:
            raise PlacementError(f"slots: '{name}' is not a switch of {topo.source}")
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
            raise PlacementError(f"slots.{name}: must be an integer >= 0, got {slots!r}")
    switches = {name: dataclasses.replace(sw, slots=budgets.get(name, sw.slots)) for name, sw in topo.switches.items()}
    return dataclasses.replace(topo, switches=switches)


def admit(topo: Topology, jobs: Iterable[Job], algo: str = "soar", policy: str = "downgrade",
          weight_mode: str = "unit") -> Tenancy:
    """Place the jobs in order within the slot budgets; decide and explain each job's fate."""
    if policy not in POLICIES:
        raise PlacementError(f"policy: unknown admission policy '{policy}' (choose from {', '.join(POLICIES)})")
    placements, admissions = [], []
    for jp in place_jobs(topo, list(jobs), algo, weight_mode):
        decision = _decide(jp, policy)
        admissions.append(decision)
        if decision.status != REJECTED:
            placements.append(jp)
    return Tenancy(tuple(placements), tuple(admissions))


def _decide(jp: JobPlacement, policy: str) -> Admission:
    name, slots = jp.job.name, jp.job.slots
    if jp.fallback is None and jp.tree.sink is None:
        where = ", ".join(jp.placement.aggregators)
        return Admission(name, IN_NETWORK, jp.placement.aggregators, slots,
                         f"job {name}: in-network aggregation on {where} ({slots} slots each)")
    reason = jp.fallback or f"its sum goes to host '{jp.tree.sink}'"
    if policy == "reject":
        return Admission(name, REJECTED, (), slots, f"job {name}: rejected: no in-network capacity ({reason})")
    return Admission(name, HOST, (), slots,
                     f"job {name}: downgraded to host aggregation: no in-network capacity ({reason})")


def isolation_risks(topo: Topology, placements: Iterable[JobPlacement]) -> list[str]:
    """One line per (job, forwarding switch, foreign host): where another tenant could inject.

    Forwarding-only switches of a job's tree are its non-aggregating switches; the installer
    may still promote some of them, so this over-approximates (it never misses a risk).
    """
    placements = [jp for jp in placements if jp.fallback is None and jp.tree.sink is None]
    risks = []
    for jp in placements:
        aggregators = set(jp.placement.aggregators) | {jp.tree.root}
        for switch in jp.tree.switches:
            if switch in aggregators:
                continue
            foreign = [h for h in topo.hosts_of(switch) if h not in jp.job.workers]
            risks += [f"job {jp.job.name}: switch {switch} only forwards for it and host {h} "
                      f"(not one of its workers) is attached there" for h in foreign]
    return risks
