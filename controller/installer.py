"""Turn a topology and placed jobs into switch state (aggnet.p4), and push it idempotently.

Two halves:
- pure: `plan_job` (a placed job -> which switch aggregates what, from which port) and
  `desired_state` (routes + job plans -> per-switch table entries and multicast groups,
  by P4 names). No network; tests assert the entries directly.
- push: `Installer.install` connects nothing itself; given one `SwitchConnection` per
  switch it reads each switch's entries back, diffs them against the desired state and
  writes only the difference, so a second install writes nothing and dropping a job from
  the list (`remove_job`) deletes exactly its entries.

What aggnet.p4 needs per job (docs/protocol.md): an `agg_job` entry on every switch of the
job's tree, `agg_child` entries (on aggregating switches one bitmap bit per message that
arrives from below; on forwarding switches one per port below, so that no other port can
inject into the tree), a multicast group toward the tree children, and `agg_host` entries on
worker ports. A switch that only forwards passes all messages from its subtree up one port;
the aggregating switch above tells them apart by source address, which works only for
worker contributions: a partial sum carries the address of whichever worker completed it.
So a forwarding switch that would send up several messages including a partial is made to
aggregate (`JobPlan.promoted`); it then needs the job's slots too. So is a forwarding switch below
an aggregator that more messages would reach than its bitmap has bits (MAX_CHILDREN), e.g. 64
workers of a fat-tree under one root.
"""
from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from finsy import P4MulticastGroupEntry, P4TableAction, P4TableEntry, P4TableMatch

from controller.p4rt import diff_entities, entry_key, load_schema
from controller.parallel import each
from controller.placement import AggTree, JobPlacement
from controller.routing import Route, compute_routes
from controller.topology import Topology
from p4target.constants import DEFAULT_DEPTH
from p4target.runtime.tls import TlsFiles
from protocol.job import MAX_JOBS, JobSpec, WorkerSpec
from protocol.wire import AGG_PORT, DEFAULT_ECN_FRACTION

IPV4_LPM = "AggIngress.ipv4_lpm"
AGG_JOB = "AggIngress.agg_job"
AGG_CHILD = "AggIngress.agg_child"
AGG_HOST = "AggEgress.agg_host"
ECN_MARK = "AggEgress.ecn_mark"
MANAGED_TABLES = (IPV4_LPM, AGG_JOB, AGG_CHILD, AGG_HOST, ECN_MARK)
SLOT_REGISTERS = ("AggIngress.agg_bitmap", "AggIngress.agg_count", "AggIngress.agg_done",
                  "AggIngress.agg_overflow", "AggIngress.agg_ecn", "AggIngress.agg_workers",
                  "AggIngress.agg_owner", "AggIngress.agg_seq")
VALUES_REGISTER = "AggIngress.agg_values"
MCAST_GROUP_BASE = 0x1000  # a job's multicast group id is MCAST_GROUP_BASE + job id
MAX_CHILDREN = 32  # bits in the agg_bitmap register
CHILD_PRIORITY = 1  # agg_child has a ternary key, so entries need a priority; they never overlap
DEFAULT_AGG_IP = "10.0.255.254"
T = TypeVar("T")
log = logging.getLogger("aggnet.controller")


class InstallError(Exception):
    """A job or program the installer cannot turn into switch state; one line, exit 2."""

    exit_code = 2


# ---------------------------------------------------------------------------- program

@dataclass(frozen=True)
class Program:
    """The pipeline pushed to every switch and the sizes the installer needs from it."""

    path: str
    p4info: Any  # p4i.P4Info (bmv2: the one p4c wrote)
    device_config: bytes  # embedded: the P4 source with its local #includes inlined; bmv2: p4c's JSON
    lanes: int  # int32 values per aggregation packet (AGG_LANES)
    slots: int  # aggregation slots per switch (AGG_SLOTS)

    @property
    def cookie(self) -> int:
        """Identifies this exact pipeline on a switch, so an unchanged one is not pushed again."""
        digest = hashlib.sha256(self.p4info.SerializeToString(deterministic=True) + self.device_config).digest()
        return int.from_bytes(digest[:8], "big") or 1


