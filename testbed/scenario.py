"""Multi-job scenarios: several jobs on one network, background traffic, contention awareness.

    aggnet experiment experiments/mlfabric.yaml

A scenario file (YAML; experiments/README.md documents every field) is a run configuration
(testbed.config.RunConfig: `network`, `job` options every job shares, `workload`, `train`,
`timeout_s`, ...) plus the jobs (workers, root, k, slots, parameter-server host), per-switch slot
budgets, shaped link directions, a schedule of background flows and the modes to compare. Each
mode is one ModeRun (a testbed.run.Run variant) on a fresh network with the same jobs and traffic:

- `aware`: in-network aggregation, and the controller's adaptation loop (controller.adapt)
  moves trees off congested links while the jobs train; with `pacing: aimd` the jobs also
  get MLfabric-style ordering weights (hosts.pacing);
- `unaware`: in-network aggregation with the trees placed once;
- `split`: in-network with the trees placed once, and a job with stragglers (`job.stragglers`)
  aggregates split (hosts.split_agg): the switches sum its on-time workers, a host aggregator
  in the stragglers' seat (the job's `ps` host, else an idle one) adds their late gradients;
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
A mode's folder gets logs/, results.json (per-job accuracy, time to the target accuracy,
per-job counters, moves, flows); the scenario folder gets summary.json with the ratios and
time_to_accuracy.png.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import ConfigError, FieldProblem, load, option
from testbed.config import RunConfig, resolve_topology
from testbed.report import accuracy_curve, time_to_accuracy
from testbed.run import REPO, JobRun, Run, RunFailed, read_aggregation_stats, read_json, read_jsonl

MODES = ("aware", "unaware", "split", "relocate", "atp", "hostagg", "ps", "ring")
PROTOCOLS = ("udp", "tcp")
TRAFFIC_PORT_BASE = 5001


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
    period_s: float = option(1.0, minimum=0.1)
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
    adapt: AdaptConfig = AdaptConfig()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scale != 1:  # its flows, shaping and adaptation periods are in real time
            raise FieldProblem("scale", "scenarios do not run time-scaled yet; leave scale at 1")
        if not self.jobs:
            raise FieldProblem("jobs", "needs at least one job")
        if self.workload.kind == "model":
            raise FieldProblem("workload.workload", "scenarios run training or the all-reduce benchmark, not "
                                                    "model workloads (use aggnet run or aggnet compare)")
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


def flows(scn: Scenario) -> list[Flow]:
    """The traffic with default names and ports filled in (flow i: flow<i+1>, port 5001 + i)."""
    return [dataclasses.replace(f, name=f.name or f"flow{i + 1}", port=f.port or TRAFFIC_PORT_BASE + i)
            for i, f in enumerate(scn.traffic)]


# ---------------------------------------------------------------------------- one mode

class ModeRun(Run):
    """One mode of a scenario on a fresh network (module docstring); `execute()` returns its results."""

    cfg: Scenario

    def __init__(self, scn: Scenario, mode: str, run_dir: Path, reporter: Any = None):
        self.mode = mode
        self.flow_procs: list = []
        self.adapter: Any = None
        self.moves: list = []
        self.t0 = 0.0
        self.finished_s: dict[str, float] = {}
        super().__init__(scn, reporter, run_dir)

    @property
    def innet(self) -> bool:
        return self.mode in ("aware", "unaware", "split", "relocate", "atp")

    def load_topology(self) -> Any:
        from controller.tenants import with_slot_budgets

        return with_slot_budgets(super().load_topology(), self.cfg.slots)

    def plan_jobs(self) -> list[JobRun]:
        from controller.placement import Job
        from controller.tenants import REJECTED

        jobs = [JobRun(j.name, list(j.workers), "innet" if self.innet else self.mode, self.logs / j.name,
                       prefix=f"{j.name}.", ps=j.ps if self.mode in ("ps", "atp") else None) for j in self.cfg.jobs]
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

    def stragglers_of(self, job: JobRun) -> list[str]:
        """The job's workers that straggle (`job.stragglers`), in rank order."""
        return [w for w in job.workers if w in self.cfg.job.stragglers]

    def fallback_scheme(self, job: JobRun, tenancy: Any) -> str:
        """A job the switches cannot hold runs on its parameter server, or a ring when it has none."""
        ps = next(j.ps for j in self.cfg.jobs if j.name == job.name)
        job.ps = ps
        return "ps" if ps else "ring"

    def push_pipeline(self) -> None:
        """The program and routes, then the scenario's shaped link directions through the side channels."""
        from testbed.network import queue_commands

        super().push_pipeline()
        for s in self.cfg.shaping:
            switch, peer = s.ends
            port = self.topo.port_of(switch, peer)
            for line in queue_commands(port, self.cfg.network.target, s.rate_mbps, s.delay_ms, None, s.depth_pkts):
                self.conns[switch].side_command(line)

    def job_spec(self, job: JobRun, spec: Any) -> Any:
        """The run's spec (Run.job_spec); with mode aware and AIMD, MLfabric-style ordering weights
        (hosts.pacing.transfer_weights): every job trains the same model, so one step puts the same
        bytes on a shared link, and the order follows how many workers each job's update unblocks."""
        from hosts.pacing import transfer_weights

        weight = 1.0
        if self.mode == "aware" and self.cfg.job.pacing == "aimd":
            innet = {j.name: len(j.workers) for j in self.jobs if j.placement}
            weight = transfer_weights(innet, {name: 1.0 for name in innet})[job.name]
        spill_ip = self.topo.hosts[job.ps].ip if spec.pool and job.ps else ""
        return dataclasses.replace(super().job_spec(job, spec), weight=weight, spill_ip=spill_ip)

    def start_hosts(self) -> None:
        """Background receivers, the jobs, then the senders; the adaptation loop in mode aware."""
        from controller.adapt import Adapter

        for flow in flows(self.cfg):
            until = flow.start_s + flow.duration_s + 3.0
            self.flow_procs.append(self.start(flow.dst, f"{flow.name}.recv", [
                "traffic", "recv", "--proto", flow.proto, "--port", str(flow.port), "--duration", str(until),
                "--out", str(self.logs / f"{flow.name}.recv.json")]))
        time.sleep(0.5)  # receivers listening before TCP senders connect
        self.t0 = time.monotonic()
        super().start_hosts()
        for flow in flows(self.cfg):
            self.flow_procs.append(self.start(flow.src, f"{flow.name}.send", [
                "traffic", "send", "--proto", flow.proto, "--dst", self.topo.hosts[flow.dst].ip,
                "--port", str(flow.port), "--rate-mbps", str(flow.rate_mbps), "--size", str(flow.size),
                "--delay", str(flow.start_s), "--duration", str(flow.duration_s), "--on", str(flow.on_s),
                "--off", str(flow.off_s), "--out", str(self.logs / f"{flow.name}.send.json")]))
        if self.mode == "aware":
            a = self.cfg.adapt
            self.adapter = Adapter(self.topo, self.installer, [j.placement for j in self.jobs if j.placement],
                                   a.period_s, a.util_threshold, a.qdepth_threshold, self.cfg.job.algo).start()

    def watch(self) -> None:
        """Until every job's processes exited 0, recording when each job finished."""
        deadline = self.t0 + self.cfg.timeout_s
        while len(self.finished_s) < len(self.jobs):
            for job in self.jobs:
                failed = [f for f in (p.failure() for p in (*job.processes, *job.services)) if f]
                if failed:
                    raise RunFailed(f"mode {self.mode}: job {job.name}: {failed[0]} (logs in {self.logs})")
                if job.name not in self.finished_s and all(p.popen.poll() == 0 for p in job.processes):
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
        super().stop_hosts()
        for proc in self.flow_procs:
            proc.stop()

    def results(self, seconds: float, error: Exception | None) -> dict:
        scn = self.cfg
        jobs = {}
        for job in self.jobs:
            entry: dict[str, Any] = {"scheme": job.scheme, "workers": job.workers,
                                     "wall_s": self.finished_s.get(job.name)}
            if job.job_id is not None:
                entry["job_id"] = job.job_id
                entry["placement"] = self.placement_json(job)
                entry["counters"] = {s: c["jobs"][job.job_id] for s, c in self.counters.items()
                                     if c["jobs"][job.job_id]["received"]}
            if job.aggregators:
                entry.update(aggregators=job.aggregators, aggregation=read_aggregation_stats(job.out))
            if job.split:
                entry["split_workers"] = job.split
            spilled = [r["spilled_chunks"] for h in job.workers
                       if (r := read_json(job.result_file(h, scn.workload.kind))) and "spilled_chunks" in r]
            if spilled:  # every worker hears of every spilled chunk of its job
                entry["spilled_chunks"] = max(spilled)
            if scn.workload.workload == "train":  # timed on an on-time worker: a straggler may skip steps
                late = self.stragglers_of(job)
                records = read_jsonl(job.out / f"{next((w for w in job.workers if w not in late), job.workers[0])}"
                                                f".metrics.jsonl")
                evals = [r for r in records if "test_accuracy" in r]
                entry.update(steps=len(records), final_accuracy=evals[-1]["test_accuracy"] if evals else None,
                             train_time_s=round(sum(r.get("step_time_s", 0.0) for r in records), 3),
                             time_to_accuracy_s=time_to_accuracy(records, scn.target_accuracy),
                             accuracy_curve=accuracy_curve(records))
            else:
                benches = [read_json(job.out / f"{h}.bench.json") for h in job.workers]
                entry.update(allreduce_exact=all(b is not None and b.get("exact") for b in benches),
                             seconds=max((b["seconds"] for b in benches if b), default=None))
            jobs[job.name] = entry
        results = {"scenario": scn.name, "topology": scn.network.topo, "mode": self.mode, "seed": scn.train.seed,
                   "target_accuracy": scn.target_accuracy, "wall_time_s": seconds,
                   "admissions": [a.to_json() for a in self.tenancy.admissions] if self.innet else [],
                   "jobs": jobs, "moves": self.moves,
                   "flows": {f.name: {"send": read_json(self.logs / f"{f.name}.send.json"),
                                      "recv": read_json(self.logs / f"{f.name}.recv.json")} for f in flows(scn)},
                   "ports": {s: c["ports"] for s, c in self.counters.items()},
                   "queues": self.queues, "fidelity": self.fidelity}
        if error is not None:
            results["error"] = str(error)
        return results

    def write_results(self, results: dict) -> None:
        (self.run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")


# ---------------------------------------------------------------------------- all modes, summary

def summarize(scn: Scenario, by_mode: dict[str, dict]) -> dict:
    """Per mode: each job's time to the target (or wall time), and ratios against mode aware."""
    key = ("time_to_accuracy_s" if scn.workload.workload == "train" and scn.target_accuracy
           else "seconds" if scn.workload.workload == "allreduce" else "wall_s")
    table = {mode: {name: job.get(key) for name, job in res["jobs"].items()} for mode, res in by_mode.items()}
    means = {mode: _mean(values.values()) for mode, values in table.items()}
    base = means.get("aware")
    ratios = {mode: round(m / base, 3) for mode, m in means.items() if m is not None and base}
    return {"scenario": scn.name, "metric": key, "per_job": table, "mean": means, "ratio_to_aware": ratios,
            "moves": {mode: len(res.get("moves", [])) for mode, res in by_mode.items()}}


def _mean(values: Any) -> float | None:
    values = list(values)
    if not values or any(v is None for v in values):
        return None  # a job that never reached the target has no time to compare
    return round(sum(values) / len(values), 3)


def plot(by_mode: dict[str, dict], summary: dict, path: Path) -> Path:
    """Accuracy over training time per job and mode, and the compared times as bars."""
    from testbed.plots import pyplot, save_figure

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for mode, res in by_mode.items():
        for name, job in res["jobs"].items():
            curve = job.get("accuracy_curve") or []
            if curve:
                left.plot([t for t, _ in curve], [a for _, a in curve], marker=".", label=f"{mode} / {name}")
    left.set(xlabel="training time (s)", ylabel="test accuracy", title="accuracy over time")
    left.legend(fontsize=7)
    modes = list(summary["per_job"])
    jobs = sorted({j for per in summary["per_job"].values() for j in per})
    width = 0.8 / max(1, len(jobs))
    for i, name in enumerate(jobs):
        values = [summary["per_job"][m].get(name) or 0 for m in modes]
        right.bar([x + i * width for x in range(len(modes))], values, width, label=name)
    right.set_xticks([x + width * (len(jobs) - 1) / 2 for x in range(len(modes))], modes)
    right.set(ylabel=summary["metric"].replace("_", " "), title="per mode (0: target not reached)")
    right.legend(fontsize=7)
    return save_figure(fig, path)


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
    if scn.workload.workload == "train":
        plot(by_mode, summary, root / "time_to_accuracy.png")
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
    if os.geteuid() != 0:
        raise ScenarioError("aggnet experiment: Mininet needs root (run with sudo)")
    summary = run_scenario(scn, args.out, modes)
    print(json.dumps({k: summary[k] for k in ("metric", "mean", "ratio_to_aware", "moves", "run_dir")}, indent=2))
    return 0
