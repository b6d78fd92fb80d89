"""One run on a fresh network, as a lifecycle of small phases (`Run.execute`):

    plan (topology, jobs, placement: every input check, before anything starts)
      -> network up (testbed.network.Testbed) -> push the pipeline -> install the trees
      -> start the host processes -> watch -> stop them -> collect counters -> teardown -> results

`Run` is `aggnet run`: one job, training or the all-reduce benchmark. The other ways to run are
variants that override a phase or two, the way Mininet's switches share start/stop:
testbed.faults.FaultRun (inject faults while watching, recover, restart the workers),
testbed.script_run.ScriptRun (a user's torch.distributed script as every worker) and
testbed.scenario.ModeRun (several jobs, background traffic, the adaptation loop). Teardown
always runs (errors, Ctrl-C, SIGTERM); the first process or switch that fails is named in a
one-line RunFailed. The run folder gets the agent configs, results.json (written also when a
worker or the run failed, with the error) and logs/.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config import ConfigError, flat_dict
from testbed.config import RunConfig, resolve_topology
from testbed.timescale import AUTO, real_config, scale_topology, unscaled_results

REPO = Path(__file__).resolve().parent.parent
AGG_MAC = "02:00:00:00:ff:fe"  # any unicast MAC: the first switch intercepts by UDP port
JOB_NAME = "job1"
STOP_GRACE_S = 5.0
RESULT_SUFFIX = {"train": ".result.json", "allreduce": ".bench.json", "model": ".model.json"}
POLL_S = 0.2


class RunError(ConfigError):
    """Bad input to a run (topology, workers, options): one line, exit 2."""


class RunFailed(Exception):
    """The run started but did not finish: a host process or a switch failed, or time ran out."""

    exit_code = 1


class Reporter:
    """What a run tells the user; this one says nothing (tests). The CLI shows it with rich."""

    def status(self, message: str) -> None:
        """A phase started (network up, pipeline pushed, ...)."""

    def training_step(self, record: dict, total_steps: int) -> None:
        """Rank 0 finished a step (a line of its metrics.jsonl)."""

    def finished(self) -> None:
        """The host processes are done (stop any live display)."""


# ---------------------------------------------------------------------------- host processes

@dataclass
class HostProcess:
    """One process started inside a Mininet host; its stdout+stderr go to logs/NAME.out."""

    name: str  # "h1", "ps", "agg@h5", "job1.h1", ...
    host: str
    popen: subprocess.Popen
    output: Path

    def failure(self) -> str | None:
        """One line when the process ended badly, else None (running or exit 0)."""
        code = self.popen.poll()
        if code is None or code == 0:
            return None
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        last = _last_line(self.output)
        return f"{self.name} (on {self.host}) {how}" + (f": {last}" if last else "")

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, then SIGKILL after a grace period (at once with grace 0); safe when it already ended."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM if grace_s else signal.SIGKILL)
            try:
                self.popen.wait(grace_s or None)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def start_process(tb: Any, host: str, name: str, argv: list[str], logs: Path,
                  env: dict[str, str] | None = None) -> HostProcess:
    """`python ARGV` inside host's network namespace, with the interpreter running us (the .venv one);
    `env`: its whole environment (default: ours), with testbed.nodes.HOST_MALLOC_ENV."""
    from testbed.nodes import HOST_MALLOC_ENV

    output = logs / f"{name}.out"
    with open(output, "wb") as out:
        popen = tb.host(host).popen([sys.executable, *argv], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=str(REPO),
                                    env={**(os.environ if env is None else env), **HOST_MALLOC_ENV})
    return HostProcess(name, host, popen, output)


def read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return []


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class PhaseClock:
    """Seconds spent in each phase of a run, in order (results.json's `phases_s`): where the wall time goes."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._current: tuple[str, float] | None = None

    def begin(self, name: str) -> None:
        """End the current phase (if any) and start `name`."""
        self.stop()
        self._current = (name, time.monotonic())

    def stop(self) -> None:
        if self._current is not None:
            name, since = self._current
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.monotonic() - since, 3)
            self._current = None


# ---------------------------------------------------------------------------- jobs

