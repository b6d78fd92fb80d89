"""Fault injection during a training run, and the run that survives it: `aggnet faults`.

    results = FaultRun(RunConfig(faults=FaultConfig(faults=(parse_fault("kill_switch:s1@10"),)))).execute()

Faults, written KIND:TARGET@STEP (testbed.config.Fault; injected once rank 0 has finished STEP):
- `kill_switch:s1@10`   the switch's process gets SIGKILL;
- `link_down:s3-s1@10`  both ends of the link go down (Mininet's configLinkStatus);
- `slow_worker:h2@5=0.3` the worker's agent gets 30 % of a CPU from then on (SIGSTOP/SIGCONT
  duty cycle: a CPU limit without cgroups), so it straggles;
- `kill_aggregator:h4@10` the host aggregator's process on h4 gets SIGKILL (schemes hostagg
  and split: its replica takes over, hosts.replica, in split also the aggregator's seat in the
  tree; the workers go on).

FaultRun is testbed.run.Run with three phases of its own: install_trees (the job's tree through
controller.failover, which can replan it), start_hosts (agents that checkpoint every step) and
watch: after a switch or link fault the controller's FailureDetector must notice it (the time is
recorded); the workers, stuck on the broken tree, are stopped; the job is rerouted and
reinstalled around the failure (its slots zeroed); the workers restart from the newest step they
all completed (`common_step`) and train to the end. `results.json` records every fault, when it
was noticed, the resumed step, the new tree, and the steps each worker's final weights went
through (each exactly once, in order, when nothing was lost or doubled).
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from typing import Any

from testbed.config import Fault, JobConfig, NetworkConfig, RunConfig
from testbed.run import JOB_NAME, POLL_S, Run, RunError, RunFailed, read_aggregation_stats, read_jsonl
from testbed.timescale import unscaled_results

NETWORK_FAULTS = ("kill_switch", "link_down")  # the controller must notice and reinstall
THROTTLE_PERIOD_S = 0.1


class FaultError(RunError):
    """A fault naming nothing in the topology, or one the run's scheme cannot recover from; one line, exit 2."""


def check_fault(fault: Fault, topo: Any, workers: list[str], scheme: str) -> None:
    """FaultError unless `fault` names something of the topology and the scheme can recover from it."""
    if fault.kind == "kill_switch" and fault.target not in topo.switches:
        raise FaultError(f"--fault {fault}: no switch {fault.target!r} in {topo.source}")
    if fault.kind == "link_down":
        try:
            topo.link_between(*fault.target.split("-", 1))
        except (KeyError, TypeError):
            raise FaultError(f"--fault {fault}: no link {fault.target!r} in {topo.source}") from None
    if fault.kind == "slow_worker" and fault.target not in workers:
        raise FaultError(f"--fault {fault}: {fault.target!r} is not a worker ({', '.join(workers)})")
    if fault.kind == "kill_aggregator" and fault.target not in topo.hosts:
        raise FaultError(f"--fault {fault}: no host {fault.target!r} in {topo.source}")
    if fault.kind == "kill_aggregator" and scheme not in ("hostagg", "split"):
        raise FaultError(f"--fault {fault}: there is no host aggregator in scheme {scheme}")
    if fault.kind in NETWORK_FAULTS and scheme != "innet":
        raise FaultError(f"--fault {fault}: switch and link failures are recovered for scheme innet only")


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
        assert fault.value is not None, "parse_fault requires a share for slow_worker"
        return CpuThrottle(procs[fault.target].popen.pid, fault.value)
    return None


def step_lineage(metrics: Any) -> list[int]:
    """The steps a worker's final weights went through, from its metrics.jsonl over every restart:
    each segment's steps up to the next resume (a restart redid those after it: the earlier tries are void)."""
    steps: list[int] = []
    for r in read_jsonl(metrics):
        while steps and steps[-1] >= r["step"]:
            steps.pop()
        steps.append(r["step"])
    return steps


def _base(name: str) -> str:
    """A process's name without its segment: h1.segment-2 -> h1."""
    return name.split(".segment-")[0]


# One worker per leaf of leafspine, so the tree crosses a spine; short training, evaluated once at the end.
DEFAULTS = RunConfig(network=NetworkConfig(topo="leafspine"), job=JobConfig(worker_hosts=("h1", "h3", "h5", "h7")),
                     train=dataclasses.replace(RunConfig().train, steps=40, eval_every=0), timeout_s=600.0)