def load_program(path: str, target: str = "embedded", build_dir: str | None = None) -> Program:
    """Compile `path` for `target` and derive P4Info, device config, lanes, slots.

    P4Error on a bad program. For "bmv2", p4c compiles it into `build_dir` (a temporary
    directory when None); CompileError when p4c is missing or fails, InstallError when p4c's
    P4Info IDs differ from ours (the controller must address the same objects on both targets).
    """
    from p4target.compiled import p4info_file
    from p4target.device_config import device_config_source

    p4info = p4info_file(path)
    if target == "embedded":
        device_config = device_config_source(path).encode()
    elif target == "bmv2":
        p4info, device_config = _bmv2_pipeline(path, p4info, build_dir)
    else:
        raise InstallError(f"{path}: unknown target {target!r} (embedded or bmv2)")
    try:
        schema = load_schema(p4info)
    except ValueError as exc:
        raise InstallError(f"{path}: {exc}") from None
    missing = [f"register {name}" for name in (SLOT_REGISTERS[0], VALUES_REGISTER)
               if schema.registers.get(name) is None]
    missing += [f"table {name}" for name in MANAGED_TABLES if schema.tables.get(name) is None]
    if missing:
        raise InstallError(f"{path}: not an aggregation program: P4Info has no {missing[0]}")
    slot_cells = schema.registers[SLOT_REGISTERS[0]].size
    value_cells = schema.registers[VALUES_REGISTER].size
    return Program(path=path, p4info=p4info, device_config=device_config,
                   lanes=value_cells // slot_cells, slots=slot_cells // 2)


def _bmv2_pipeline(path: str, ours: Any, build_dir: str | None) -> tuple[Any, bytes]:
    """(p4c's P4Info, p4c's BMv2 JSON) for `path`, once p4c's IDs are known to equal `ours`."""
    from controller.p4c import compile_bmv2, id_mismatches

    with tempfile.TemporaryDirectory() if build_dir is None else nullcontext(build_dir) as out:
        config, p4info = compile_bmv2(path, out)
    mismatches = id_mismatches(ours, p4info)
    if mismatches:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        raise InstallError(f"{path}: P4Info differs from p4c's: {mismatches[0]}{more}")
    return p4info, config


# ---------------------------------------------------------------------------- pure: plans

@dataclass(frozen=True)
class Message:
    """One aggregation message travelling up: a worker's contribution or a switch's partial."""

    kind: str  # "worker" | "partial"
    origin: str  # the worker host or the aggregating switch


@dataclass(frozen=True)
class JobPlan:
    """A job ready to install: its tree, who aggregates, its id and slot region."""

    name: str
    job_id: int
    tree: AggTree
    workers: tuple[str, ...]  # rank order
    aggregators: frozenset[str]  # includes the root switch and any promoted switch
    promoted: tuple[str, ...]  # forwarding switches made to aggregate (see the module docstring)
    slot_count: int
    slot_base: int = 0
    pool: int = 0  # >0: its root's slots [slot_base, slot_base + pool) are shared with other jobs (ATP)
    standby: tuple[tuple[str, str], ...] = ()  # (worker, host that shares its seat: same child bit, its results)

    @property
    def region(self) -> int:
        """Slots from slot_base the job's state occupies: its window, or the pool it shares."""
        return self.pool or self.slot_count


def plan_job(jp: JobPlacement, job_id: int) -> JobPlan:
    """The installable form of a placed job; InstallError for jobs aggnet.p4 cannot run in-network."""
    name = jp.job.name
    if not 0 < job_id < MAX_JOBS:
        raise InstallError(f"job {name}: job id {job_id} is outside 1..{MAX_JOBS - 1}")
    if jp.fallback is not None or jp.tree.sink is not None:
        reason = jp.fallback or f"its sum goes to host '{jp.tree.sink}'"
        raise InstallError(f"job {name}: host aggregation is not installable in-network ({reason})")
    tree = jp.tree
    aggregators = set(jp.placement.aggregators) | {tree.root}
    promoted = []
    while True:
        messages = upward_messages(tree, aggregators)
        ambiguous = [v for v in tree.order if v not in aggregators and len(messages[v]) > 1
                     and any(m.kind == "partial" for m in messages[v])]
        promote = ambiguous[0] if ambiguous else _relief(tree, aggregators, messages)
        if promote is None:
            break
        aggregators.add(promote)  # topmost first: it absorbs every problem below it
        promoted.append(promote)
    if jp.job.pool and aggregators != {tree.root}:
        raise InstallError(f"job {name}: a job sharing its root's slots aggregates there only, not on "
                           f"{', '.join(sorted(aggregators - {tree.root}))}")
    return JobPlan(name=name, job_id=job_id, tree=tree, workers=tuple(jp.job.workers),
                   aggregators=frozenset(aggregators), promoted=tuple(promoted), slot_count=jp.job.slots,
                   pool=jp.job.pool, standby=jp.job.standby)


def _relief(tree: AggTree, aggregators: set[str], messages: dict[str, list[Message]]) -> str | None:
    """For the topmost aggregator that more messages reach than its bitmap holds (64 workers under
    one root), the forwarding child that passes it the most; None when no aggregator is over."""
    for v in tree.order:
        if v not in aggregators:
            continue
        if len(tree.workers.get(v, ())) + sum(len(messages[c]) for c in tree.children[v]) <= MAX_CHILDREN:
            continue
        forwarders = [c for c in tree.children[v] if c not in aggregators and len(messages[c]) > 1]
        if forwarders:
            return max(forwarders, key=lambda c: len(messages[c]))
    return None


def upward_messages(tree: AggTree, aggregators: Iterable[str]) -> dict[str, list[Message]]:
    """switch -> the messages it sends to its parent per chunk (an aggregator sends one partial)."""
    aggregators = set(aggregators)
    out: dict[str, list[Message]] = {}
    for v in reversed(tree.order):
        if v in aggregators:
            out[v] = [Message("partial", v)]
        else:
            out[v] = [Message("worker", h) for h in tree.workers.get(v, ())]
            for c in tree.children[v]:
                out[v].extend(out[c])
    return out


def incoming_messages(topo: Topology, tree: AggTree, aggregators: Iterable[str], v: str) -> list[tuple[int, Message]]:
    """(ingress port, message) for every message that reaches switch v from below, by port then origin."""
    up = upward_messages(tree, aggregators)
    arriving = [(topo.port_of(v, h), Message("worker", h)) for h in tree.workers.get(v, ())]
    for c in tree.children[v]:
        arriving.extend((topo.port_of(v, c), m) for m in up[c])
    return sorted(arriving, key=lambda pm: (pm[0], pm[1].origin))


# ---------------------------------------------------------------------------- pure: desired state

@dataclass(frozen=True)
class Entry:
    """One desired table entry by P4 names, values as the topology gives them ("10.0.0.1", MACs, ints).

    Frozen and hashable (finsy's P4TableEntry is neither), so the desired state can hold entries
    in a dict and refuse two conflicting ones while it is built; `entity()` is what gets written.
    """

    table: str
    match: tuple[tuple[str, Any], ...]
    action: str
    params: tuple[tuple[str, Any], ...]
    priority: int = 0

    def param(self, name: str) -> Any:
        return dict(self.params)[name]

    def entity(self) -> P4TableEntry:
        return P4TableEntry(self.table, match=P4TableMatch(self.match), priority=self.priority,
                            action=P4TableAction(self.action, **dict(self.params)))


@dataclass
class SwitchState:
    entries: dict[tuple, Entry] = field(default_factory=dict)  # (table, match, priority) -> entry
    groups: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)  # gid -> (port, rid)

    def add(self, entry: Entry) -> None:
        key = (entry.table, entry.match, entry.priority)
        if key in self.entries and self.entries[key] != entry:
            raise InstallError(f"conflicting entries for {entry.table} {dict(entry.match)}: "
                               f"{self.entries[key].params} vs {entry.params}")
        self.entries[key] = entry

    def table(self, name: str) -> list[Entry]:
        return [e for e in self.entries.values() if e.table == name]


