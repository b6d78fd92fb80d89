"""Admission of several training jobs onto one fabric: who gets in-network aggregation.

Each switch has a slot budget (`slots` in the topology, or a scenario's override) that the
jobs aggregating on it share. `admit` places the jobs in the order given with those budgets
in force (controller.placement.place_jobs does the sharing), then says for every job, in one
line, whether it got in-network capacity, fell back to host aggregation, or, under the
"reject" policy, was turned away. Under "move" a job whose switches are full is first placed
on other switches that have the slots (controller.placement.jobs), and falls back only when
none does. Scenario results carry these lines verbatim.

`share` is ATP's way instead (NSDI'21): no admission at all. Every job aggregates at its root,
in a pool of the root's slots that the jobs rooted there share; a chunk that finds its slot
held by another job's spills to its job's parameter server (aggnet.p4's set_shared_job), so
the switch's memory goes to whichever chunks hold it at the time, and nobody is turned away.

Isolation needs no admission rule: every switch of a job's tree, forwarding or aggregating,
admits the job's contributions only from the ports below it and results only from its parent
port (aggnet.p4, controller.installer), so another tenant's host cannot reach the job's sums.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.placement import Job, JobPlacement, PlacementError, place_jobs
from controller.topology import Topology

POLICIES = ("downgrade", "reject", "move")
IN_NETWORK, HOST, REJECTED, SHARED = "in-network", "host", "rejected", "shared"
UNLIMITED = 1 << 30  # a slot budget that never runs out (sharing places jobs without budgets)


@dataclass(frozen=True)
class Admission:
    """The admission decision for one job, with the one-line message a user reads."""

    job: str
    status: str  # IN_NETWORK | HOST | REJECTED | SHARED
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
        """The placements the installer puts into the switches (shared ones too)."""
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
          weight_mode: str = "unit", seed: int = 0) -> Tenancy:
    """Place the jobs in order within the slot budgets; decide and explain each job's fate."""
    if policy not in POLICIES:
        raise PlacementError(f"policy: unknown admission policy '{policy}' (choose from {', '.join(POLICIES)})")
    placements, admissions = [], []
    for jp in place_jobs(topo, list(jobs), algo, weight_mode, seed, move=policy == "move"):
        decision = _decide(jp, policy)
        admissions.append(decision)
        if decision.status != REJECTED:
            placements.append(jp)
    return Tenancy(tuple(placements), tuple(admissions))


def share(topo: Topology, jobs: Iterable[Job], algo: str = "soar", seed: int = 0) -> Tenancy:
    """ATP's best-effort sharing (module docstring): every job in-network at its root, with a window of
    at most the pool, the pool being the root's whole slot budget shared by the jobs rooted there."""
    roomy = with_slot_budgets(topo, dict.fromkeys(topo.switches, UNLIMITED))
    placements, admissions = [], []
    for jp in place_jobs(roomy, [dataclasses.replace(j, k=0) for j in jobs], algo, "unit", seed):
        pool = topo.switches[jp.tree.root].slots
        if pool < 1:
            raise PlacementError(f"jobs: {jp.job.name}: its root switch '{jp.tree.root}' has no slots to share")
        job = dataclasses.replace(jp.job, slots=min(jp.job.slots, pool), pool=pool)
        placements.append(dataclasses.replace(jp, job=job))
        admissions.append(Admission(job.name, SHARED, (jp.tree.root,), job.slots,
                                    f"job {job.name}: best-effort in-network aggregation on {jp.tree.root}, in its "
                                    f"{pool} slots shared by the jobs rooted there (a window of {job.slots})"))
    return Tenancy(tuple(placements), tuple(admissions))


def _decide(jp: JobPlacement, policy: str) -> Admission:
    name, slots = jp.job.name, jp.job.slots
    if jp.fallback is None and jp.tree.sink is None:
        where = ", ".join(jp.placement.aggregators)
        moved = f" (moved: root switch '{jp.moved_from}' had no {slots} free slots)" if jp.moved_from else ""
        return Admission(name, IN_NETWORK, jp.placement.aggregators, slots,
                         f"job {name}: in-network aggregation on {where} ({slots} slots each){moved}")
    reason = jp.fallback or f"its sum goes to host '{jp.tree.sink}'"
    if policy == "reject":
        return Admission(name, REJECTED, (), slots, f"job {name}: rejected: no in-network capacity ({reason})")
    return Admission(name, HOST, (), slots,
                     f"job {name}: downgraded to host aggregation: no in-network capacity ({reason})")