@dataclass
class JobRun:
    """One aggregation job of a run: its hosts, how it aggregates, its spec and processes.

    `prefix` names its processes and files: "" for the only job of `aggnet run` (h1, ps, agg@h5, in
    logs/), "job1." for a scenario's jobs (job1.h1, in logs/job1/)."""

    name: str
    workers: list[str]
    scheme: str  # as it runs: innet becomes hostagg when the switches have no capacity for it
    out: Path  # where its processes write metrics and results
    prefix: str = ""
    ps: str | None = None
    aggregators: list[str] = field(default_factory=list)  # hostagg, split: aggregator host, then replica host
    split: list[str] = field(default_factory=list)  # split: the stragglers, whose seat in the tree the aggregator takes
    placement: Any = None  # controller.placement.JobPlacement (innet)
    admission: Any = None  # controller.tenants.Admission (innet)
    spec: Any = None  # protocol job spec handed to the workers (innet)
    job_id: int | None = None
    processes: list[HostProcess] = field(default_factory=list)  # what the job is done with once they exit 0
    services: list[HostProcess] = field(default_factory=list)  # servers that run until stopped (hosts.spill)
    workload: Any = None  # testbed.config.WorkloadConfig: its own (a scenario's job), else the run's

    def result_file(self, worker: str, kind: str) -> Path:
        """What a worker writes at the end, by workload kind (testbed.config.WorkloadConfig.kind)."""
        return self.out / f"{worker}{RESULT_SUFFIX[kind]}"

    @property
    def members(self) -> list[str]:
        """The hosts in the job's aggregation tree: its workers, or with split aggregation the on-time ones
        and the aggregator in the stragglers' seat (hosts.split_agg)."""
        from hosts.agent_config import tree_members

        return tree_members(self.workers, tuple(self.split), self.aggregators[0] if self.split else "")

    @property
    def standby(self) -> tuple[tuple[str, str], ...]:
        """Split aggregation with a replica: (the aggregator, its replica), which stands by in its seat."""
        return ((self.aggregators[0], self.aggregators[1]),) if self.split and len(self.aggregators) > 1 else ()


def choose_workers(topo: Any, cfg: RunConfig) -> list[str]:
    """The worker hosts in rank order: --worker-hosts as given, else the first --workers hosts."""
    job, hosts = cfg.job, list(topo.hosts)
    if job.worker_hosts:
        unknown = [h for h in job.worker_hosts if h not in topo.hosts]
        if unknown:
            raise RunError(f"--worker-hosts: {unknown[0]!r} is not a host of {topo.source} (hosts: {', '.join(hosts)})")
        workers = list(job.worker_hosts)
    else:
        n = len(hosts) if job.workers is None else job.workers
        if n > len(hosts):
            raise RunError(f"--workers: {topo.source} has {len(hosts)} hosts, asked for {n}")
        workers = hosts[:n]
    if len(workers) < 2:
        raise RunError(f"--workers: an all-reduce needs at least 2 workers, got {len(workers)}")
    for name in job.stragglers:
        if name not in workers:
            raise RunError(f"--straggler {name}: not a worker (workers: {', '.join(workers)})")
    return workers


def ps_host(topo: Any, workers: list[str]) -> str:
    """Where the parameter server runs: the first host that is not a worker, else the first worker."""
    return next((h for h in topo.hosts if h not in workers), workers[0])


def shape_links(topo: Any, link_mbps: float | None, loss: float | None) -> Any:
    """The topology with every link's rate and/or loss replaced (the testbed applies them to the queues)."""
    changes = {k: v for k, v in (("bw_mbps", link_mbps), ("loss", loss)) if v is not None}
    if not changes:
        return topo
    return dataclasses.replace(topo, links=tuple(dataclasses.replace(link, **changes) for link in topo.links))


def program_path(lanes: int) -> str:
    from protocol.wire import program_name

    return str(REPO / "p4src" / program_name(lanes))


# ---------------------------------------------------------------------------- the run