def mcast_group(job_id: int) -> int:
    return MCAST_GROUP_BASE + job_id


def route_entry(route: Route) -> Entry:
    return Entry(IPV4_LPM, (("hdr.ipv4.dstAddr", (route.dst_ip, route.prefix_len)),), "AggIngress.ipv4_forward",
                 (("dstAddr", route.dst_mac), ("port", route.port)))


def desired_state(topo: Topology, plans: Iterable[JobPlan], routes: Mapping[str, list[Route]] | None = None,
                  ecn_fraction: float = DEFAULT_ECN_FRACTION) -> dict[str, SwitchState]:
    """Every switch's entries and multicast groups for IPv4 routing, congestion marking on every port
    (once `ecn_fraction` of its queue is full; none when 0) and the given jobs."""
    routes = compute_routes(topo) if routes is None else routes
    state = {s: SwitchState() for s in topo.switches}
    for s, switch_routes in routes.items():
        for route in switch_routes:
            state[s].add(route_entry(route))
    for s in state if ecn_fraction else ():
        for link in topo.links_of(s):
            depth = max(1, round((link.queue_pkts or DEFAULT_DEPTH) * ecn_fraction))
            state[s].add(Entry(ECN_MARK, (("standard_metadata.egress_port", link.port_on(s)),),
                               "AggEgress.mark_from", (("depth", depth),)))
    for plan in plans:
        _add_job(topo, plan, state)
    return state


