"""Fault injection during a training run, and the run that survives it.

    results = run_with_faults(FaultRunConfig(topo="leafspine", faults=(parse_fault("kill_switch:s1@10"),)))

What the workers train is `FaultRunConfig.train`, the agents' own hosts.agent_config.TrainConfig
(`train_config()` gives this module's defaults), so every training field reaches them unchanged.

Faults, written KIND:TARGET@STEP (injected once rank 0 has finished STEP):
- `kill_switch:s1@10`   the switch's process gets SIGKILL;
- `link_down:s3-s1@10`  both ends of the link go down (Mininet's configLinkStatus);
- `slow_worker:h2@5=0.3` the worker's agent gets 30 % of a CPU from then on (SIGSTOP/SIGCONT
  duty cycle: a CPU limit without cgroups), so it straggles;
- `kill_aggregator:h4@10` the host aggregator's process on h4 gets SIGKILL (scheme hostagg:
  its replica takes over, hosts.replica; the workers go on).

Scheme hostagg: routes only in the switches; the job is summed by hosts.host_agg on the
idlest host, replicated on the next (hosts.straggler.pick_aggregators), with the run's
staleness bound and emulated stragglers (a compute delay per step).

The run (training with per-step checkpoints, hosts.checkpoint): after a switch or
link fault the controller's FailureDetector must notice it (the time is recorded); the
workers, stuck on the broken tree, are stopped; controller.failover reroutes and reinstalls
the job around the failure (its slots zeroed); the workers restart from the newest step they
all completed (`common_step`) and train to the end. `results.json` records every fault, when
it was noticed, the resumed step, the new tree, and the steps each worker's final weights
went through (each exactly once, in order, when nothing was lost or doubled).
"""
from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hosts.agent_config import TrainConfig

FAULT_KINDS = ("kill_switch", "link_down", "slow_worker", "kill_aggregator")
NETWORK_FAULTS = ("kill_switch", "link_down")  # the controller must notice and reinstall
_FAULT_RE = re.compile(r"^(?P<kind>[a-z_]+):(?P<target>[A-Za-z0-9-]+)@(?P<step>\d+)(=(?P<value>[0-9.]+))?$")
POLL_S = 0.05
THROTTLE_PERIOD_S = 0.1


class FaultError(Exception):
    """A malformed fault or a fault naming nothing in the topology; one line, exit 2."""

    exit_code = 2


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # a switch, "a-b" for a link, or a worker host
    at_step: int
    value: float | None = None  # slow_worker: the CPU share left (0 < share < 1)

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}@{self.at_step}" + (f"={self.value:g}" if self.value is not None else "")


def parse_fault(text: str, topo: Any = None, workers: tuple[str, ...] = ()) -> Fault:
    """`kill_switch:s1@10` -> Fault; checked against the topology and workers when given."""
    m = _FAULT_RE.match(text.strip())
    if not m or m["kind"] not in FAULT_KINDS:
        raise FaultError(f"--fault {text!r}: expected KIND:TARGET@STEP with KIND one of {', '.join(FAULT_KINDS)} "
                         f"(e.g. kill_switch:s1@10, link_down:s3-s1@10, slow_worker:h2@5=0.3, "
                         f"kill_aggregator:h4@10)")
    value = float(m["value"]) if m["value"] else None
    fault = Fault(m["kind"], m["target"], int(m["step"]), value)
    if fault.kind == "slow_worker" and not (value is not None and 0 < value < 1):
        raise FaultError(f"--fault {text!r}: slow_worker needs =SHARE, the CPU share left, between 0 and 1")
    if topo is not None:
        if fault.kind == "kill_switch" and fault.target not in topo.switches:
            raise FaultError(f"--fault {text!r}: no switch {fault.target!r} in {topo.source}")
        if fault.kind == "link_down":
            a, _, b = fault.target.partition("-")
            try:
                topo.link_between(a, b)
            except KeyError:
                raise FaultError(f"--fault {text!r}: no link {fault.target!r} in {topo.source}") from None
        if fault.kind == "slow_worker" and fault.target not in workers:
            raise FaultError(f"--fault {text!r}: {fault.target!r} is not a worker ({', '.join(workers)})")
        if fault.kind == "kill_aggregator" and fault.target not in topo.hosts:
            raise FaultError(f"--fault {text!r}: no host {fault.target!r} in {topo.source}")
    return fault