class Run:
    """`aggnet run`: create, then `execute()` once; it returns the results (also written to results.json)."""

    def __init__(self, cfg: RunConfig, reporter: Reporter | None = None, run_dir: Path | None = None):
        from testbed.network import new_run_dir
        from testbed.nodes import check_target

        check_target(cfg.network.target)
        self.reporter = reporter or Reporter()
        cfg = self.lanes_for_servers(cfg, self.reporter)
        self.scale_auto: dict | None = None  # what --scale auto chose and why (testbed.autoscale)
        auto = cfg.scale == AUTO
        if auto:
            cfg = dataclasses.replace(cfg, scale=1.0)  # planned at 1 first: the plan is what F is chosen for
        self.asked = cfg  # as the user asked, in the emulated cluster's time
        self.cfg = real_config(cfg, cfg.scale)  # as this machine runs it (testbed.timescale)
        self.topo = self.load_topology()
        self.run_dir = run_dir or Path(new_run_dir(cfg.out))
        self.logs = self.run_dir / "logs"
        self.jobs = self.plan_jobs()
        if auto:
            self.choose_scale()
        self.tb: Any = None
        self.conns: dict[str, Any] = {}
        self.installer: Any = None
        self.counters: dict = {}
        self.queues: dict = {}
        self.engines: dict = {}  # switch -> the engine that ran its program (embedded target)
        self.meter: Any = None  # testbed.fidelity.CpuMeter over the switch and host processes
        self.link_meter: Any = None  # testbed.fidelity.LinkMeter, when a variant samples the links' bytes
        self.fidelity: dict = {}
        self.pki: Any = None  # testbed.tls.RunPki with --tls
        self.run_slot: dict | None = None  # the network's run slot (testbed.slots), in results.json

    # -- plan: every input check, before anything starts

    def choose_scale(self) -> None:
        """--scale auto: the run planned at F = 1, the smallest F at which the links bind it (testbed.autoscale),
        then the run as it is at that F."""
        from testbed.autoscale import ScaleError, choose_scale

        job = self.jobs[0]
        if job.placement is None:
            raise RunError(f"--scale auto: models the in-network all-reduce's traffic, not scheme {job.scheme} "
                           "(give --scale F)")
        from controller.installer import plan_job

        try:
            self.scale_auto = choose_scale(self.topo, plan_job(job.placement, 1), self.cfg.network.lanes, self.reporter,
                                           lambda cfg: Run(cfg).execute())
        except ScaleError as exc:
            raise RunError(str(exc)) from None
        factor = self.scale_auto["factor"]
        self.reporter.status(f"--scale auto: {factor:g} ({self.scale_auto['reason']})")
        self.asked = dataclasses.replace(self.asked, scale=factor)
        self.cfg = real_config(self.asked, factor)
        self.topo = self.load_topology()
        self.jobs = self.plan_jobs()

    @staticmethod
    def lanes_for_servers(cfg: RunConfig, reporter: Reporter) -> RunConfig:
        """Across servers, packets must fit the VXLAN tunnels: lanes that would not (364 fill a
        1500-byte MTU on one machine) drop to the most that do, saying so."""
        from testbed.cluster import tunnel_lanes

        fits = tunnel_lanes()
        if not cfg.network.servers or cfg.network.lanes <= fits:
            return cfg
        reporter.status(f"across servers: {fits} lanes a packet ({cfg.network.lanes} do not fit a VXLAN tunnel "
                        f"over a 1500-byte network)")
        return dataclasses.replace(cfg, network=dataclasses.replace(cfg.network, lanes=fits))

    def load_topology(self) -> Any:
        from controller.topology import load_topology

        path = resolve_topology(self.cfg.network.topo, str(REPO))
        if path is None:
            raise RunError(f"--topo: no topology file {self.cfg.network.topo!r} (give a path or one of "
                           f"{', '.join(sorted(p.stem for p in (REPO / 'topologies').glob('*.yaml')))})")
        topo = shape_links(load_topology(path), self.cfg.network.link_mbps, self.cfg.network.loss)
        return scale_topology(topo, self.cfg.scale, self.data_scale())

    def data_scale(self) -> float:
        """The fraction of the cluster's bytes the run sends, when its link rates are the cluster's
        (a scenario of model jobs; an `aggnet run`'s link rate is what its links carry: 1)."""
        return 1.0

    def plan_jobs(self) -> list[JobRun]:
        """The run's one job; innet placed within the switches' slot budgets (none left: host aggregation)."""
        from controller.placement import Job

        cfg = self.cfg
        workers = choose_workers(self.topo, cfg)
        job = JobRun(JOB_NAME, workers, cfg.job.scheme, self.logs,
                     ps=ps_host(self.topo, workers) if cfg.job.scheme == "ps" else None)
        if job.scheme == "split":
            self.split_job(job, self.stragglers_of(job), [h for h in self.topo.hosts if h not in workers])
        if job.scheme in ("innet", "split"):
            self.admit([job], [Job(JOB_NAME, tuple(job.members), k=cfg.job.k, slots=cfg.job.slots,
                                   standby=job.standby)])
        if job.scheme == "hostagg":
            job.aggregators = self.pick_aggregators(workers)
        return [job]

    def split_job(self, job: JobRun, stragglers: list[str], idle: list[str]) -> None:
        """Split aggregation for `job` (hosts.split_agg): its stragglers send to an aggregator on the first
        `idle` host, which takes their seat in the tree, with a replica (--replica) on the next idle host
        of the same switch if there is one. Without stragglers the job is plain in-network."""
        if not stragglers:
            job.scheme = "innet"
            return
        if not idle:
            raise RunError(f"job {job.name}: split aggregation needs a host that runs no worker for its aggregator "
                           f"({self.topo.source} has none left)")
        spare = [h for h in idle[1:] if self.topo.switch_of(h) == self.topo.switch_of(idle[0])]
        job.split, job.aggregators = stragglers, idle[:1] + (spare[:1] if self.cfg.job.replica else [])

    def admit(self, jobs: list[JobRun], wanted: list[Any], policy: str = "downgrade") -> Any:
        """Place `wanted` (controller.placement.Job, one per job) in order within the slot budgets; a
        job left without capacity aggregates on hosts (fallback_scheme)."""
        from controller.tenants import HOST, IN_NETWORK, admit

        tenancy = admit(self.topo, wanted, self.cfg.job.algo, policy, seed=self.cfg.train.seed)
        placed = {jp.job.name: jp for jp in tenancy.in_network()}
        for job in jobs:
            job.admission = tenancy.admission(job.name)
            if job.admission.status == IN_NETWORK:
                job.placement = placed[job.name]
            elif job.admission.status == HOST:
                job.scheme = self.fallback_scheme(job, tenancy)
                job.split, job.aggregators = [], []
        return tenancy

    def fallback_scheme(self, job: JobRun, tenancy: Any) -> str:
        """How a job the switches cannot hold aggregates instead: on hosts (training only)."""
        if self.cfg.workload.kind == "allreduce":
            raise RunError(f"--slots {self.cfg.job.slots}: no in-network capacity "
                           f"({tenancy.placements[0].fallback}), and the all-reduce benchmark has no host "
                           "aggregation to fall back to")
        return "hostagg"

    def pick_aggregators(self, workers: list[str]) -> list[str]:
        """Aggregator and replica hosts, idlest first (hosts.straggler.pick_aggregators)."""
        from hosts.straggler import Straggler, pick_aggregators

        stragglers = {name: Straggler(delay) for name, delay in self.cfg.job.stragglers.items()}
        return pick_aggregators(list(self.topo.hosts), workers, stragglers, 2 if self.cfg.job.replica else 1)

    # -- the lifecycle

    def execute(self) -> dict:
        from testbed.network import BMV2_LIMITS

        for job in self.jobs:
            if job.admission is not None and job.scheme == "hostagg":
                self.reporter.status(f"{job.admission.message}; aggregator on {job.aggregators[0]}"
                                     + (f", replica on {job.aggregators[1]}" if len(job.aggregators) > 1 else ""))
        self.reporter.status(f"network {self.topo.name} up in {self.run_dir}")
        if self.cfg.network.target == "bmv2":
            self.reporter.status(BMV2_LIMITS)
        started = time.monotonic()
        error: Exception | None = None
        clock = PhaseClock()
        clock.begin("start network")
        with self.network() as self.tb:
            try:
                clock.begin("load pipelines")
                self.connect()
                self.push_pipeline()
                clock.begin("install")
                self.install_trees()
                try:
                    clock.begin("run")
                    self.start_hosts()
                    self.start_meter()
                    self.watch()
                except Exception as exc:  # any failure while running goes in the results, then is raised
                    error = exc
                finally:
                    if self.meter is not None:
                        self.meter.stop()
                    clock.begin("stop hosts")
                    self.stop_hosts()
                    self.reporter.finished()
                clock.begin("collect")
                self.collect()
            finally:
                for conn in self.conns.values():
                    conn.close()
            clock.begin("teardown")
        clock.stop()
        results = self.results(time.monotonic() - started, error)
        results["phases_s"] = clock.seconds
        self.write_results(results)
        if error is not None:
            raise error
        return results

    def network(self) -> Any:
        from testbed.network import Testbed

        if self.cfg.network.servers:
            from testbed.cluster import ClusterTestbed

            net = self.cfg.network
            tb = ClusterTestbed(self.topo, net.servers, net.placement, net.target, str(self.run_dir), net.ssh_config)
            self.reporter.status(f"nodes on servers: {tb.describe()}")
            return tb
        if self.cfg.network.tls:
            from testbed.tls import make_pki

            self.pki = make_pki(self.cfg.network.tls)
            self.reporter.status(f"P4Runtime over mutual TLS, certificates in {self.cfg.network.tls}")
        return Testbed(self.topo, self.cfg.network.target, str(self.run_dir),
                       tls=self.pki.server if self.pki else None, pushed_program=program_path(self.cfg.network.lanes))

    def connect(self) -> None:
        """A primary connection to every switch, at the ports of the network's run slot (testbed.slots)."""
        from controller.installer import connect_all

        self.run_slot = self.tb.slot_json()
        if self.run_slot["index"]:
            self.reporter.status(f"beside another network: run slot {self.run_slot['index']} (switch interfaces "
                                 f"{self.run_slot['interface_prefix']}s1-eth1..., ports +{self.run_slot['port_offset']})")

        self.conns = connect_all(self.topo, side_channel_ports={s: self.tb.side_channel_port(s)
                                                                for s in self.topo.switches},
                                 target=self.cfg.network.target, tls=self.pki.client if self.pki else None,
                                 addresses={s: self.tb.switch_address(s) for s in self.topo.switches},
                                 grpc_ports={s: self.tb.grpc_port(s) for s in self.topo.switches})

    def push_pipeline(self) -> None:
        """The program and routes on every switch; link queues where the target needs the program first."""
        from controller.installer import Installer, load_program
        from protocol.wire import program_name

        lanes = self.cfg.network.lanes
        innet = any(j.placement for j in self.jobs)
        self.reporter.status(f"pushing {program_name(lanes)}, routes" + (" and the aggregation tree" if innet else ""))
        program = load_program(program_path(lanes), self.cfg.network.target, str(self.run_dir / "build"))
        self.installer = Installer(self.topo, program, self.conns, timeout_s=self.cfg.job.rto_bounds()[0],
                                   ecn_fraction=self.cfg.network.ecn_fraction)
        self.installer.push_pipelines()
        if self.cfg.network.target == "bmv2":
            self.tb.apply_link_queues()  # BMv2's CLI needs the pushed program (testbed.network)

    def install_trees(self) -> None:
        """Every in-network job's tree; the job specs and agent configs the host processes read."""
        specs, _ = self.installer.install([j.placement for j in self.jobs if j.placement])
        for job in self.jobs:
            if job.name in specs:
                job.spec = self.job_spec(job, specs[job.name])
                job.job_id = self.installer.plans[job.name].job_id
                prepare_worker_hosts(self.tb, job.members + [h for _, h in job.standby], job.spec.agg_ip)

    def job_spec(self, job: JobRun, spec: Any) -> Any:
        """The spec the installer made, with the run's pacing and largest retransmission timeout."""
        return dataclasses.replace(spec, pacing=self.cfg.job.pacing, max_timeout_s=self.cfg.job.rto_bounds()[1])

    def start_hosts(self) -> None:
        for job in self.jobs:
            self.start_job(job, self.write_agent_config(job, f"{job.prefix}agent.json"))

    def workload_of(self, job: JobRun) -> Any:
        """The job's workload (testbed.config.WorkloadConfig): its own, else the run's."""
        return job.workload or self.cfg.workload

    def start_job(self, job: JobRun, config: Path) -> None:
        """The job's server processes (parameter server, host aggregator and replica), then its workers."""
        w = self.workload_of(job)
        what = f"{w.workload}, profile {w.profile_name}" if w.kind == "model" else w.workload
        self.reporter.status(f"starting {len(job.workers)} workers ({job.scheme}, {what})"
                             + (f" and the parameter server on {job.ps}" if job.ps else "")
                             + (f" and the host aggregator on {job.aggregators[0]}" if job.aggregators else "")
                             + (f", its replica on {job.aggregators[1]}" if len(job.aggregators) > 1 else ""))
        job.out.mkdir(parents=True, exist_ok=True)
        if job.ps and job.spec is not None and job.spec.pool:  # the spilled chunks' server, until stopped
            job.services.append(self.start(job.ps, f"{job.prefix}spill", ["spill", "--config", str(config),
                                                                          "--out", str(job.out)]))
        elif job.ps:
            job.processes.append(self.start(job.ps, f"{job.prefix}ps", ["ps", "--config", str(config),
                                                                        "--out", str(job.out)]))
        # The replica starts first: the aggregator connects to it before serving anyone.
        for role, host in reversed(list(zip(("hostagg", "replica"), job.aggregators))):
            name = f"{'agg' if role == 'hostagg' else 'replica'}@{host}"
            job.processes.append(self.start(host, name, [role, "--config", str(config), "--out", str(job.out)]))
        for rank in range(len(job.workers)):
            job.processes.append(self.start_worker(job, rank, config))

    def start_worker(self, job: JobRun, rank: int, config: Path) -> HostProcess:
        """The agent of worker `rank` (`python -m hosts worker|bench`)."""
        host = job.workers[rank]
        return self.start(host, f"{job.prefix}{host}", self.worker_argv(job, host, config))

    def worker_argv(self, job: JobRun, host: str, config: Path) -> list[str]:
        w = self.workload_of(job)
        if w.kind == "train":
            return ["worker", "--config", str(config), "--worker", host, "--out", str(job.out)]
        if w.kind == "model":  # the worker takes its own link's real rate (for the analytic model) and slows compute
            link_mbps = self.topo.links_of(host)[0].bw_mbps
            return ["model", "--config", str(config), "--worker", host, "--model", w.model,
                    "--profile", w.profile_name, "--iterations", str(w.iterations), "--grad-scale", repr(w.grad_scale),
                    "--out", str(job.out), "--time-scale", repr(self.cfg.scale),
                    *(["--bucket-mb", repr(w.bucket_mb)] if w.bucket_mb is not None else []),
                    *(["--batch", str(w.batch)] if w.batch is not None else []),
                    *(["--link-mbps", repr(link_mbps)] if link_mbps else [])]
        return ["bench", "--config", str(config), "--worker", host, "--elements", str(w.elements),
                "--seed", str(self.cfg.train.seed), "--dtype", w.dtype, "--out", str(job.out)]

    def start(self, host: str, name: str, role_argv: list[str]) -> HostProcess:
        """`python -m hosts ROLE ...` (hosts.roles) on `host`."""
        self.logs.mkdir(parents=True, exist_ok=True)
        return start_process(self.tb, host, name, ["-m", "hosts", *role_argv], self.logs)

    def write_agent_config(self, job: JobRun, name: str) -> Path:
        """The job's agent config (hosts.agent_config) in the run folder."""
        from hosts.agent_config import AGG_PORT_TCP, PS_PORT, REPLICA_PORT, RING_PORT, AgentConfig
        from hosts.comm import Endpoint

        cfg, hosts = self.cfg, self.topo.hosts
        workers = tuple(Endpoint(h, hosts[h].ip, RING_PORT) for h in job.workers)
        ps = Endpoint(job.ps, hosts[job.ps].ip, PS_PORT) if job.ps else None
        ends = [Endpoint(h, hosts[h].ip, port) for h, port in zip(job.aggregators, (AGG_PORT_TCP, REPLICA_PORT))]
        train = cfg.train
        w = self.workload_of(job)
        lead, per = 0, 1
        if w.kind == "model" and job.aggregators:  # a host aggregator's rounds: the model's all-reduces
            from hosts.models.workload import round_plan

            steps, lead, per = round_plan(w.model, w.profile_name, w.bucket_mb, w.iterations, w.batch)
            train = dataclasses.replace(train, steps=steps)
        config = AgentConfig(job.scheme, train, workers, ps, job.spec, cfg.comm_timeout_s,
                             aggregator=ends[0] if ends else None, replica=ends[1] if len(ends) > 1 else None,
                             staleness=cfg.job.staleness, wait_s=cfg.job.agg_wait_s,
                             stragglers={n: self.straggler(n) for n in self.slowed_of(job)},
                             time_scale=cfg.scale, split_workers=tuple(job.split), lead_rounds=lead,
                             iteration_rounds=per)
        path = self.run_dir / name
        path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        return path

    def slowed_of(self, job: JobRun) -> list[str]:
        """The job's workers whose compute is slowed (their agent config's straggler entries), in rank order."""
        return [w for w in job.workers if w in self.cfg.job.stragglers]

    def stragglers_of(self, job: JobRun) -> list[str]:
        """The job's workers split aggregation seats at its aggregator (--straggler), in rank order."""
        return self.slowed_of(job)

    def straggler(self, host: str) -> Any:
        """How `host` is slowed (hosts.straggler.Straggler), in the cluster's time: its --straggler delay
        (none: 0) in the --straggle period."""
        from hosts.straggler import Straggler

        start, end = self.cfg.job.straggle_s or (0.0, math.inf)
        return Straggler(self.cfg.job.stragglers.get(host, 0.0), start_s=start, end_s=end)

    def processes(self) -> list[HostProcess]:
        """Every host process of the run, the jobs' services too."""
        return [p for job in self.jobs for p in (*job.processes, *job.services)]

    def pids(self) -> dict[str, int]:
        """Every switch and host process of the run by name, for the CPU meter."""
        out = {s.name: s.process.pid for s in self.tb.net.switches if s.process is not None}
        out.update((p.name, p.popen.pid) for p in self.processes())
        return out

    def start_meter(self) -> None:
        from testbed.fidelity import CpuMeter

        self.meter = CpuMeter(self.pids).start()

    def watch(self) -> None:
        """Until every host process exited 0; RunFailed naming the first process or switch that failed."""
        deadline = time.monotonic() + self.cfg.timeout_s
        seen = 0
        while not self.poll():
            if self.cfg.workload.workload == "train":
                job = self.jobs[0]
                records = read_jsonl(job.out / f"{job.workers[0]}.metrics.jsonl")
                for record in records[seen:]:
                    self.reporter.training_step(record, self.cfg.train.steps)
                seen = max(seen, len(records))
            if time.monotonic() > deadline:
                running = [p.name for p in self.processes() if p.popen.poll() is None]
                raise RunFailed(f"run failed: still running after {self.cfg.timeout_s:g} s: {', '.join(running)} "
                                f"(logs in {self.logs})")
            time.sleep(POLL_S)

    def poll(self, ignore: Set[str] = frozenset()) -> bool:
        """True once every watched process exited 0; RunFailed for a failed process or a dead switch
        (`ignore`: process and switch names killed on purpose)."""
        procs = [p for p in self.processes() if p.name not in ignore]
        failed = [f for f in (p.failure() for p in procs) if f]
        if failed:
            raise RunFailed(f"run failed: {failed[0]} (logs in {self.logs})")
        dead = [d for d in self.tb.dead_switches() if d.split(":")[0] not in ignore]
        if dead:
            raise RunFailed(f"run failed: switch {dead[0]}")
        services = {id(p) for job in self.jobs for p in job.services}  # they run until stopped
        return all(p.popen.poll() == 0 for p in procs if id(p) not in services)

    def stop_hosts(self) -> None:
        for proc in self.processes():
            proc.stop()

    def collect(self) -> None:
        """Counters of every switch (ports, and the jobs in the switches), and the traffic managers' queues."""
        from controller.monitor import engine, queue_stats
        from controller.parallel import each
        from testbed import fidelity, report

        self.tb.gather()  # results the host processes wrote on other servers
        job_ids = [j.job_id for j in self.jobs if j.job_id is not None]
        self.counters = report.collect_counters(self.topo, self.conns, job_ids)
        stats = each(self.conns, lambda s: queue_stats(self.conns[s]))
        self.queues = {s: q for s, q in stats.items() if q is not None}
        self.engines = {s: e for s, conn in self.conns.items() if (e := engine(conn)) is not None}
        if self.meter is not None:
            phases, measured_over = self.measured_phases()
            self.fidelity = fidelity.report(self.topo, self.counters, self.queues, phases, measured_over, self.meter,
                                            set(self.topo.switches), self.cfg.scale, self.link_meter)
            if self.fidelity["warning"]:
                self.reporter.status(self.fidelity["warning"])

    def measured_phases(self) -> tuple[list[tuple[float, float]], str]:
        """What the fidelity monitor measures over, and its name: the communication phases when workers
        reported when their all-reduces were in flight (a model workload's `comm_intervals`, united over
        workers), else the workload window, else the whole run."""
        from testbed.fidelity import union

        comm = union(interval for job in self.jobs for interval in self.comm_intervals(job))
        if comm:
            return comm, "communication"
        window = self.workload_window()
        return ([window], "workload") if window else ([self.meter.span()], "run")

    def comm_intervals(self, job: JobRun) -> list[tuple[float, float]]:
        """When any of the job's all-reduces was in flight, per worker (a model workload's report)."""
        kind = self.workload_of(job).kind
        return [(start, end) for h in job.workers
                for start, end in (read_json(job.result_file(h, kind)) or {}).get("comm_intervals", [])]

    def workload_window(self, jobs: list[JobRun] | None = None) -> tuple[float, float] | None:
        """When the workers (of `jobs`, default all) did the measured work (testbed.fidelity): the timed
        all-reduce of every benchmark worker, or every training step (a record's `ended_at` less its step time)."""
        from testbed.fidelity import workload_window

        spans = []
        for job in self.jobs if jobs is None else jobs:
            kind = self.workload_of(job).kind
            for h in job.workers:
                if kind == "train":
                    records = [r for r in read_jsonl(job.out / f"{h}.metrics.jsonl") if "ended_at" in r]
                    if records:
                        spans.append((records[0]["ended_at"] - records[0]["step_time_s"], records[-1]["ended_at"]))
                elif (bench := read_json(job.result_file(h, kind))) and "window" in bench:
                    spans.append(tuple(bench["window"]))
        return workload_window(spans)

    # -- results

    def results(self, seconds: float, error: Exception | None) -> dict:
        from testbed import report

        cfg, job = self.asked, self.jobs[0]
        config = flat_dict(cfg)
        config.update(topo=self.topo.source, worker_hosts=job.workers, ps_host=job.ps)
        results: dict[str, Any] = {
            "config": config, "seeds": {"model": cfg.train.seed, "data": cfg.train.seed, "vectors": cfg.train.seed},
            "run_dir": str(self.run_dir), "workers": len(job.workers), "wall_time_s": seconds,
            "versions": report.versions(cfg.network.target), "counters": self.counters, "queues": self.queues,
            "engines": self.engines,
            "link_bytes": report.link_bytes(self.topo, self.counters), "scheme": job.scheme,
            "placement": self.placement_json(job), "fidelity": self.fidelity,
            "admission": job.admission.to_json() if job.admission is not None else None,
            "run_slot": self.run_slot, "scale_auto": self.scale_auto,
        }
        if job.aggregators:
            results.update(aggregators=job.aggregators, staleness_bound=cfg.job.staleness,
                           aggregation=read_aggregation_stats(job.out))
        if job.split:
            results["split_workers"] = job.split
        if error is not None:
            results["error"] = str(error)
        results.update(self.workload_results(job))
        return unscaled_results(results, cfg.scale)

    def workload_results(self, job: JobRun) -> dict:
        """What the workers did: training's accuracy and steps, the benchmark's verdict and speed, or a
        model's iterations."""
        kind = self.cfg.workload.kind
        return (self.train_results if kind == "train" else self.bench_results if kind == "allreduce"
                else self.model_results)(job)

    def placement_json(self, job: JobRun) -> dict | None:
        if job.placement is None or job.spec is None:
            return None
        out = job.placement.placement.to_json()
        out["promoted"] = list(self.installer.plans[job.name].promoted)
        return out

    def write_results(self, results: dict) -> None:
        """results.json, once every worker wrote its result (a benchmark worker writes one also when its
        sum is wrong)."""
        from testbed import report

        kind = self.cfg.workload.kind
        if all(job.result_file(h, kind).exists() for job in self.jobs for h in job.workers):
            report.write_results(self.run_dir, results, kind)

    def per_worker(self, job: JobRun) -> dict[str, dict]:
        kind = self.workload_of(job).kind
        return {h: r for h in job.workers if (r := read_json(job.result_file(h, kind))) is not None}

    def train_results(self, job: JobRun) -> dict:
        from testbed import report

        per_worker = self.per_worker(job)
        first = per_worker.get(job.workers[0], {})
        records = read_jsonl(job.out / f"{job.workers[0]}.metrics.jsonl")
        steps = [r["step_time_s"] for r in records]
        return {"final_accuracy": first.get("final_accuracy"), "final_loss": first.get("final_loss"),
                "steps": len(steps), "step_time_s": statistics.median(steps) if steps else None,
                "accuracy_curve": report.accuracy_curve(records), "per_worker": per_worker}

    def bench_results(self, job: JobRun) -> dict:
        reports = self.per_worker(job)
        complete = len(reports) == len(job.workers)
        seconds = max((r["seconds"] for r in reports.values()), default=None)
        w = self.cfg.workload
        from testbed.fidelity import link_bound_seconds

        return {"elements": w.elements, "dtype": w.dtype, "link_bound_s": link_bound_seconds(self.topo, self.counters),
                "allreduce_exact": complete and all(r["exact"] for r in reports.values()),
                "allreduce_correct": complete and all(r["correct"] for r in reports.values()),
                "max_abs_error": max((r["max_abs_error"] for r in reports.values()), default=None),
                "seconds": seconds, "goodput_elements_per_s": w.elements / seconds if seconds else None,
                "per_worker": reports}

    def model_results(self, job: JobRun) -> dict:
        """The slowest worker's median iteration (DDP waits for every rank; in split aggregation every
        on-time rank), its compute and exposed communication, and the analytic model beside it
        (hosts.models.workload)."""
        reports = self.per_worker(job)
        slowest = max((r for h, r in reports.items() if h not in job.split), key=lambda r: r["iteration_s"],
                      default={})
        w = self.workload_of(job)
        out = {"model": w.model, "profile": slowest.get("profile"), "grad_scale": w.grad_scale,
               "buckets": slowest.get("buckets"), "iteration_s": slowest.get("iteration_s"),
               "compute_s": slowest.get("compute_s"), "exposed_comm_s": slowest.get("exposed_comm_s"),
               "sums_correct": model_sums_correct(job, reports), "per_worker": reports}
        if "analytic" in slowest:
            out.update(emulated_link_gbps=slowest["emulated_link_gbps"],
                       analytic_iteration_s=slowest["analytic"]["iteration_s"],
                       analytic_exposed_comm_s=slowest["analytic"]["exposed_comm_s"],
                       measured_vs_analytic=slowest["measured_vs_analytic"])
        return out