def _add_job(topo: Topology, plan: JobPlan, state: dict[str, SwitchState]) -> None:
    tree, gid = plan.tree, mcast_group(plan.job_id)
    standby = dict(plan.standby)  # a worker's seat may also be taken by this host on its switch
    for member, host in plan.standby:
        if topo.switch_of(host) != topo.switch_of(member):
            raise InstallError(f"job {plan.name}: {host} cannot stand by for {member}'s seat: it is attached to "
                               f"{topo.switch_of(host)}, not {topo.switch_of(member)}")
    for v in tree.order:
        aggregate = v in plan.aggregators
        parent = tree.parent[v]
        incoming = incoming_messages(topo, tree, plan.aggregators, v) if aggregate else []
        if len(incoming) > MAX_CHILDREN:
            raise InstallError(f"job {plan.name}: switch {v} would aggregate {len(incoming)} messages per chunk; "
                               f"the bitmap holds {MAX_CHILDREN}")
        if plan.pool and v == tree.root:
            state[v].add(Entry(AGG_JOB, (("hdr.agg.job_id", plan.job_id),), "AggIngress.set_shared_job", (
                ("slot_base", plan.slot_base), ("slot_count", plan.pool), ("children", len(incoming)),
                ("mcast_grp", gid))))
        else:
            state[v].add(Entry(AGG_JOB, (("hdr.agg.job_id", plan.job_id),), "AggIngress.set_job", (
                ("slot_base", plan.slot_base), ("slot_count", plan.region), ("children", len(incoming)),
                ("aggregate", int(aggregate)), ("is_root", int(v == tree.root)),
                ("parent_port", 0 if parent is None else topo.port_of(v, parent)), ("mcast_grp", gid))))
        hosts = [*tree.workers.get(v, ()), *(standby[h] for h in tree.workers.get(v, ()) if h in standby)]
        down = [topo.port_of(v, h) for h in hosts] + [topo.port_of(v, c) for c in tree.children[v]]
        state[v].groups[gid] = tuple(sorted((port, 0) for port in down))
        if aggregate:
            per_port: dict[int, int] = {}
            for port, _ in incoming:
                per_port[port] = per_port.get(port, 0) + 1
            for index, (port, message) in enumerate(incoming):
                # Only worker messages can share a port (plan_job promotes the other cases).
                src = (topo.hosts[message.origin].ip, 0xFFFFFFFF) if per_port[port] > 1 else (0, 0)
                state[v].add(_child_entry(plan.job_id, port, src, index))
                spare = standby.get(message.origin) if message.kind == "worker" else None
                if spare is not None and topo.switch_of(spare) == v:  # on a port of its own: the seat's bit
                    state[v].add(_child_entry(plan.job_id, topo.port_of(v, spare), (0, 0), index))
                elif spare is not None and per_port[port] > 1:  # through a forwarder, told apart by address
                    state[v].add(_child_entry(plan.job_id, port, (topo.hosts[spare].ip, 0xFFFFFFFF), index))
        else:
            # A forwarder keeps no bitmap; it only admits contributions from the ports below it.
            for port in sorted(set(down)):
                state[v].add(_child_entry(plan.job_id, port, (0, 0), 0))
        for h in hosts:
            node = topo.hosts[h]
            state[v].add(Entry(AGG_HOST, (("standard_metadata.egress_port", topo.port_of(v, h)),),
                               "AggEgress.set_host", (("mac", node.mac), ("ip", node.ip), ("udp_port", AGG_PORT))))


def _child_entry(job_id: int, port: int, src: tuple[int | str, int], index: int) -> Entry:
    """agg_child: contributions of the job arriving on `port` from `src` (value, mask) are child `index`."""
    return Entry(AGG_CHILD, (("hdr.agg.job_id", job_id), ("standard_metadata.ingress_port", port),
                             ("hdr.ipv4.srcAddr", src)), "AggIngress.set_child", (("index", index),), CHILD_PRIORITY)


