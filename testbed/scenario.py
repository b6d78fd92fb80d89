"""Multi-job scenarios: several jobs on one network, background traffic, contention awareness.

    aggnet experiment experiments/mlfabric.yaml

A scenario file (YAML; experiments/README.md documents every field) names a topology, the
jobs (workers, root, k, slots, parameter-server host), per-switch slot budgets, shaped links,
a schedule of background flows and the modes to compare. Each mode is one run of a fresh
network with the same jobs and the same traffic schedule:

- `aware`: in-network aggregation, and the controller's adaptation loop (controller.adapt)
  moves trees off congested links while the jobs train; with `pacing: aimd` the jobs also
  get MLfabric-style ordering weights (hosts.pacing);
- `unaware`: in-network aggregation with the trees placed once;
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.yaml_file import read_yaml
from protocol.wire import DEFAULT_LANES, LANE_COUNTS

MODES = ("aware", "unaware", "ps", "ring")
WORKLOADS = ("train", "allreduce")
PROTOCOLS = ("udp", "tcp")
TRAFFIC_PORT_BASE = 5001
_TOP_KEYS = {"name", "topology", "algo", "admission", "slots", "workload", "train", "elements", "lanes", "link_mbps",
             "pacing", "target_accuracy", "timeout_s", "modes", "adapt", "jobs", "shaping", "traffic", "seed"}
_JOB_KEYS = {"name", "workers", "root", "k", "slots", "ps"}
_SHAPE_KEYS = {"link", "rate_mbps", "delay_ms", "depth_pkts"}
_FLOW_KEYS = {"name", "src", "dst", "proto", "port", "rate_mbps", "size", "start_s", "duration_s", "on_s", "off_s"}
_ADAPT_KEYS = {"period_s", "util_threshold", "qdepth_threshold"}


class ScenarioError(Exception):
    """A scenario file that cannot run; one line naming the file and field, exit 2."""

    exit_code = 2


@dataclass(frozen=True)
class JobConf:
    name: str
    workers: tuple[str, ...]
    root: str | None = None
    k: int = 1
    slots: int = 32
    ps: str | None = None


@dataclass(frozen=True)
class Shaping:
    switch: str  # the egress side of the shaped direction
    peer: str
    rate_mbps: float | None = None
    delay_ms: float | None = None
    depth_pkts: int | None = None


@dataclass(frozen=True)
class Flow:
    name: str
    src: str
    dst: str
    proto: str = "udp"
    port: int = TRAFFIC_PORT_BASE
    rate_mbps: float = 1.0
    size: int = 1000
    start_s: float = 0.0
    duration_s: float = 10.0
    on_s: float = 1.0
    off_s: float = 0.0


@dataclass(frozen=True)
class AdaptConf:
    period_s: float = 1.0
    util_threshold: float = 0.8
    qdepth_threshold: int = 16


@dataclass(frozen=True)
class Scenario:
    source: str
    name: str
    topology: str  # a resolved path
    jobs: tuple[JobConf, ...]
    modes: tuple[str, ...] = ("aware", "unaware", "ps")
    algo: str = "soar"
    admission: str = "downgrade"
    slots: dict[str, int] = field(default_factory=dict)
    workload: str = "train"
    train: Any = None  # hosts.agent_config.TrainConfig
    elements: int = 10_000
    lanes: int = DEFAULT_LANES  # values per aggregation packet: picks p4src/aggnet*.p4 (protocol.wire.program_name)
    link_mbps: float | None = None  # every link's rate, as `aggnet run --link-mbps`; shaping[] then overrides
    pacing: str = "fixed"  # in-network workers: hosts.pacing policy; aimd in mode aware adds the job weights
    target_accuracy: float | None = None
    timeout_s: float = 600.0
    adapt: AdaptConf = AdaptConf()
    shaping: tuple[Shaping, ...] = ()
    traffic: tuple[Flow, ...] = ()
    seed: int = 0


# ---------------------------------------------------------------------------- loading

class _Fields:
    """Typed reads of one mapping that fail with 'FILE: field 'WHERE.KEY': PROBLEM'."""

    def __init__(self, source: str, data: Any, where: str, allowed: set[str]):
        self.source, self.where = source, where
        if not isinstance(data, dict):
            self.fail("", f"expected a mapping, got {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            self.fail(unknown[0], f"unknown (known: {', '.join(sorted(allowed))})")
        self.data = data

    def path(self, key: str) -> str:
        return ".".join(p for p in (self.where, key) if p)

    def fail(self, key: str, problem: str) -> None:
        raise ScenarioError(f"{self.source}: field '{self.path(key)}': {problem}")

    def get(self, key: str, kind: type | tuple, default: Any = ..., minimum: float | None = None) -> Any:
        if key not in self.data:
            if default is ...:
                self.fail(key, "missing")
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            self.fail(key, f"expected {names}, got {value!r}")
        if minimum is not None and value < minimum:
            self.fail(key, f"must be >= {minimum:g}, got {value}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(key, str, default)
        if value not in choices:
            self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return value


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file; ScenarioError names the file and the field."""
    return parse_scenario(read_yaml(path, "scenario", ScenarioError), path)