class CpuThrottle:
    """Lets a process run `share` of every period: SIGSTOP/SIGCONT from a background thread."""

    def __init__(self, pid: int, share: float, period_s: float = THROTTLE_PERIOD_S):
        self.pid = pid
        self.share = share
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"throttle-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                os.kill(self.pid, signal.SIGSTOP)
                self._stop.wait(self.period_s * (1 - self.share))
                os.kill(self.pid, signal.SIGCONT)
                self._stop.wait(self.period_s * self.share)
        except ProcessLookupError:
            pass  # the process ended

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def inject(tb: Any, fault: Fault, procs: dict[str, Any]) -> CpuThrottle | None:
    """Cause the fault in the running network; a slow worker's throttle is returned (stop it later).

    `procs`: the run's host processes by name (workers by host, aggregators as "agg@HOST").
    """
    if fault.kind == "kill_switch":
        tb.switch(fault.target).process.send_signal(signal.SIGKILL)
    elif fault.kind == "link_down":
        a, _, b = fault.target.partition("-")
        tb.net.configLinkStatus(a, b, "down")
    elif fault.kind == "kill_aggregator":
        key = f"agg@{fault.target}"
        if key not in procs:
            raise FaultError(f"--fault {fault}: no host aggregator runs on {fault.target}")
        procs[key].popen.send_signal(signal.SIGKILL)
    else:
        return CpuThrottle(procs[fault.target].popen.pid, fault.value)
    return None


def train_config(**changes: Any) -> TrainConfig:
    """What the workers of a fault run train: short, evaluated after the last step only; `changes` override.

    hosts.agent_config is imported here, not at the top: it pulls in numpy, and `aggnet` imports this
    module just to build its parser."""
    from hosts.agent_config import TrainConfig

    return TrainConfig(**{"steps": 40, "eval_every": 0, **changes})


@dataclass(frozen=True)
class FaultRunConfig:
    topo: str = "leafspine"
    workers: tuple[str, ...] = ("h1", "h3", "h5", "h7")  # one per leaf: the tree crosses a spine
    faults: tuple[Fault, ...] = ()
    scheme: str = "innet"  # innet | hostagg
    staleness: int = 0  # hostagg: the bound (hosts.host_agg)
    stragglers: tuple[tuple[str, float], ...] = ()  # (worker, compute delay per step in seconds)
    replica: bool = True  # hostagg: run a replica of the aggregator
    train: TrainConfig = field(default_factory=train_config)  # train.seed also seeds the placement
    k: int = 1
    algo: str = "soar"
    slots: int = 64
    min_rto_s: float = 0.2
    detect_interval_s: float = 0.1
    detect_timeout_s: float = 10.0
    comm_timeout_s: float = 30.0
    timeout_s: float = 600.0
    out: str = "runs"


@dataclass
class _Run:
    """What one run_with_faults call keeps track of."""

    cfg: FaultRunConfig
    topo: Any
    run_dir: Path
    procs: dict[str, Any] = field(default_factory=dict)
    throttles: list[CpuThrottle] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)  # per agent start: the step it resumed after
    killed: set[str] = field(default_factory=set)  # switches and processes killed on purpose
    aggregators: list[str] = field(default_factory=list)  # hostagg: aggregator host, then replica host

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"