def job_spec(topo: Topology, plan: JobPlan, lanes: int, agg_ip: str = DEFAULT_AGG_IP,
             timeout_s: float = 0.05) -> JobSpec:
    """What the job's workers need: addresses, the job id, its slot window, the lane count."""
    workers = tuple(WorkerSpec(name=h, ip=topo.hosts[h].ip, port=AGG_PORT, mac=topo.hosts[h].mac)
                    for h in plan.workers)
    return JobSpec(job_id=plan.job_id, workers=workers, slot_base=plan.slot_base, slot_count=plan.slot_count,
                   agg_ip=agg_ip, lanes=lanes, timeout_s=timeout_s, pool=plan.pool)


def allocate_region(plan: JobPlan, taken: Mapping[str, list[tuple[int, int]]], capacity: Mapping[str, int]) -> int:
    """Lowest slot base where [base, base + slot_count) is free on every aggregating switch of the plan.

    One base for all the job's switches keeps JobSpec.slot_base meaningful. `taken`: switch ->
    (base, count) regions of other jobs; `capacity`: switch -> slots it has.
    """
    switches = sorted(plan.aggregators)
    limit = min(capacity[s] for s in switches)
    regions = sorted(r for s in switches for r in taken.get(s, []))
    base = 0
    for start, count in regions:
        if base + plan.region <= start:
            break
        base = max(base, start + count)
    if base + plan.region > limit:
        raise InstallError(f"job {plan.name}: no free region of {plan.region} slots on "
                           f"{', '.join(switches)} (each has {limit})")
    return base


# ---------------------------------------------------------------------------- push

@dataclass
class SyncReport:
    """Updates written to one switch by one install (all zero when it was already in sync)."""

    pipeline: bool = False
    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    registers_zeroed: int = 0

    @property
    def writes(self) -> int:
        return int(self.pipeline) + self.inserted + self.modified + self.deleted + self.registers_zeroed


