"""Multi-job scenarios: several jobs on one network, background traffic, stragglers, contention awareness.

    aggnet experiment experiments/mlfabric_models.yaml

A scenario file (YAML; experiments/README.md documents every field) is a run configuration
(testbed.config.RunConfig: `network`, `job` options every job shares, `workload`, `train`,
`scale`, `timeout_s`, ...) plus the jobs (workers, root, k, slots, parameter-server host, each its
own workload if it says so: a real model with its profile, batch, buckets and iterations, and
when it arrives), per-switch slot budgets, shaped link directions, background traffic (periodic,
drawn from a distribution or replayed from a trace), stragglers (on a schedule or at random) and
the modes to compare. What changes over time is one seeded timeline (testbed.timeline), given in
the cluster's time: with `scale: F` it runs F times slower, as a single run does (testbed.timescale:
link rates / F, and here also shaped rates and background flows' rates; times x F: link delays,
flows' and stragglers' periods, job arrivals, the adaptation period, protocol timers), and results
are in the cluster's time. Each mode is one ModeRun (a testbed.run.Run variant) on a fresh network
with the same jobs and timeline:

- `aware`: in-network aggregation, and the controller's adaptation loop (controller.adapt)
  moves trees off congested links while the jobs train; with `pacing: aimd` the jobs also
  get MLfabric-style ordering weights (hosts.pacing);
- `unaware`: in-network aggregation with the trees placed once;
- `split`: in-network as `aware` (trees move, weights), and a job with planned stragglers (`job.stragglers`,
  or the timeline's scheduled `stragglers`; not `random_stragglers`) aggregates split (hosts.split_agg):
  the switches sum its on-time workers, a host aggregator in the stragglers' seat (the job's `ps`
  host, else an idle one) adds their late gradients;
- `relocate`: in-network with the trees placed once; a job whose switches lack its slots is
  placed on other switches that have them (SOAR where the memory is) before it falls back;
- `atp`: ATP's best-effort sharing instead of admission: every job aggregates at its root in a
  pool of the root's slots shared with the jobs rooted there; a chunk whose slot is taken
  spills to the job's parameter server (`ps`, hosts.spill) and is summed there;
- `hostagg`: every job on a host aggregator on its `ps` host, stragglers' gradients at most
  `job.staleness` rounds late (MLfabric's bounded delay; hosts.host_agg);
- `ps` / `ring`: every job on the host baselines (parameter server / ring all-reduce).

Jobs are admitted with the slot budgets in force (controller.tenants); a job that does not fit
runs on its parameter server (or a ring when it has none), and the reason is in the results.
A mode's folder gets logs/, results.json (per job: iteration or step times with their median and
p99, exposed communication, accuracy, what bound it over its own communication phases; counters,
moves, flows: testbed.scenario_results); the scenario folder gets summary.json with the per-job
table and the ratios, and its plots.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import ConfigError, FieldProblem, load, option
from hosts.traffic import PROTOCOLS
from testbed import timeline
from testbed.config import RunConfig, WorkloadConfig, resolve_topology
from testbed.run import REPO, JobRun, Run, RunFailed
from testbed.scenario_results import mode_results, plot, summarize
from testbed.timeline import RandomStragglers, RandomTraffic, SlowPeriod, TraceTraffic
from testbed.timescale import AUTO

MODES = ("aware", "unaware", "split", "relocate", "atp", "hostagg", "ps", "ring")
RECEIVER_SLACK_S = 3.0  # a background receiver listens this long (this machine's seconds) past its flows' end


class ScenarioError(ConfigError):
    """A scenario file that cannot run; one line naming the file and field, exit 2."""


@dataclass(frozen=True)
class ScenarioJob:
    """One job of a scenario: its hosts and where it aggregates."""

    name: str = option(help="job name")
    workers: tuple[str, ...] = option((), help="worker hosts in rank order (at least 2)")
    root: str | None = option(None, help="the tree's root switch (default: the placement's choice)")
    k: int = option(1, minimum=0, help="aggregating switches besides the root")
    slots: int = option(32, minimum=1, help="slots on every switch that aggregates for it")
    ps: str | None = option(None, help="its parameter-server host (mode ps)")
    workload: WorkloadConfig | None = option(None, help="what it runs (default: the scenario's workload)")
    start_s: float = option(0.0, minimum=0, help="when it arrives (the cluster's seconds after the scenario starts); "
                                                 "it leaves when its iterations or steps are done")

    def __post_init__(self) -> None:
        if len(self.workers) < 2:
            raise FieldProblem("workers", f"a job needs at least 2 workers, got {len(self.workers)}")
        if len(set(self.workers)) != len(self.workers):
            raise FieldProblem("workers", "a host is listed twice")


@dataclass(frozen=True)
class Shaping:
    """One direction of a switch-to-switch link: the egress of the first switch toward the second."""

    link: str = option(help="SWITCH-SWITCH")
    rate_mbps: float | None = option(None, minimum=1e-3)
    delay_ms: float | None = option(None, minimum=0)
    depth_pkts: int | None = option(None, minimum=1)

    def __post_init__(self) -> None:
        if (self.rate_mbps, self.delay_ms, self.depth_pkts) == (None, None, None):
            raise FieldProblem("", "give at least one of rate_mbps, delay_ms, depth_pkts")

    @property
    def ends(self) -> list[str]:
        return self.link.split("-")


@dataclass(frozen=True)
class Flow:
    """Background traffic from one host to another (hosts.traffic), on/off in phases."""

    src: str = option(help="sending host")
    dst: str = option(help="receiving host")
    name: str = option("", help="flow name (default flow<index + 1>)")
    proto: str = option("udp", choices=PROTOCOLS)
    port: int = option(0, minimum=0, maximum=65535, help="UDP/TCP port (0: 5001 + the flow's index)")
    rate_mbps: float = option(1.0, minimum=0)
    size: int = option(1000, minimum=1)
    start_s: float = option(0.0, minimum=0)
    duration_s: float = option(10.0, minimum=0.1)
    on_s: float = option(1.0, minimum=1e-3)
    off_s: float = option(0.0, minimum=0)

    def __post_init__(self) -> None:
        if self.src == self.dst:
            raise FieldProblem("dst", "a flow needs two different hosts")


@dataclass(frozen=True)
class AdaptConfig:
    period_s: float = option(1.0, minimum=1e-4, timer=True)
    util_threshold: float = option(0.8, minimum=0.01)
    qdepth_threshold: int = option(16, minimum=1)


@dataclass(frozen=True)
class Scenario(RunConfig):
    """A run configuration plus the jobs, their traffic and the modes to compare."""

    name: str = option("")
    modes: tuple[str, ...] = option(("aware", "unaware", "ps"), choices=MODES)
    admission: str = option("downgrade", choices=("downgrade", "reject"))
    slots: dict[str, int] = option(default_factory=dict, minimum=0, help="per-switch slot budgets")
    target_accuracy: float | None = option(None, minimum=1e-9, maximum=1.0)
    jobs: tuple[ScenarioJob, ...] = option(())
    shaping: tuple[Shaping, ...] = option(())
    traffic: tuple[Flow, ...] = option(())
    random_traffic: tuple[RandomTraffic, ...] = option(())
    trace_traffic: tuple[TraceTraffic, ...] = option(())
    stragglers: tuple[SlowPeriod, ...] = option(())
    random_stragglers: tuple[RandomStragglers, ...] = option(())
    adapt: AdaptConfig = AdaptConfig()

    def __post_init__(self) -> None:
        if self.scale == AUTO:  # its probe models one job's tree
            raise FieldProblem("scale", "auto chooses F for one aggnet run; a scenario takes a factor >= 1")
        super().__post_init__()
        if not self.jobs:
            raise FieldProblem("jobs", "needs at least one job")
        owner: dict[str, str] = {}
        for i, job in enumerate(self.jobs):
            if job.name in [j.name for j in self.jobs[:i]]:
                raise FieldProblem(f"jobs[{i}].name", f"duplicate job name '{job.name}'")
            for mode in ("ps", "atp", "hostagg"):
                if mode in self.modes and job.ps is None:
                    raise FieldProblem(f"jobs[{i}].ps", f"missing (mode {mode} needs a server host per job)")
            for role, host in [("workers", w) for w in job.workers] + ([("ps", job.ps)] if job.ps else []):
                if host in owner:  # the aggregation and PS ports are per host
                    raise FieldProblem(f"jobs[{i}].{role}", f"host {host} already runs {owner[host]}")
                owner[host] = f"job {job.name}"
        workers = {w for job in self.jobs for w in job.workers}
        for field, names in [(f"stragglers[{i}].worker", [p.worker]) for i, p in enumerate(self.stragglers)] + \
                [(f"random_stragglers[{i}].workers", r.workers) for i, r in enumerate(self.random_stragglers)]:
            for name in names:
                if name not in workers:
                    raise FieldProblem(field, f"{name!r} is not a worker of any job")

        scales = {self.workload_of(j).grad_scale if self.workload_of(j).kind == "model" else 1.0 for j in self.jobs}
        if len(scales) > 1:
            i = next(i for i, j in enumerate(self.jobs) if j.workload is not None)
            raise FieldProblem(f"jobs[{i}].workload.grad_scale", "every job of a scenario sends the same fraction of "
                                                                  f"its gradients (it scales every byte: links, flows), "
                                                                  f"got {', '.join(f'{g:g}' for g in sorted(scales))}")

    def workload_of(self, job: ScenarioJob) -> WorkloadConfig:
        return job.workload or self.workload

    @property
    def data_scale(self) -> float:
        """G: the fraction of every byte of the cluster the scenario sends, its model jobs' grad_scale
        (1 without model jobs). Link, shaped and flow rates are the cluster's; they run x G / F."""
        w = self.workload_of(self.jobs[0])
        return w.grad_scale if w.kind == "model" else 1.0