def parse_scenario(data: Any, source: str) -> Scenario:
    from controller.topology import load_topology
    from hosts.agent_config import ConfigError, TrainConfig
    from hosts.pacing import PACING_CHOICES
    from testbed.experiment import RunError, resolve_topology

    top = _Fields(source, data, "", _TOP_KEYS)
    try:
        topo_path = resolve_topology(top.get("topology", str))
    except RunError as exc:
        top.fail("topology", str(exc).split(": ", 1)[1])
    topo = load_topology(topo_path)
    try:
        train = TrainConfig.from_dict(top.get("train", dict, {}), source)
    except ConfigError as exc:
        raise ScenarioError(str(exc)) from None
    modes = top.get("modes", list, ["aware", "unaware", "ps"])
    for i, mode in enumerate(modes):
        if mode not in MODES:
            top.fail(f"modes[{i}]", f"{mode!r} is not one of {', '.join(MODES)}")
    jobs = tuple(_job(source, raw, i, topo) for i, raw in enumerate(top.get("jobs", list)))
    if not jobs:
        top.fail("jobs", "needs at least one job")
    _check_hosts(source, jobs, "ps" in modes)
    slots = top.get("slots", dict, {})
    for switch, value in slots.items():
        if switch not in topo.switches:
            top.fail(f"slots.{switch}", f"not a switch of {topo_path}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            top.fail(f"slots.{switch}", f"expected an integer >= 0, got {value!r}")
    adapt_f = _Fields(source, top.get("adapt", dict, {}), "adapt", _ADAPT_KEYS)
    adapt = AdaptConf(adapt_f.get("period_s", float, 1.0, minimum=0.1),
                      adapt_f.get("util_threshold", float, 0.8, minimum=0.01),
                      adapt_f.get("qdepth_threshold", int, 16, minimum=1))
    target = top.get("target_accuracy", float, None)
    if target is not None and not 0 < target <= 1:
        top.fail("target_accuracy", f"must be in (0, 1], got {target}")
    return Scenario(
        source=source, name=top.get("name", str, Path(source).stem), topology=topo_path, jobs=jobs,
        modes=tuple(modes), algo=top.get("algo", str, "soar"),
        admission=top.choice("admission", ("downgrade", "reject"), "downgrade"), slots=dict(slots),
        workload=top.choice("workload", WORKLOADS, "train"), train=train,
        elements=top.get("elements", int, 10_000, minimum=1), lanes=_lanes(top),
        link_mbps=top.get("link_mbps", float, None, minimum=0.001),
        pacing=top.choice("pacing", PACING_CHOICES, "fixed"),
        target_accuracy=target,
        timeout_s=top.get("timeout_s", float, 600.0, minimum=1), adapt=adapt,
        shaping=tuple(_shaping(source, raw, i, topo) for i, raw in enumerate(top.get("shaping", list, []))),
        traffic=tuple(_flow(source, raw, i, topo) for i, raw in enumerate(top.get("traffic", list, []))),
        seed=top.get("seed", int, 0))


def _lanes(top: _Fields) -> int:
    lanes = top.get("lanes", int, DEFAULT_LANES)
    if lanes not in LANE_COUNTS:
        top.fail("lanes", f"{lanes} is not one of {', '.join(map(str, LANE_COUNTS))}")
    return lanes


def _host(f: _Fields, key: str, topo: Any, value: Any) -> str:
    if not isinstance(value, str) or value not in topo.hosts:
        f.fail(key, f"{value!r} is not a host of {topo.source}")
    return value


def _job(source: str, raw: Any, i: int, topo: Any) -> JobConf:
    f = _Fields(source, raw, f"jobs[{i}]", _JOB_KEYS)
    workers = f.get("workers", list)
    if len(workers) < 2:
        f.fail("workers", f"a job needs at least 2 workers, got {len(workers)}")
    workers = tuple(_host(f, f"workers[{j}]", topo, w) for j, w in enumerate(workers))
    if len(set(workers)) != len(workers):
        f.fail("workers", "a host is listed twice")
    root = f.get("root", str, None)
    if root is not None and root not in topo.switches:
        f.fail("root", f"{root!r} is not a switch of {topo.source}")
    ps = f.get("ps", str, None)
    if ps is not None:
        _host(f, "ps", topo, ps)
    return JobConf(f.get("name", str), workers, root, f.get("k", int, 1, minimum=0),
                   f.get("slots", int, 32, minimum=1), ps)


def _check_hosts(source: str, jobs: tuple[JobConf, ...], need_ps: bool) -> None:
    """Each host runs at most one job process: the aggregation and PS ports are per host."""
    owner: dict[str, str] = {}
    for i, job in enumerate(jobs):
        if job.name in [j.name for j in jobs[:i]]:
            raise ScenarioError(f"{source}: field 'jobs[{i}].name': duplicate job name '{job.name}'")
        if need_ps and job.ps is None:
            raise ScenarioError(f"{source}: field 'jobs[{i}].ps': missing (mode ps needs a server host per job)")
        for role, host in [("workers", w) for w in job.workers] + ([("ps", job.ps)] if job.ps else []):
            if host in owner:
                raise ScenarioError(f"{source}: field 'jobs[{i}].{role}': host {host} already runs {owner[host]}")
            owner[host] = f"job {job.name}"


def _shaping(source: str, raw: Any, i: int, topo: Any) -> Shaping:
    f = _Fields(source, raw, f"shaping[{i}]", _SHAPE_KEYS)
    link = f.get("link", str)
    ends = link.split("-")
    if len(ends) != 2 or not all(e in topo.switches for e in ends):
        f.fail("link", f"{link!r} is not SWITCH-SWITCH (the first one's egress toward the second is shaped)")
    try:
        topo.link_between(*ends)
    except KeyError:
        f.fail("link", f"{topo.source} has no link {link}")
    shaped = Shaping(ends[0], ends[1], f.get("rate_mbps", float, None, minimum=0.001),
                     f.get("delay_ms", float, None, minimum=0), f.get("depth_pkts", int, None, minimum=1))
    if (shaped.rate_mbps, shaped.delay_ms, shaped.depth_pkts) == (None, None, None):
        f.fail("", "give at least one of rate_mbps, delay_ms, depth_pkts")
    return shaped


def _flow(source: str, raw: Any, i: int, topo: Any) -> Flow:
    f = _Fields(source, raw, f"traffic[{i}]", _FLOW_KEYS)
    src, dst = _host(f, "src", topo, f.get("src", str)), _host(f, "dst", topo, f.get("dst", str))
    if src == dst:
        f.fail("dst", "a flow needs two different hosts")
    port = f.get("port", int, TRAFFIC_PORT_BASE + i, minimum=1)
    if port > 65535:
        f.fail("port", f"{port} is not a port number")
    on_s = f.get("on_s", float, 1.0)
    if on_s <= 0:
        f.fail("on_s", f"must be positive, got {on_s}")
    return Flow(f.get("name", str, f"flow{i + 1}"), src, dst, f.choice("proto", PROTOCOLS, "udp"), port,
                f.get("rate_mbps", float, 1.0, minimum=0), f.get("size", int, 1000, minimum=1),
                f.get("start_s", float, 0.0, minimum=0), f.get("duration_s", float, 10.0, minimum=0.1), on_s,
                f.get("off_s", float, 0.0, minimum=0))


# ---------------------------------------------------------------------------- running one mode

def job_schemes(scn: Scenario, mode: str, tenancy: Any) -> dict[str, str]:
    """job -> how it aggregates in this mode (rejected jobs are left out)."""
    from controller.tenants import HOST, IN_NETWORK

    if mode in ("ps", "ring"):
        return {job.name: mode for job in scn.jobs}
    out = {}
    for job in scn.jobs:
        status = tenancy.admission(job.name).status
        if status == IN_NETWORK:
            out[job.name] = "innet"
        elif status == HOST:
            out[job.name] = "ps" if job.ps else "ring"
    return out


def paced_specs(specs: dict[str, Any], jobs: dict[str, JobConf], pacing: str, weighted: bool) -> dict[str, Any]:
    """The job specs with the scenario's pacing; `weighted` (mode aware, AIMD) adds MLfabric-style
    ordering weights (hosts.pacing.transfer_weights).

    Every job of a scenario trains the same model, so one step puts the same bytes on a shared
    link and the order follows how many workers each job's update unblocks."""
    from hosts.pacing import transfer_weights

    ones = {name: 1.0 for name in specs}
    weights = transfer_weights({name: len(jobs[name].workers) for name in specs}, ones) if weighted else ones
    return {name: dataclasses.replace(spec, pacing=pacing, weight=weights[name]) for name, spec in specs.items()}


def time_to_accuracy(records: list[dict], target: float | None) -> float | None:
    """Training time (sum of step times) until the first evaluation at or above `target`.

    Step 0 is left out: it holds the wait for the job's last worker process to start (seconds
    of process start-up skew, different in every run), not the network's work."""
    if target is None:
        return None
    elapsed = 0.0
    for record in records:
        if record.get("step") != 0:
            elapsed += record.get("step_time_s", 0.0)
        if record.get("test_accuracy", -1.0) >= target:
            return round(elapsed, 3)
    return None


class ModeRun:
    """One mode of a scenario on a fresh network: call run() once; returns the results dict."""

    def __init__(self, scn: Scenario, mode: str, run_dir: Path, say: Any = print):
        from controller.placement import Job
        from controller.tenants import admit, with_slot_budgets
        from controller.topology import load_topology
        from testbed.experiment import shape_links

        self.scn, self.mode, self.run_dir, self.say = scn, mode, run_dir, say
        self.topo = with_slot_budgets(shape_links(load_topology(scn.topology), scn.link_mbps, None), scn.slots)
        jobs = [Job(j.name, j.workers, j.root, j.k, j.slots) for j in scn.jobs]
        self.tenancy = admit(self.topo, jobs, scn.algo, scn.admission)
        self.schemes = job_schemes(scn, mode, self.tenancy)
        self.logs = run_dir / "logs"
        self.jobs = {j.name: j for j in scn.jobs if j.name in self.schemes}
        self.procs: dict[str, list] = {name: [] for name in self.jobs}
        self.flows: list = []
        self.finished_s: dict[str, float] = {}

    @property
    def _innet(self) -> bool:
        return self.mode in ("aware", "unaware")

    def run(self) -> dict:
        from controller.adapt import Adapter
        from controller.installer import Installer, connect_all, load_program
        from controller.monitor import snapshot
        from testbed.experiment import prepare_worker_hosts, program_path
        from testbed.network import Testbed

        placements = self.tenancy.in_network() if self._innet else []
        for admission in self.tenancy.admissions if self._innet else ():
            self.say(f"  {admission.message}")
        error, events, counters = None, [], {}
        with Testbed(self.topo, "embedded", str(self.run_dir)) as tb:
            conns = connect_all(self.topo, side_channel_ports={s: tb.side_channel_port(s) for s in self.topo.switches})
            adapter = None
            try:
                installer = Installer(self.topo, load_program(program_path(self.scn.lanes)), conns, timeout_s=0.2)
                specs, _ = installer.install(placements)
                weighted = self.mode == "aware" and self.scn.pacing == "aimd"
                specs = paced_specs(specs, self.jobs, self.scn.pacing, weighted)
                job_ids = {name: plan.job_id for name, plan in installer.plans.items()}
                self._shape(tb)
                for name, spec in specs.items():
                    prepare_worker_hosts(tb, self.jobs[name].workers, spec.agg_ip)
                t0 = time.monotonic()
                self._start(tb, specs)
                if self.mode == "aware":
                    a = self.scn.adapt
                    adapter = Adapter(self.topo, installer, placements, a.period_s, a.util_threshold,
                                      a.qdepth_threshold, self.scn.algo).start()
                try:
                    self._wait(tb, t0, adapter)
                except Exception as exc:  # noqa: BLE001 - recorded in results, raised after teardown
                    error = exc
                finally:
                    if adapter is not None:
                        adapter.stop()
                        events = adapter.events
                    for proc in [p for procs in self.procs.values() for p in procs] + self.flows:
                        proc.stop()
                counters = snapshot(self.topo, conns, job_ids.values())
            finally:
                for conn in conns.values():
                    conn.close()
        results = self._results(job_ids if self._innet else {}, counters, events, error)
        (self.run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
        if error is not None:
            raise error
        return results

    # -- phases

    def _shape(self, tb: Any) -> None:
        from p4target.sidechannel import send_command

        for s in self.scn.shaping:
            port, tport = self.topo.port_of(s.switch, s.peer), tb.side_channel_port(s.switch)
            if s.rate_mbps is not None:
                send_command(tport, f"set_queue_rate_bps {s.rate_mbps * 1e6:.0f} {port}")
            if s.delay_ms is not None:
                send_command(tport, f"set_queue_delay {s.delay_ms} {port}")
            if s.depth_pkts is not None:
                send_command(tport, f"set_queue_depth {s.depth_pkts} {port}")

    def _config(self, name: str, specs: dict) -> Path:
        from hosts.agent_config import PS_PORT, RING_PORT, AgentConfig
        from hosts.comm import Endpoint

        job, scheme = self.jobs[name], self.schemes[name]
        workers = tuple(Endpoint(h, self.topo.hosts[h].ip, RING_PORT) for h in job.workers)
        ps = Endpoint(job.ps, self.topo.hosts[job.ps].ip, PS_PORT) if scheme == "ps" else None
        config = AgentConfig(scheme, self.scn.train, workers, ps, specs.get(name), 60.0)
        path = self.run_dir / f"{name}.agent.json"
        path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        return path

    def _start(self, tb: Any, specs: dict) -> None:
        from testbed.experiment import start_process

        for flow in self.scn.traffic:
            until = flow.start_s + flow.duration_s + 3.0
            self.flows.append(start_process(tb, flow.dst, f"{flow.name}.recv", [
                "-m", "hosts.traffic", "recv", "--proto", flow.proto, "--port", str(flow.port),
                "--duration", str(until), "--out", str(self.logs / f"{flow.name}.recv.json")], self.logs))
        time.sleep(0.5)  # receivers listening before TCP senders connect
        for name, job in self.jobs.items():
            config, out = self._config(name, specs), self.logs / name
            out.mkdir(parents=True, exist_ok=True)
            self.say(f"  job {name}: {self.schemes[name]} on {', '.join(job.workers)}")
            if self.schemes[name] == "ps":
                self.procs[name].append(start_process(tb, job.ps, f"{name}.ps", [
                    "-m", "hosts.ps", "--config", str(config), "--out", str(out)], self.logs))
            for h in job.workers:
                if self.scn.workload == "train":
                    argv = ["-m", "hosts.agent", "--config", str(config), "--worker", h, "--out", str(out)]
                else:
                    argv = ["-m", "hosts.allreduce_bench", "--config", str(config), "--worker", h, "--elements",
                            str(self.scn.elements), "--seed", str(self.scn.seed), "--dtype", "int32", "--out",
                            str(out)]
                self.procs[name].append(start_process(tb, h, f"{name}.{h}", argv, self.logs))
        for flow in self.scn.traffic:
            self.flows.append(start_process(tb, flow.src, f"{flow.name}.send", [
                "-m", "hosts.traffic", "send", "--proto", flow.proto, "--dst", self.topo.hosts[flow.dst].ip,
                "--port", str(flow.port), "--rate-mbps", str(flow.rate_mbps), "--size", str(flow.size),
                "--delay", str(flow.start_s), "--duration", str(flow.duration_s), "--on", str(flow.on_s),
                "--off", str(flow.off_s), "--out", str(self.logs / f"{flow.name}.send.json")], self.logs))

    def _wait(self, tb: Any, t0: float, adapter: Any) -> None:
        from testbed.experiment import RunFailed

        deadline = t0 + self.scn.timeout_s
        while len(self.finished_s) < len(self.procs):
            for name, procs in self.procs.items():
                failed = [f for f in (p.failure() for p in procs) if f]
                if failed:
                    raise RunFailed(f"mode {self.mode}: job {name}: {failed[0]} (logs in {self.logs})")
                if name not in self.finished_s and all(p.popen.poll() == 0 for p in procs):
                    self.finished_s[name] = round(time.monotonic() - t0, 3)
            dead = tb.dead_switches()
            if dead:
                raise RunFailed(f"mode {self.mode}: switch {dead[0]}")
            if adapter is not None and adapter.error is not None:
                raise RunFailed(f"mode {self.mode}: adaptation failed: {adapter.error}")
            if time.monotonic() > deadline:
                running = sorted(set(self.procs) - set(self.finished_s))
                raise RunFailed(f"mode {self.mode}: jobs {', '.join(running)} still running after "
                                f"{self.scn.timeout_s:g} s (logs in {self.logs})")
            time.sleep(0.2)

    # -- results

    def _results(self, job_ids: dict, counters: dict, events: list, error: Exception | None) -> dict:
        from testbed.experiment import read_jsonl

        jobs = {}
        for name, job in self.jobs.items():
            out = self.logs / name
            entry: dict[str, Any] = {"scheme": self.schemes[name], "workers": list(job.workers),
                                     "wall_s": self.finished_s.get(name)}
            if name in job_ids:
                jid = job_ids[name]
                entry["job_id"] = jid
                entry["counters"] = {s: c["jobs"][jid] for s, c in counters.items() if c["jobs"][jid]["received"]}
            if self.scn.workload == "train":
                records = read_jsonl(out / f"{job.workers[0]}.metrics.jsonl")
                evals = [r for r in records if "test_accuracy" in r]
                entry.update(steps=len(records), final_accuracy=evals[-1]["test_accuracy"] if evals else None,
                             train_time_s=round(sum(r.get("step_time_s", 0.0) for r in records), 3),
                             time_to_accuracy_s=time_to_accuracy(records, self.scn.target_accuracy),
                             accuracy_curve=_curve(records))
            else:
                benches = [_read_json(out / f"{h}.bench.json") for h in job.workers]
                entry.update(allreduce_exact=all(b is not None and b.get("exact") for b in benches),
                             seconds=max((b["seconds"] for b in benches if b), default=None))
            jobs[name] = entry
        results = {"scenario": self.scn.name, "source": self.scn.source, "mode": self.mode, "seed": self.scn.seed,
                   "target_accuracy": self.scn.target_accuracy,
                   "admissions": [a.to_json() for a in self.tenancy.admissions] if self._innet else [],
                   "jobs": jobs, "moves": events,
                   "flows": {f.name: {"send": _read_json(self.logs / f"{f.name}.send.json"),
                                      "recv": _read_json(self.logs / f"{f.name}.recv.json")}
                             for f in self.scn.traffic},
                   "queues": {s: c.get("queues") for s, c in counters.items()}}
        if error is not None:
            results["error"] = str(error)
        return results


def _curve(records: list[dict]) -> list[tuple[float, float]]:
    """(training time so far, test accuracy) at every evaluation."""
    out, elapsed = [], 0.0
    for r in records:
        elapsed += r.get("step_time_s", 0.0)
        if "test_accuracy" in r:
            out.append((round(elapsed, 3), r["test_accuracy"]))
    return out


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


# ---------------------------------------------------------------------------- all modes, summary

def summarize(scn: Scenario, by_mode: dict[str, dict]) -> dict:
    """Per mode: each job's time to the target (or wall time), and ratios against mode aware."""
    key = "time_to_accuracy_s" if scn.workload == "train" and scn.target_accuracy else "wall_s"
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


def run_scenario(scn: Scenario, out: str = "runs", modes: tuple[str, ...] | None = None, say: Any = print) -> dict:
    """Every mode on its own fresh network; summary.json and the plot in the scenario folder."""
    from testbed.network import new_run_dir

    root = Path(new_run_dir(out))
    by_mode = {}
    for mode in modes or scn.modes:
        say(f"{scn.name}: mode {mode} in {root / mode}")
        by_mode[mode] = ModeRun(scn, mode, root / mode, say).run()
    summary = summarize(scn, by_mode)
    summary["run_dir"] = str(root)
    (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if scn.workload == "train":
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