class Installer:
    """Keeps every switch in sync with routing plus the current jobs.

    `connections`: switch name -> SwitchConnection (primary). Job ids and slot regions are
    assigned in the order jobs first appear and kept while a job stays, so a new Installer
    given the same jobs in the same order computes the same state. The installer owns the
    four tables of aggnet.p4 and the multicast groups from MCAST_GROUP_BASE up: entries found
    there that it did not compute are deleted; other groups and clone sessions are left alone.
    """

    def __init__(self, topo: Topology, program: Program, connections: Mapping[str, Any],
                 agg_ip: str = DEFAULT_AGG_IP, timeout_s: float = 0.05,
                 ecn_fraction: float = DEFAULT_ECN_FRACTION):
        missing = [s for s in topo.switches if s not in connections]
        if missing:
            raise InstallError(f"{topo.source}: no connection for switch {', '.join(missing)}")
        self.topo = topo
        self.program = program
        self.connections = connections
        self.agg_ip = agg_ip
        self.timeout_s = timeout_s
        self.ecn_fraction = ecn_fraction
        self.routes = compute_routes(topo)
        self.plans: dict[str, JobPlan] = {}
        self._fresh: set[str] = set()  # switches whose pipeline it pushed and whose slots no job used yet

    def install(self, placements: Iterable[JobPlacement]) -> tuple[dict[str, JobSpec], dict[str, SyncReport]]:
        """Make the switches run exactly these jobs (plus routing); returns job specs and what was written."""
        self.plans = self._plan(list(placements))
        reports = self.sync()
        specs = {name: job_spec(self.topo, plan, self.program.lanes, self.agg_ip, self.timeout_s)
                 for name, plan in self.plans.items()}
        return specs, reports

    def remove_job(self, name: str) -> dict[str, SyncReport]:
        """Delete one job's state from every switch; the other jobs keep theirs."""
        if name not in self.plans:
            raise InstallError(f"job {name}: not installed (installed: {', '.join(self.plans) or 'none'})")
        del self.plans[name]
        return self.sync()

    def _plan(self, placements: list[JobPlacement]) -> dict[str, JobPlan]:
        """Plans for `placements`: an unchanged job keeps its id and region; new ones get free ones."""
        names = [jp.job.name for jp in placements]
        for name in names:
            if names.count(name) > 1:
                raise InstallError(f"job {name}: listed twice")
        kept = {}
        for jp in placements:
            old = self.plans.get(jp.job.name)
            if old is not None and _same_tree(plan_job(jp, old.job_id), old):
                kept[old.name] = old
        plans: dict[str, JobPlan] = {}
        for jp in placements:
            name = jp.job.name
            others = list(plans.values()) + [p for n, p in kept.items() if n not in plans]
            plans[name] = kept[name] if name in kept else self._new_plan(jp, others)
        return plans

    def _new_plan(self, jp: JobPlacement, others: list[JobPlan]) -> JobPlan:
        """A plan with the lowest free job id and the lowest slot region free next to `others`."""
        used = {p.job_id for p in others}
        free_ids = [i for i in range(1, MAX_JOBS) if i not in used]
        if not free_ids:
            raise InstallError(f"job {jp.job.name}: all {MAX_JOBS - 1} job ids are in use")
        plan = plan_job(jp, free_ids[0])
        taken: dict[str, list[tuple[int, int]]] = {}
        for other in others:
            if plan.pool and other.pool and other.tree.root == plan.tree.root:
                return replace(plan, slot_base=other.slot_base)  # the pool its root's jobs share
            for s in other.aggregators:
                taken.setdefault(s, []).append((other.slot_base, other.region))
        capacity = {s: min(sw.slots, self.program.slots) for s, sw in self.topo.switches.items()}
        return replace(plan, slot_base=allocate_region(plan, taken, capacity))

    def push_pipelines(self) -> dict[str, bool]:
        """The program on every switch that does not run it yet (True where pushed); `install` does it too."""
        return self._each_switch(self._ensure_pipeline)

    def sync(self) -> dict[str, SyncReport]:
        """Push the desired state of every switch (reads back, writes only the differences)."""
        desired = desired_state(self.topo, self.plans.values(), self.routes, self.ecn_fraction)
        return self._each_switch(lambda s: self._sync_switch(s, desired[s]))

    def _each_switch(self, work: Callable[[str], T]) -> dict[str, T]:
        """`work(switch)` for every switch, many at once (controller.parallel): a switch compiles a pushed
        pipeline and applies writes on its own, so twenty of them take about as long as the slowest."""
        return each(self.topo.switches, work)

    def _sync_switch(self, switch: str, want: SwitchState) -> SyncReport:
        conn = self.connections[switch]
        report = SyncReport(pipeline=self._ensure_pipeline(switch))
        entries, groups = _diff(conn, want)
        # Order: stale entries go first; groups exist before entries point at them; a job's
        # slots are cleared and its children known before its agg_job entry goes live.
        conn.write([conn.delete(e) for e in entries.delete])
        conn.write([conn.insert(g) for g in groups.insert] + [conn.modify(g) for g in groups.modify])
        if switch not in self._fresh:  # a pipeline just pushed starts with every register at zero
            report.registers_zeroed = self._zero_regions(conn, _claimed_regions(entries.insert + entries.modify, want))
        self._fresh.discard(switch)
        conn.write([conn.insert(e) for e in entries.insert] + [conn.modify(e) for e in entries.modify])
        conn.write([conn.delete(g) for g in groups.delete])
        report.inserted = len(entries.insert) + len(groups.insert)
        report.modified = len(entries.modify) + len(groups.modify)
        report.deleted = len(entries.delete) + len(groups.delete)
        log.info("%s: pipeline %s, %d inserted, %d modified, %d deleted, %d register cells zeroed", switch,
                 "pushed" if report.pipeline else "kept", report.inserted, report.modified, report.deleted,
                 report.registers_zeroed)
        return report

    def _ensure_pipeline(self, switch: str) -> bool:
        """Push the program unless the switch already runs it (same cookie); True if pushed."""
        conn = self.connections[switch]
        if conn.pipeline_cookie() == self.program.cookie:
            conn.use_p4info(self.program.p4info)
            return False
        conn.set_pipeline(self.program.p4info, self.program.device_config, self.program.cookie)
        self._fresh.add(switch)
        return True

    def _zero_regions(self, conn: Any, regions: list[tuple[int, int]]) -> int:
        """Clear the slot registers of (re)assigned regions (docs/protocol.md: before (re)using a region)."""
        written = 0
        lanes = self.program.lanes
        for base, count in regions:
            cells = range(2 * base, 2 * (base + count))
            zeros = {register: dict.fromkeys(cells, 0) for register in SLOT_REGISTERS}
            zeros[VALUES_REGISTER] = dict.fromkeys(range(2 * base * lanes, 2 * (base + count) * lanes), 0)
            conn.write_registers(zeros)
            written += len(cells) * (len(SLOT_REGISTERS) + lanes)
        return written