class FaultRun(Run):
    """A training run with the faults of `cfg.faults` injected and recovered from (module docstring)."""

    def __init__(self, cfg: RunConfig, reporter: Any = None):
        super().__init__(cfg, reporter)
        self.pending = sorted(cfg.faults.faults, key=lambda f: f.at_step)
        self.failover: Any = None
        self.throttles: list[CpuThrottle] = []
        self.events: list[dict] = []
        self.segments: list[dict] = []  # per start of the workers: the step it resumed after
        self.killed: set[str] = set()  # switches and processes killed on purpose
        self.checkpoints = self.run_dir / "checkpoints"

    def plan_jobs(self) -> list:
        jobs = super().plan_jobs()
        job = jobs[0]
        if job.scheme not in ("innet", "hostagg", "split"):
            raise FaultError(f"--scheme: {job.scheme!r} is not one of innet, hostagg, split")
        for fault in self.cfg.faults.faults:
            check_fault(fault, self.topo, job.workers, job.scheme)
        return jobs

    def install_trees(self) -> None:
        """The job's tree through controller.failover (which replans it after a failure); hostagg: routes only;
        split: its tree with the aggregator's seat, once."""
        from controller.failover import Failover
        from controller.placement import Job

        job, cfg = self.jobs[0], self.cfg
        if job.scheme == "split":
            super().install_trees()
            return
        if job.scheme != "innet":
            self.installer.install([])
            return
        self.failover = Failover(self.topo, self.installer.program, self.conns,
                                 Job(JOB_NAME, tuple(job.workers), k=cfg.job.k, slots=cfg.job.slots),
                                 cfg.job.algo, cfg.train.seed, timeout_s=cfg.job.rto_bounds()[0],
                                 ecn_fraction=self.installer.ecn_fraction)
        self.use_spec(self.failover.install())

    def use_spec(self, spec: Any) -> None:
        from testbed.run import prepare_worker_hosts

        job = self.jobs[0]
        job.spec, job.job_id = self.job_spec(job, spec), spec.job_id
        prepare_worker_hosts(self.tb, job.workers, spec.agg_ip)

    def start_hosts(self) -> None:
        """The host aggregators (hostagg), then the workers from the start."""
        job = self.jobs[0]
        config = self.write_agent_config(job, "agent-0.json")
        for role, host in reversed(list(zip(("hostagg", "replica"), job.aggregators))):
            name = f"{'agg' if role == 'hostagg' else 'replica'}@{host}"
            job.processes.append(self.start(host, name, [role, "--config", str(config), "--out", str(job.out)]))
        self.start_workers(-1)

    def start_workers(self, resume: int) -> None:
        """Every worker for the current job spec, resuming after step `resume` (-1: from the start)."""
        job, segment = self.jobs[0], len(self.segments)
        config = self.write_agent_config(job, f"agent-{segment}.json")
        for h in job.workers:
            log = job.out / f"{h}.log"
            if log.exists():  # the agent rewrites its log: keep the earlier segment's
                log.rename(job.out / f"{h}.segment-{segment - 1}.log")
            argv = [*self.worker_argv(job, h, config), "--checkpoint", str(self.checkpoints), "--resume-step",
                    str(resume)]
            job.processes.append(self.start(h, h if segment == 0 else f"{h}.segment-{segment}", argv))
        self.segments.append({"resume_after_step": resume})

    def watch(self) -> None:
        """Train, injecting the faults as rank 0 passes their steps; after a network fault, detect it,
        reroute the job and restart the workers from the newest step they all completed."""
        from controller.failover import FailureDetector
        from hosts.checkpoint import common_step

        cfg, job = self.cfg, self.jobs[0]
        started = time.monotonic()
        while True:
            fault = self.watch_segment(started)
            if fault is None:
                return
            detector = FailureDetector(self.failover.topo, self.failover.connections, cfg.faults.detect_interval_s)
            injected = time.monotonic()
            failure = detector.detect(cfg.faults.detect_timeout_s)
            if failure is None:
                raise RunFailed(f"run failed: {fault} was not detected within {cfg.faults.detect_timeout_s:g} s")
            detected_s = time.monotonic() - injected
            self.stop_workers()
            self.use_spec(self.failover.recover(failure))
            self.conns = {n: c for n, c in self.conns.items() if n in self.failover.connections}  # not the dead
            resume = common_step(self.checkpoints, job.workers)
            self.events.append({"fault": str(fault), "detected": str(failure), "detected_after_s": detected_s,
                                "resume_after_step": resume, "root": self.failover.placement.tree.root,
                                "aggregators": sorted(self.failover.placement.placement.aggregators),
                                "job_id": job.job_id})
            if resume >= cfg.train.steps - 1:  # a fault after the last step leaves nothing to redo
                return
            self.start_workers(resume)

    def watch_segment(self, started: float) -> Fault | None:
        """Until the workers finish (None) or a network fault was injected (returned); slow_worker and
        kill_aggregator faults are injected here and training goes on."""
        job = self.jobs[0]
        metrics = job.out / f"{job.workers[0]}.metrics.jsonl"
        while True:
            records = read_jsonl(metrics)
            done = records[-1]["step"] if records else -1
            while self.pending and self.pending[0].at_step <= done:
                fault = self.pending.pop(0)
                self.killed.add(f"agg@{fault.target}" if fault.kind == "kill_aggregator" else fault.target)
                throttle = inject(self.tb, fault, {_base(p.name): p for p in self.processes()})
                if fault.kind in NETWORK_FAULTS:
                    return fault
                if throttle:
                    self.throttles.append(throttle)
                self.events.append({"fault": str(fault), "at_step": done})
            if self.poll(self.ignored()):
                return None
            if time.monotonic() - started > self.cfg.timeout_s:
                raise RunFailed(f"run failed: not finished after {self.cfg.timeout_s:g} s (logs in {self.logs})")
            time.sleep(POLL_S)

    def processes(self) -> list:
        """The current processes: a restarted worker's newest segment only (earlier ones were stopped)."""
        current = {_base(p.name): p for p in super().processes()}
        return list(current.values())

    def ignored(self) -> set[str]:
        """What the watch leaves alone: switches and processes killed or slowed on purpose."""
        return self.killed | {p.name for p in self.processes() if _base(p.name) in self.killed}

    def stop_workers(self) -> None:
        """Kill the workers (and release the slowed ones): they are stuck on a broken tree."""
        for throttle in self.throttles:
            throttle.stop()
        self.throttles.clear()
        for proc in self.processes():
            if _base(proc.name) in self.jobs[0].workers:
                proc.stop(grace_s=0)

    def stop_hosts(self) -> None:
        self.stop_workers()
        for proc in self.processes():
            proc.stop(grace_s=0)

    def results(self, seconds: float, error: Exception | None) -> dict:
        """Per worker, the steps its final weights went through: each segment's steps up to the next resume."""
        from config import flat_dict

        cfg, job = self.cfg, self.jobs[0]
        lineage = {h: step_lineage(job.out / f"{h}.metrics.jsonl") for h in job.workers}
        config = flat_dict(self.asked)
        config.update(topo=self.topo.source, worker_hosts=job.workers, faults=[str(f) for f in cfg.faults.faults])
        results: dict[str, Any] = {
            "config": config, "run_dir": str(self.run_dir), "events": self.events, "segments": self.segments,
            "wall_time_s": seconds, "steps_applied": {h: len(s) for h, s in lineage.items()},
            "lineage_ok": all(s == list(range(cfg.train.steps)) for s in lineage.values()),
            "checkpoints": str(self.checkpoints), "counters": self.counters, "per_worker": self.per_worker(job),
            "fidelity": self.fidelity}
        if job.aggregators:
            results.update(aggregators=job.aggregators, staleness_bound=cfg.job.staleness,
                           aggregation=read_aggregation_stats(job.out))
        if error is not None:
            results["error"] = str(error)
        return unscaled_results(results, cfg.scale)

    def write_results(self, results: dict) -> None:
        (self.run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")


# ---------------------------------------------------------------------------- aggnet faults

def add_arguments(parser: Any) -> None:
    from config import add_options

    add_options(parser, RunConfig, DEFAULTS)


def run(args: Any) -> int:
    """`aggnet faults`: one run with the faults injected; prints what happened, exit 1 if a step was lost."""
    from testbed.run_cli import config_from_args

    results = FaultRun(config_from_args(args, DEFAULTS)).execute()
    for event in results["events"]:
        print(json.dumps(event))
    print(f"steps applied per worker: {results['steps_applied']} (each step once, in order: {results['lineage_ok']})")
    print(f"results: {results['run_dir']}/results.json")
    return 0 if results["lineage_ok"] else 1