# ---------------------------------------------------------------------------- loading

def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file; ScenarioError names the file and the field."""
    from controller.yaml_file import read_yaml

    return parse_scenario(read_yaml(path, "scenario", ScenarioError), path)


def parse_scenario(data: Any, source: str) -> Scenario:
    """A Scenario from a decoded file, checked against its topology."""
    from controller.topology import load_topology

    try:
        scn = load(Scenario, data, source)
    except ConfigError as exc:
        raise ScenarioError(str(exc)) from None
    path = resolve_topology(scn.network.topo, str(REPO))
    if path is None:
        raise ScenarioError(f"{source}: field 'network.topo': no topology file {scn.network.topo!r}")
    here = Path(source).parent
    scn = dataclasses.replace(scn, trace_traffic=tuple(dataclasses.replace(t, file=str(here / t.file))
                                                       for t in scn.trace_traffic))
    try:
        check_topology(scn, load_topology(path))
    except FieldProblem as p:
        raise ScenarioError(f"{source}: field '{p.field}': {p.problem}") from None
    return dataclasses.replace(scn, name=scn.name or Path(source).stem,
                               network=dataclasses.replace(scn.network, topo=path))


def check_topology(scn: Scenario, topo: Any) -> None:
    """FieldProblem for any host, switch or link the scenario names that the topology lacks."""
    def host(field: str, name: str | None) -> None:
        if name is not None and name not in topo.hosts:
            raise FieldProblem(field, f"{name!r} is not a host of {topo.source}")

    for i, job in enumerate(scn.jobs):
        for j, w in enumerate(job.workers):
            host(f"jobs[{i}].workers[{j}]", w)
        host(f"jobs[{i}].ps", job.ps)
        if job.root is not None and job.root not in topo.switches:
            raise FieldProblem(f"jobs[{i}].root", f"{job.root!r} is not a switch of {topo.source}")
    for switch in scn.slots:
        if switch not in topo.switches:
            raise FieldProblem(f"slots.{switch}", f"not a switch of {topo.source}")
    for i, s in enumerate(scn.shaping):
        if len(s.ends) != 2 or not all(e in topo.switches for e in s.ends):
            raise FieldProblem(f"shaping[{i}].link", f"{s.link!r} is not SWITCH-SWITCH (the first one's egress "
                                                     "toward the second is shaped)")
        try:
            topo.link_between(*s.ends)
        except KeyError:
            raise FieldProblem(f"shaping[{i}].link", f"{topo.source} has no link {s.link}") from None
    for i, flow in enumerate(scn.traffic):
        host(f"traffic[{i}].src", flow.src)
        host(f"traffic[{i}].dst", flow.dst)
    for i, r in enumerate(scn.random_traffic):
        for end in ("src", "dst"):
            for j, h in enumerate(getattr(r, end)):
                host(f"random_traffic[{i}].{end}[{j}]", h)
    for i, t in enumerate(scn.trace_traffic):
        try:
            for h in sorted(timeline.trace_hosts(t.file)):
                host(f"trace_traffic[{i}].file", h)
        except timeline.TraceError as exc:
            raise FieldProblem(f"trace_traffic[{i}].file", str(exc)) from None


# ---------------------------------------------------------------------------- one mode

class ModeRun(Run):
    """One mode of a scenario on a fresh network (module docstring); `execute()` returns its results."""

    cfg: Scenario
    asked: Scenario

    def __init__(self, scn: Scenario, mode: str, run_dir: Path, reporter: Any = None):
        self.mode = mode
        self.flow_procs: list = []
        self.adapter: Any = None
        self.moves: list = []
        self.t0 = 0.0  # time.monotonic() when the scenario's timeline starts
        self.started: set[str] = set()
        self.finished_s: dict[str, float] = {}  # job -> this machine's seconds after t0
        self.timeline = timeline.build(scn, scn.train.seed)  # the cluster's time (the plan's stragglers)
        self.real_timeline = self.timeline.scaled(scn.scale, scn.data_scale)  # this machine's
        super().__init__(scn, reporter, run_dir)

    @property
    def innet(self) -> bool:
        return self.mode in ("aware", "unaware", "split", "relocate", "atp")

    @property
    def contention_aware(self) -> bool:
        """Trees move off congested links (and AIMD windows are weighted): mode aware, and mode split, which
        is aware's in-network with the stragglers seated apart, so that split against aware measures the
        straggler handling alone."""
        return self.mode in ("aware", "split")

    def data_scale(self) -> float:
        return self.cfg.data_scale

    def load_topology(self) -> Any:
        from controller.tenants import with_slot_budgets

        return with_slot_budgets(super().load_topology(), self.cfg.slots)

    def plan_jobs(self) -> list[JobRun]:
        from controller.placement import Job
        from controller.tenants import REJECTED

        jobs = [JobRun(j.name, list(j.workers), "innet" if self.innet else self.mode, self.logs / j.name,
                       prefix=f"{j.name}.", ps=j.ps if self.mode in ("ps", "atp") else None, workload=j.workload)
                for j in self.cfg.jobs]
        if self.mode == "split":
            self.split_jobs(jobs)
        if self.mode == "hostagg":
            for spec, job in zip(self.cfg.jobs, jobs):
                job.aggregators = [spec.ps] if spec.ps else []
        if self.innet:
            wanted = [Job(j.name, tuple(run.members), j.root, j.k, j.slots, standby=run.standby)
                      for j, run in zip(self.cfg.jobs, jobs)]
            if self.mode == "atp":
                self.tenancy = self.share(jobs, wanted)
            else:
                self.tenancy = self.admit(jobs, wanted, "move" if self.mode == "relocate" else self.cfg.admission)
            jobs = [j for j in jobs if j.admission.status != REJECTED]
        return jobs

    def share(self, jobs: list[JobRun], wanted: list[Any]) -> Any:
        """Mode atp: every job in-network in its root's shared pool (controller.tenants.share)."""
        from controller.tenants import share

        tenancy = share(self.topo, wanted, self.cfg.job.algo, self.cfg.train.seed)
        placed = {jp.job.name: jp for jp in tenancy.placements}
        for job in jobs:
            job.admission, job.placement = tenancy.admission(job.name), placed[job.name]
        return tenancy

    def split_jobs(self, jobs: list[JobRun]) -> None:
        """Mode split: each job with stragglers gets its aggregator on its `ps` host, else on a host no job uses."""
        used = {h for j in self.cfg.jobs for h in (*j.workers, *([j.ps] if j.ps else []))}
        for spec, job in zip(self.cfg.jobs, jobs):
            taken = used | {h for other in jobs for h in other.aggregators}
            job.scheme = "split"
            self.split_job(job, self.stragglers_of(job),
                           ([spec.ps] if spec.ps else []) + [h for h in self.topo.hosts if h not in taken])

    def slowed_of(self, job: JobRun) -> list[str]:
        """The job's workers whose compute is slowed: `job.stragglers`, and every worker the timeline slows
        (`stragglers`, `random_stragglers`), in rank order."""
        return [w for w in job.workers if w in self.cfg.job.stragglers or w in self.timeline.slowdowns]

    def stragglers_of(self, job: JobRun) -> list[str]:
        """The job's workers split aggregation seats at its aggregator: the planned stragglers, whose
        slowdowns are known in advance (`job.stragglers`, the scheduled `stragglers`), never workers only
        `random_stragglers` slow (unpredictable: they slow any scheme, and the tree waits for them within
        the staleness rules like any on-time worker); in rank order, at most all but one, those scheduled
        longest ((factor - 1) x duration, summed) after `job.stragglers`: split aggregation keeps an
        on-time worker in the tree beside the seat."""
        def extra_s(worker: str) -> float:
            if worker in self.cfg.job.stragglers:
                return math.inf
            return sum((p.factor - 1) * p.duration_s for p in self.cfg.stragglers if p.worker == worker)

        slow = sorted((w for w in job.workers if extra_s(w) > 0), key=extra_s, reverse=True)[:len(job.workers) - 1]
        return [w for w in job.workers if w in slow]

    def fallback_scheme(self, job: JobRun, tenancy: Any) -> str:
        """A job the switches cannot hold runs on its parameter server, or a ring when it has none."""
        ps = next(j.ps for j in self.cfg.jobs if j.name == job.name)
        job.ps = ps
        return "ps" if ps else "ring"

    def push_pipeline(self) -> None:
        """The program and routes, then the scenario's shaped link directions through the side channels
        (their rates x G / F and delays x F, as the links': testbed.timescale)."""
        from testbed.network import queue_commands

        super().push_pipeline()
        factor = self.asked.scale
        for s in self.cfg.shaping:
            switch, peer = s.ends
            port = self.topo.port_of(switch, peer)
            rate = s.rate_mbps * self.cfg.data_scale / factor if s.rate_mbps is not None else None
            delay = s.delay_ms * factor if s.delay_ms is not None else None
            for line in queue_commands(port, self.cfg.network.target, rate, delay, None, s.depth_pkts):
                self.conns[switch].side_command(line)

    def job_spec(self, job: JobRun, spec: Any) -> Any:
        """The run's spec (Run.job_spec); contention-aware with AIMD, MLfabric-style ordering weights
        (hosts.pacing.transfer_weights): every job trains the same model, so one step puts the same
        bytes on a shared link, and the order follows how many workers each job's update unblocks."""
        from hosts.pacing import transfer_weights

        weight = 1.0
        if self.contention_aware and self.cfg.job.pacing == "aimd":
            innet = {j.name: len(j.workers) for j in self.jobs if j.placement}
            weight = transfer_weights(innet, {name: 1.0 for name in innet})[job.name]
        spill_ip = self.topo.hosts[job.ps].ip if spec.pool and job.ps else ""
        return dataclasses.replace(super().job_spec(job, spec), weight=weight, spill_ip=spill_ip)

    def straggler(self, host: str) -> Any:
        """Run.straggler, with the timeline's slow periods (scheduled and random stragglers) on this
        machine's clock (from t0, so asked once the timeline started: when the job's agents are configured)."""
        periods = tuple((self.t0 + s, self.t0 + e, f) for s, e, f in self.real_timeline.slowdowns.get(host, ()))
        return dataclasses.replace(super().straggler(host), periods=periods)

    def start_hosts(self) -> None:
        """Background receivers, the jobs that arrive at once, the senders (each on the timeline's clock);
        the adaptation loop when contention-aware."""
        from controller.adapt import Adapter

        head_start = 0.5  # receivers listening before TCP senders connect
        for flow in self.real_timeline.flows:
            self.flow_procs.append(self.start(flow.dst, f"{flow.name}.recv", [
                "traffic", "recv", "--proto", flow.proto, "--port", str(flow.port),
                "--duration", repr(flow.end_s + head_start + RECEIVER_SLACK_S),
                "--out", str(self.logs / f"{flow.name}.recv.json")]))
        time.sleep(head_start)
        self.t0 = time.monotonic()
        self.start_arrived()
        for flow in self.real_timeline.flows:
            schedule = self.logs / f"{flow.name}.schedule.json"
            schedule.write_text(json.dumps({"start": self.t0, "intervals": [list(i) for i in flow.intervals]}) + "\n")
            self.flow_procs.append(self.start(flow.src, f"{flow.name}.send", [
                "traffic", "send", "--proto", flow.proto, "--dst", self.topo.hosts[flow.dst].ip,
                "--port", str(flow.port), "--size", str(flow.size), "--schedule", str(schedule),
                "--out", str(self.logs / f"{flow.name}.send.json")]))
        if self.contention_aware:
            a = self.cfg.adapt
            self.adapter = Adapter(self.topo, self.installer, [j.placement for j in self.jobs if j.placement],
                                   a.period_s, a.util_threshold, a.qdepth_threshold, self.cfg.job.algo).start()

    def start_arrived(self) -> None:
        """Start every job whose arrival time has come."""
        now = time.monotonic() - self.t0
        for job in self.jobs:
            if job.name not in self.started and self.real_timeline.arrivals[job.name] <= now:
                self.started.add(job.name)
                self.start_job(job, self.write_agent_config(job, f"{job.prefix}agent.json"))

    def start_meter(self) -> None:
        """The CPU meter, and the link meter: a job's verdict needs what links carried in its own phases."""
        from testbed.fidelity import LinkMeter

        super().start_meter()
        if not self.cfg.network.servers:  # the switches' interfaces are on this machine
            self.link_meter = LinkMeter(self.tb.link_counter_files()).start()

    def watch(self) -> None:
        """Until every job arrived and its processes exited 0, recording when each job finished."""
        deadline = self.t0 + self.cfg.timeout_s
        while len(self.finished_s) < len(self.jobs):
            self.start_arrived()
            for job in self.jobs:
                failed = [f for f in (p.failure() for p in (*job.processes, *job.services)) if f]
                if failed:
                    raise RunFailed(f"mode {self.mode}: job {job.name}: {failed[0]} (logs in {self.logs})")
                done = job.processes and all(p.popen.poll() == 0 for p in job.processes)
                if job.name not in self.finished_s and done:
                    self.finished_s[job.name] = round(time.monotonic() - self.t0, 3)
            dead = self.tb.dead_switches()
            if dead:
                raise RunFailed(f"mode {self.mode}: switch {dead[0]}")
            if self.adapter is not None and self.adapter.error is not None:
                raise RunFailed(f"mode {self.mode}: adaptation failed: {self.adapter.error}")
            if time.monotonic() > deadline:
                running = sorted({j.name for j in self.jobs} - set(self.finished_s))
                raise RunFailed(f"mode {self.mode}: jobs {', '.join(running)} still running after "
                                f"{self.cfg.timeout_s:g} s (logs in {self.logs})")
            time.sleep(0.2)

    def stop_hosts(self) -> None:
        if self.adapter is not None:
            self.adapter.stop()
            self.moves = self.adapter.events
        if self.link_meter is not None:
            self.link_meter.stop()
        super().stop_hosts()
        for proc in self.flow_procs:
            proc.stop()

    def results(self, seconds: float, error: Exception | None) -> dict:
        return mode_results(self, seconds, error)

    def write_results(self, results: dict) -> None:
        (self.run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")


class _Say:
    """A Reporter that prints status lines indented (the scenario's own lines are not)."""

    def __init__(self, say: Any):
        self.say = say

    def status(self, message: str) -> None:
        self.say(f"  {message}")

    def training_step(self, record: dict, total_steps: int) -> None:
        pass

    def finished(self) -> None:
        pass


def run_scenario(scn: Scenario, out: str = "runs", modes: tuple[str, ...] | None = None, say: Any = print) -> dict:
    """Every mode on its own fresh network; summary.json and the plot in the scenario folder."""
    from testbed.network import new_run_dir

    root = Path(new_run_dir(out))
    by_mode = {}
    for mode in modes or scn.modes:
        say(f"{scn.name}: mode {mode} in {root / mode}")
        by_mode[mode] = ModeRun(scn, mode, root / mode, _Say(say)).execute()
    summary = summarize(scn, by_mode)
    summary["run_dir"] = str(root)
    (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(by_mode, summary, root / ("time_to_accuracy.png" if summary["metric"] == "time_to_accuracy_s"
                                   else "iterations.png"))
    return summary


# ---------------------------------------------------------------------------- aggnet experiment

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="scenario YAML (experiments/*.yaml)")
    parser.add_argument("--modes", help=f"comma-separated subset of the file's modes ({', '.join(MODES)})")
    parser.add_argument("--out", default="runs", help="folder for the run folder (default: runs)")


def run(args: argparse.Namespace) -> int:
    scn = load_scenario(args.file)
    modes = tuple(m for m in args.modes.split(",") if m) if args.modes else None
    for mode in modes or ():
        if mode not in MODES:
            raise ScenarioError(f"--modes: {mode!r} is not one of {', '.join(MODES)}")
    if modes:  # checked as the file's own modes are (a server host per job for ps, atp, hostagg)
        try:
            scn = dataclasses.replace(scn, modes=modes)
        except FieldProblem as p:
            raise ScenarioError(f"--modes {args.modes}: {args.file}: field '{p.field}': {p.problem}") from None
    if os.geteuid() != 0:
        raise ScenarioError("aggnet experiment: Mininet needs root (run with sudo)")
    summary = run_scenario(scn, args.out, modes)
    print(summary["table"], end="")
    print(json.dumps({k: summary[k] for k in ("metric", "mean", "ratio_to_aware", "moves", "run_dir")}, indent=2))
    return 0