def _claimed_regions(written: list[P4TableEntry], want: SwitchState) -> list[tuple[int, int]]:
    """(slot_base, slot_count) of the job entries being written whose registers must start at zero: an
    aggregating job's region, and a shared pool that no job held here before (zeroing it under jobs
    that hold it would wipe their rounds)."""
    regions, sharing = [], 0
    for entry in written:
        if entry.table_id != AGG_JOB:
            continue
        assert isinstance(entry.action, P4TableAction), "job entries run an action directly"
        if entry.action.name == "AggIngress.set_shared_job":
            sharing += 1
        elif entry.action.args["aggregate"]:
            regions.append((entry.action.args["slot_base"], entry.action.args["slot_count"]))
    pools = [e for e in want.table(AGG_JOB) if e.action == "AggIngress.set_shared_job"]
    if sharing and sharing == len(pools):
        regions += sorted({(e.param("slot_base"), e.param("slot_count")) for e in pools})
    return regions


_WRITE_ORDER = {AGG_CHILD: 0, AGG_HOST: 1, AGG_JOB: 2, IPV4_LPM: 3, ECN_MARK: 4}


def _diff(conn: Any, want: SwitchState) -> tuple[Any, Any]:
    """(table entries, multicast groups) to write so the switch's managed tables and job groups equal
    `want`: typed entities in canonical form, compared by value (an entry's key, then its action).
    Entries to insert come children and hosts before jobs."""
    entries = [conn.canonical(e.entity()) for e in sorted(want.entries.values(), key=lambda e: _WRITE_ORDER[e.table])]
    groups = [conn.canonical(P4MulticastGroupEntry(gid, replicas=replicas))
              for gid, replicas in sorted(want.groups.items())]
    held_groups = [g for g in conn.read([P4MulticastGroupEntry()]) if g.multicast_group_id >= MCAST_GROUP_BASE]
    return (diff_entities(entries, conn.read([P4TableEntry(t) for t in MANAGED_TABLES]), entry_key,
                          lambda e: e.action),
            diff_entities(groups, held_groups, lambda g: g.multicast_group_id))


def _same_tree(a: JobPlan, b: JobPlan) -> bool:
    return ((a.aggregators, a.slot_count, a.pool, a.standby, dict(a.tree.parent))
            == (b.aggregators, b.slot_count, b.pool, b.standby, dict(b.tree.parent)))


def connect_all(topo: Topology, host: str = "127.0.0.1", election_id: tuple[int, int] = (0, 1),
                side_channel_ports: Mapping[str, int] | None = None, target: str = "embedded",
                addresses: Mapping[str, str] | None = None, tls: TlsFiles | None = None,
                grpc_ports: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A primary SwitchConnection to every switch at host:grpc_port, many at once (closes them all if one
    fails), over TLS with `tls` (the controller's certificate and key, and the CA that signed the switches').

    A switch listed in `side_channel_ports` gets its `target`'s side channel on that port
    (registers and queues: the embedded switch's TCP port, BMv2's Thrift port), always on this
    machine. A switch listed in `addresses` has its P4Runtime server there instead of at `host`, one
    listed in `grpc_ports` on that port instead of its topology's (a network in a run slot: testbed.slots).
    """
    from controller.p4rt import SwitchConnection
    from controller.switch_cli import side_channel

    ports = side_channel_ports or {}
    conns: dict[str, Any] = {}

    def connect(name: str) -> None:
        sw = topo.switches[name]
        address = f"{(addresses or {}).get(name, host)}:{(grpc_ports or {}).get(name, sw.grpc_port)}"
        side = side_channel(target, ports[name]) if name in ports else None
        conns[name] = SwitchConnection(address, sw.device_id, election_id, name=name, side_channel=side, tls=tls)

    try:
        each(topo.switches, connect)
    except BaseException:
        for conn in conns.values():
            conn.close()
        raise
    return {name: conns[name] for name in topo.switches}