def run_with_faults(cfg: FaultRunConfig) -> dict:
    """Train on a Mininet network, inject the faults, recover, finish; returns (and writes) the results."""
    from controller.failover import Failover, FailureDetector
    from controller.installer import Installer, connect_all, load_program
    from controller.placement import Job
    from controller.topology import load_topology
    from hosts.checkpoint import common_step
    from testbed.experiment import JOB_NAME, RunFailed, prepare_worker_hosts, program_path, resolve_topology
    from testbed.network import Testbed, new_run_dir

    topo = load_topology(resolve_topology(cfg.topo))
    check_run_config(cfg, topo)
    run = _Run(cfg, topo, Path(new_run_dir(cfg.out)))
    pending = sorted(cfg.faults, key=lambda f: f.at_step)
    started = time.monotonic()
    with Testbed(topo, "embedded", str(run.run_dir)) as tb:
        conns = connect_all(topo, side_channel_ports={s: tb.side_channel_port(s) for s in topo.switches})
        program = load_program(program_path(32))
        failover = Failover(topo, program, conns, Job(JOB_NAME, cfg.workers, k=cfg.k, slots=cfg.slots),
                            cfg.algo, cfg.train.seed, timeout_s=cfg.min_rto_s)
        try:
            spec = None
            if cfg.scheme == "innet":
                spec = failover.install()
                prepare_worker_hosts(tb, cfg.workers, spec.agg_ip)
            else:
                Installer(topo, program, conns).install([])  # routes only: hosts sum
                _start_aggregators(tb, run)
            resume = -1
            while resume < cfg.train.steps - 1:  # a fault after the last step leaves nothing to redo
                _start_agents(tb, run, spec, resume)
                fault = _watch(tb, run, pending, started)
                if fault is None:
                    break
                detector = FailureDetector(failover.topo, failover.connections, cfg.detect_interval_s)
                injected = time.monotonic()
                failure = detector.detect(cfg.detect_timeout_s)
                if failure is None:
                    raise RunFailed(f"run failed: {fault} was not detected within {cfg.detect_timeout_s:g} s")
                detected_s = time.monotonic() - injected
                _stop_processes(run)
                spec = failover.recover(failure)
                resume = common_step(run.checkpoints, list(cfg.workers))
                run.events.append({"fault": str(fault), "detected": str(failure), "detected_after_s": detected_s,
                                   "resume_after_step": resume, "root": failover.placement.tree.root,
                                   "aggregators": sorted(failover.placement.placement.aggregators),
                                   "job_id": spec.job_id})
        finally:
            _stop_processes(run)
            for conn in failover.connections.values():
                conn.close()
    results = _results(run, time.monotonic() - started)
    (run.run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def check_run_config(cfg: FaultRunConfig, topo: Any) -> None:
    """Reject a run that cannot work before the network starts (one line, exit 2)."""
    unknown = [h for h in cfg.workers if h not in topo.hosts]
    if unknown:
        raise FaultError(f"workers: {unknown[0]!r} is not a host of {topo.source}")
    if cfg.scheme not in ("innet", "hostagg"):
        raise FaultError(f"scheme: {cfg.scheme!r} is not one of innet, hostagg")
    for fault in cfg.faults:
        parse_fault(str(fault), topo, cfg.workers)
        if fault.kind == "kill_aggregator" and cfg.scheme != "hostagg":
            raise FaultError(f"--fault {fault}: there is no host aggregator in scheme {cfg.scheme}")
        if fault.kind in NETWORK_FAULTS and cfg.scheme != "innet":
            raise FaultError(f"--fault {fault}: switch and link failures are recovered for scheme innet only")
    for name, delay in cfg.stragglers:
        if name not in cfg.workers or delay < 0:
            raise FaultError(f"stragglers: {name!r} must be a worker with a delay >= 0, got {delay!r}")


def _start_aggregators(tb: Any, run: _Run) -> None:
    """Host aggregator on the idlest host, its replica on the next (hosts.straggler.pick_aggregators)."""
    from hosts.straggler import Straggler, pick_aggregators
    from testbed.experiment import start_host_aggregators

    cfg = run.cfg
    stragglers = {name: Straggler(delay) for name, delay in cfg.stragglers}
    run.aggregators = pick_aggregators(list(run.topo.hosts), cfg.workers, stragglers, 2 if cfg.replica else 1)
    path = _write_agent_config(run, None)
    for proc in start_host_aggregators(tb, run.aggregators, path, run.logs):
        run.procs[proc.name] = proc


def _write_agent_config(run: _Run, spec: Any) -> Path:
    """agent-N.json for the N-th start of the workers (N = segments so far)."""
    from hosts.agent_config import AGG_PORT_TCP, REPLICA_PORT, RING_PORT, AgentConfig
    from hosts.comm import Endpoint
    from hosts.straggler import Straggler

    cfg = run.cfg
    workers = tuple(Endpoint(h, run.topo.hosts[h].ip, RING_PORT) for h in cfg.workers)
    ends = [Endpoint(h, run.topo.hosts[h].ip, port) for h, port in zip(run.aggregators, (AGG_PORT_TCP, REPLICA_PORT))]
    config = AgentConfig(cfg.scheme, cfg.train, workers, None, spec, cfg.comm_timeout_s,
                         aggregator=ends[0] if ends else None, replica=ends[1] if len(ends) > 1 else None,
                         staleness=cfg.staleness, stragglers={n: Straggler(d) for n, d in cfg.stragglers})
    run.logs.mkdir(parents=True, exist_ok=True)
    path = run.run_dir / f"agent-{len(run.segments)}.json"
    path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    return path


def _start_agents(tb: Any, run: _Run, spec: Any, resume: int) -> None:
    """Start every worker for the current job spec (resuming after `resume`)."""
    from testbed.experiment import start_process

    segment = len(run.segments)
    path = _write_agent_config(run, spec)
    for h in run.cfg.workers:
        log = run.logs / f"{h}.log"
        if log.exists():  # the agent rewrites its log: keep the earlier segment's
            log.rename(run.logs / f"{h}.segment-{segment - 1}.log")
        argv = ["-m", "hosts.agent", "--config", str(path), "--worker", h, "--out", str(run.logs),
                "--checkpoint", str(run.checkpoints), "--resume-step", str(resume)]
        run.procs[h] = start_process(tb, h, h if segment == 0 else f"{h}.segment-{segment}", argv, run.logs)
    run.segments.append({"resume_after_step": resume})


def _watch(tb: Any, run: _Run, pending: list, started: float) -> Any:
    """Until the agents finish (None) or a network fault was injected (returned); slow_worker faults are
    injected here and training goes on."""
    from testbed.experiment import RunFailed, read_jsonl

    metrics = run.logs / f"{run.cfg.workers[0]}.metrics.jsonl"
    while True:
        records = read_jsonl(metrics)
        done = records[-1]["step"] if records else -1
        while pending and pending[0].at_step <= done:
            fault = pending.pop(0)
            run.killed.add(f"agg@{fault.target}" if fault.kind == "kill_aggregator" else fault.target)
            throttle = inject(tb, fault, run.procs)
            if fault.kind in NETWORK_FAULTS:
                return fault
            if throttle:
                run.throttles.append(throttle)
            run.events.append({"fault": str(fault), "at_step": done})
        failed = [f for name, p in run.procs.items() if name not in run.killed and (f := p.failure())]
        if failed:
            raise RunFailed(f"run failed: {failed[0]} (logs in {run.logs})")
        dead = [d for d in tb.dead_switches() if d.split(":")[0] not in run.killed]
        if dead:
            raise RunFailed(f"run failed: switch {dead[0]} died with no fault injected")
        if all(p.popen.poll() == 0 for name, p in run.procs.items() if name not in run.killed):
            return None
        if time.monotonic() - started > run.cfg.timeout_s:
            raise RunFailed(f"run failed: not finished after {run.cfg.timeout_s:g} s (logs in {run.logs})")
        time.sleep(POLL_S)


def _stop_processes(run: _Run) -> None:
    for throttle in run.throttles:
        throttle.stop()
    run.throttles.clear()
    for proc in run.procs.values():
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()


def _results(run: _Run, seconds: float) -> dict:
    """Per worker, the steps its final weights went through: each segment's steps up to the next resume."""
    from testbed.experiment import read_aggregation_stats, read_jsonl

    lineage = {}
    for h in run.cfg.workers:
        records = read_jsonl(run.logs / f"{h}.metrics.jsonl")
        steps: list[int] = []
        for r in records:
            while steps and steps[-1] >= r["step"]:  # a restart redid this step: the earlier try is void
                steps.pop()
            steps.append(r["step"])
        lineage[h] = steps
    results = {"config": {**asdict(run.cfg), "faults": [str(f) for f in run.cfg.faults]},
               "run_dir": str(run.run_dir), "events": run.events, "segments": run.segments, "wall_time_s": seconds,
               "steps_applied": {h: len(s) for h, s in lineage.items()},
               "lineage_ok": all(s == list(range(run.cfg.train.steps)) for s in lineage.values()),
               "checkpoints": str(run.checkpoints),
               "per_worker": {h: json.loads(p.read_text()) for h in run.cfg.workers
                              if (p := run.logs / f"{h}.result.json").exists()}}
    if run.aggregators:
        results["aggregators"] = run.aggregators
        results["staleness_bound"] = run.cfg.staleness
        results["aggregation"] = read_aggregation_stats(run.logs)
    return results


# ---------------------------------------------------------------------------- aggnet faults

def add_arguments(parser: Any) -> None:
    parser.add_argument("--topo", default="leafspine", help="topology name or file (default leafspine)")
    parser.add_argument("--workers", default="h1,h3,h5,h7", help="worker hosts in rank order, comma-separated")
    parser.add_argument("--scheme", default="innet", choices=("innet", "hostagg"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--fault", action="append", default=[], metavar="KIND:TARGET@STEP[=SHARE]",
                        help="kill_switch:s1@10, link_down:s3-s1@10, slow_worker:h2@5=0.3, kill_aggregator:h4@8")
    parser.add_argument("--staleness", type=int, default=0, help="hostagg: bound on gradient staleness (rounds)")
    parser.add_argument("--straggler", action="append", default=[], metavar="HOST=DELAY_S",
                        help="a worker that computes DELAY_S seconds longer every step")
    parser.add_argument("--no-replica", action="store_true", help="hostagg: no replica of the aggregator")
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs")


def config_from_args(args: Any) -> FaultRunConfig:
    """The run `aggnet faults` options ask for."""
    from testbed.experiment import parse_stragglers

    return FaultRunConfig(topo=args.topo, workers=tuple(w for w in args.workers.split(",") if w),
                          faults=tuple(parse_fault(f) for f in args.fault), scheme=args.scheme,
                          staleness=args.staleness, stragglers=parse_stragglers(args.straggler),
                          replica=not args.no_replica, train=train_config(steps=args.steps, seed=args.seed),
                          k=args.k, out=args.out)


def run(args: Any) -> int:
    """`aggnet faults`: one run with the faults injected; prints what happened, exit 1 if a step was lost."""
    results = run_with_faults(config_from_args(args))
    for event in results["events"]:
        print(json.dumps(event))
    print(f"steps applied per worker: {results['steps_applied']} (each step once, in order: {results['lineage_ok']})")
    print(f"results: {results['run_dir']}/results.json")
    return 0 if results["lineage_ok"] else 1
