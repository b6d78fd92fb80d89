"""Several jobs on one fabric: each switch has a slot budget shared by the jobs it aggregates for.

Jobs are placed one after another, in the order given. Each job's tree is cut with the link
load predicted from the jobs placed before it (so trees spread over spines), only switches
with enough free slots may aggregate for it, and the slots of its aggregators are then taken.
A job that cannot get in-network capacity falls back to host aggregation: all switches
forward, and the sum is computed on a host (its parameter server, or else its first worker,
which then stops counting as a worker). The fallback and its reason are reported.

With `move` (SOAR's setting, INC'22: place where the memory is), a job whose root switch is
full is first rooted at another switch that has the slots, the one whose tree costs least
(messages on links; its preferred root is a preference then), before it falls back.
"""
from __future__ import annotations

from dataclasses import dataclass

from controller.placement.algorithms import Placement, evaluate, place
from controller.placement.tree import AggTree, PlacementError, job_tree
from controller.topology import Topology


@dataclass(frozen=True)
class Job:
    name: str
    workers: tuple[str, ...]
    root: str | None = None  # parameter-server host, root switch, or None (closest switch)
    k: int = 1  # at most k aggregating switches besides a root switch that is the sink
    slots: int = 1  # slots the job needs on every switch that aggregates for it
    pool: int = 0  # >0: it aggregates at its root only, in a pool of this many slots shared with other jobs (ATP)
    standby: tuple[tuple[str, str], ...] = ()  # (worker, host on its switch that may take its seat: a replica)


@dataclass(frozen=True)
class JobPlacement:
    job: Job
    tree: AggTree
    placement: Placement
    fallback: str | None = None  # why the job aggregates on a host instead, if it does
    moved_from: str | None = None  # the root switch it was moved off for lack of slots (`move`)


def place_jobs(topo: Topology, jobs: list[Job], algo: str = "soar", weight_mode: str = "unit",
               seed: int = 0, move: bool = False) -> list[JobPlacement]:
    """Place every job in order within the switches' slot budgets (see the module docstring)."""
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise PlacementError(f"jobs: duplicate job name '{next(n for n in names if names.count(n) > 1)}'")
    free = {name: sw.slots for name, sw in topo.switches.items()}
    link_load: dict[frozenset[str], float] = {}
    results = []
    for job in jobs:
        if job.slots < 1:
            raise PlacementError(f"jobs: {job.name}: slots must be >= 1, got {job.slots}")
        tree = job_tree(topo, list(job.workers), job.root, link_load, weight_mode)
        moved_from = None
        if move and tree.sink is None and free[tree.root] < job.slots:
            roomy = _roomiest_tree(topo, job, free, link_load, weight_mode)
            if roomy is not None:
                moved_from, tree = tree.root, roomy
        eligible = [s for s in tree.switches if free[s] >= job.slots]
        fallback = None
        if tree.sink is None and free[tree.root] < job.slots:
            fallback = f"root switch '{tree.root}' has {free[tree.root]} free slots, the job needs {job.slots}"
        elif tree.sink is not None and job.k > 0 and not eligible:
            fallback = f"no switch on the job's tree has {job.slots} free slots"
        if fallback is None:
            result = place(tree, job.k, algo, eligible, seed)
        else:
            tree = _host_tree(topo, job, link_load, weight_mode)
            result = evaluate(tree, (), "host")
        for s in result.aggregators:
            free[s] -= job.slots
        for name, count in result.messages.items():  # node names never contain '-'
            key = frozenset(name.split("-"))
            link_load[key] = link_load.get(key, 0.0) + count
        results.append(JobPlacement(job=job, tree=tree, placement=result, fallback=fallback, moved_from=moved_from))
    return results


def _roomiest_tree(topo: Topology, job: Job, free: dict[str, int], link_load: dict[frozenset[str], float],
                   weight_mode: str) -> AggTree | None:
    """The job's tree rooted at the switch with `job.slots` free whose tree carries the fewest messages
    (ties: topology order); None when no switch has them."""
    best: tuple[float, AggTree] | None = None
    for s in topo.switches:
        if free[s] < job.slots:
            continue
        tree = job_tree(topo, list(job.workers), s, link_load, weight_mode)
        cost = evaluate(tree, (), "none").utilization
        if best is None or cost < best[0]:
            best = (cost, tree)
    return None if best is None else best[1]


def _host_tree(topo: Topology, job: Job, link_load: dict[frozenset[str], float], weight_mode: str) -> AggTree:
    """The job's tree toward a host that aggregates: its parameter server, else its first worker."""
    if job.root is not None and topo.is_host(job.root):
        return job_tree(topo, list(job.workers), job.root, link_load, weight_mode)
    server = min(job.workers, key=list(topo.hosts).index)
    others = [h for h in job.workers if h != server]
    if not others:
        raise PlacementError(f"jobs: {job.name}: a single worker has nothing to aggregate")
    return job_tree(topo, others, server, link_load, weight_mode)