def prepare_worker_hosts(tb: Any, hosts: list[str], agg_ip: str) -> None:
    """Static ARP for the job's aggregation address on every worker host.

    Contributions are sent to agg_ip, which no host owns, so nothing would answer ARP for it;
    results come back from agg_ip too (aggnet.p4 set_host), so the host takes them as from a
    neighbour."""
    for h in hosts:
        tb.host(h).setARP(agg_ip, AGG_MAC)


def read_aggregation_stats(logs: Path) -> dict[str, dict]:
    """NAME -> what each host aggregator or replica did (its NAME.agg.json)."""
    return {p.name.removesuffix(".agg.json"): json.loads(p.read_text()) for p in sorted(logs.glob("*.agg.json"))}


def model_sums_correct(job: JobRun, reports: dict[str, dict]) -> bool:
    """Every worker of a model job reported and found its sums right; with a host aggregator (hostagg,
    split), each round's sum also the one its record of the gradients in the round gives (the primary's
    or its replica's, whichever closed more rounds: hosts.models.workload.exact_sums)."""
    from hosts.models.workload import exact_sums

    if len(reports) != len(job.workers) or not all(r["correct"] for r in reports.values()):
        return False
    if not job.aggregators:
        return True
    records = [a["included"] for a in read_aggregation_stats(job.out).values() if "included" in a]
    if not records:
        return False
    senders = [job.workers.index(h) for h in (job.split or job.workers)]
    want = exact_sums(len(job.workers), senders, max(records, key=len))
    return all(r["sums"] == want for r in reports.values())
