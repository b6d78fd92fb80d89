"""`aggnet soak`: train for hours on a multi-job network while a seeded schedule of faults hits it.

    aggnet soak --hours 1 --isolate          # in a fresh network namespace of its own
    aggnet soak --minutes 3 --seed 7         # the short form the suite runs

The jobs come from a scenario file (testbed.scenario; default experiments/soak.yaml: two
in-network jobs on tree2) and run as its `unaware` mode: one network for the whole soak. They
train in rounds: every round, each job trains `train.steps` steps from scratch with the same
seed, so every round must end with the same weights. Round 0 runs with no faults and is the
reference; from then on a schedule drawn from `--seed` (same seed, same schedule) hits the
network, one fault at a time, `--gap` seconds apart on average:

- kill_switch: SIGKILL a switch, start it again, the controller reconnects, every tree is
  reinstalled (slots zeroed) and every job resumes from the newest step all its workers have;
- restart_controller: the controller's connections are closed and opened again as a new client,
  which finds the switches in sync: training goes on untouched;
- kill_worker: SIGKILL one worker; its job alone is reinstalled and resumes;
- link_flap: a switch-to-switch link goes down and up 1-3 times; loss, delay: a switch port drops
  a share of its packets or delays them for a while. Training rides through these on
  retransmissions; a worker that gives up makes its job resume (recorded with its cause).

Every `--sample-every` seconds the memory, descriptors and threads of every AggNet process
(switches, workers, Mininet host shells, the soak with its controller) and the system counts are
sampled (testbed.growth). The run folder gets soak.json (the schedule, every resume, steps and
verdicts per job and round, growth per series), samples.jsonl and soak.png. Exit 1 with one line
when a step was lost or doubled, a round's weights differ from round 0's, or a series grew.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.faults import step_lineage
from testbed.run import REPO, JobRun, RunFailed, read_jsonl
from testbed.scenario import ModeRun, Scenario

DEFAULT_SCENARIO = str(REPO / "experiments" / "soak.yaml")
FAULTS = ("kill_switch", "restart_controller", "kill_worker", "link_flap", "loss", "delay")
DISRUPTIVE = ("kill_switch", "kill_worker")  # the soak itself stops the workers and resumes
POLL_S = 0.2
MAX_RETRIES = 5  # resumes of a job from one step in one round before the soak gives up on it


class SoakError(Exception):
    """Bad soak options (one line, exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Action:
    """One timed step of a fault: `at_s` after round 0 ended. `fault` numbers the fault it belongs to."""

    at_s: float
    kind: str  # kill_switch, restart_controller, kill_worker, link_down, link_up, loss, delay
    target: str = ""  # s1 | s2-s1 | job:h1 | s1:3 (a switch port)
    value: float = 0.0  # loss percent, delay ms (0: back to the link's own)
    fault: int = 0

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}" + (f"={self.value:g}" if self.kind in ("loss", "delay") else "")


def draw_schedule(seed: int, topo: Any, jobs: dict[str, list[str]], span_s: float, gap_s: float) -> list[Action]:
    """The faults of a soak lasting `span_s`, one at a time, gaps of 0.5-1.5 x `gap_s`: the same for the
    same seed, topology and jobs."""
    rng = random.Random(seed)
    fabric = sorted(f"{link.a}-{link.b}" for link in topo.links if topo.is_switch(link.a) and topo.is_switch(link.b))
    ports = sorted(f"{node}:{link.port_on(node)}" for link in topo.links for node in (link.a, link.b)
                   if topo.is_switch(node))
    workers = [f"{job}:{w}" for job, ws in sorted(jobs.items()) for w in ws]
    kinds = [k for k in FAULTS if k != "link_flap" or fabric]
    out: list[Action] = []
    t, n = gap_s * rng.uniform(0.5, 1.5), 0
    while t < span_s:
        kind = rng.choice(kinds)
        if kind == "kill_switch":
            out.append(Action(t, kind, rng.choice(sorted(topo.switches)), fault=n))
        elif kind == "restart_controller":
            out.append(Action(t, kind, fault=n))
        elif kind == "kill_worker":
            out.append(Action(t, kind, rng.choice(workers), fault=n))
        elif kind == "link_flap":
            link, down_s = rng.choice(fabric), rng.uniform(0.3, 3.0)
            for i in range(rng.randint(1, 3)):
                out += [Action(t + 2 * i * down_s, "link_down", link, fault=n),
                        Action(t + (2 * i + 1) * down_s, "link_up", link, fault=n)]
        else:
            port, hold_s = rng.choice(ports), rng.uniform(3.0, 15.0)
            value = rng.choice((0.5, 1.0, 2.0)) if kind == "loss" else rng.choice((1.0, 5.0, 20.0))
            out += [Action(t, kind, port, value, fault=n), Action(t + hold_s, kind, port, 0.0, fault=n)]
        t = out[-1].at_s + gap_s * rng.uniform(0.5, 1.5)
        n += 1
    return out


class SoakRun(ModeRun):
    """The soak on one network (module docstring); `execute()` returns the report."""

    def __init__(self, scn: Scenario, run_dir: Path, span_s: float, seed: int, gap_s: float, sample_s: float,
                 say: Any = print):
        super().__init__(scn, "unaware", run_dir)
        self.span_s = span_s
        self.seed = seed
        self.sample_s = sample_s
        self.say = say
        self.schedule = draw_schedule(seed, self.topo, {j.name: j.workers for j in self.jobs}, span_s, gap_s)
        self.round = 0
        self.segments: dict[str, int] = {}  # job -> worker starts in this round
        self.done: set[str] = set()  # jobs that finished this round
        self.killed: set[str] = set()  # process names killed on purpose (this round)
        self.rounds: list[dict] = []
        self.resumes: list[dict] = []
        self.retries: dict[tuple[str, int], int] = {}  # (job, step) -> resumes from it this round
        self.applied: list[dict] = []
        self.last_fault = "none"
        self.t0 = time.monotonic()
        self.sampler: Any = None

    # -- the lifecycle's phases

    def plan_jobs(self) -> list[JobRun]:
        jobs = super().plan_jobs()
        if any(j.scheme != "innet" for j in jobs):
            raise SoakError("aggnet soak: every job must fit in the switches (innet); "
                            f"{', '.join(j.name for j in jobs if j.scheme != 'innet')} did not")
        return jobs

    def start_meter(self) -> None:
        """No CPU meter: it keeps every sample in memory, which over hours is growth of our own."""

    def start_hosts(self) -> None:
        import torch  # noqa: F401 - comparing weights needs it: loaded now, its memory is not growth later

        from testbed.growth import Sampler

        self.sampler = Sampler(self.run_dir / "samples.jsonl", self.named_pids)
        self.t0 = time.monotonic()
        self.start_round()

    def named_pids(self) -> dict[str, int]:
        """Every AggNet process by name: switches, the current workers, the nodes' Mininet shells, the soak
        (its controller)."""
        out = {"soak": os.getpid()}
        out.update((s.name, s.process.pid) for s in self.tb.net.switches if s.process is not None)
        out.update((f"shell.{n.name}", n.shell.pid) for n in self.tb.net.hosts + self.tb.net.switches
                   if n.shell is not None)
        out.update((p.name, p.popen.pid) for p in self.processes() if p.popen.poll() is None)
        return out

    def watch(self) -> None:
        """Rounds until the span is over (the last one runs to its end, with no more faults)."""
        pending = list(self.schedule)
        faults_t0: float | None = None
        next_sample = round_started = time.monotonic()
        while True:
            now = time.monotonic()
            if now - round_started > self.cfg.timeout_s:
                raise RunFailed(f"soak: round {self.round} not done after {self.cfg.timeout_s:g} s "
                                f"(logs in {self.logs})")
            if now >= next_sample:
                self.sampler.sample(now - self.t0)
                next_sample = now + self.sample_s
            if faults_t0 is not None:
                while pending and now - faults_t0 >= pending[0].at_s:
                    self.apply(pending.pop(0), now - self.t0)
            self.check_workers()
            if len(self.done) == len(self.jobs):
                self.end_round()
                if faults_t0 is None:
                    faults_t0 = time.monotonic()
                if time.monotonic() - faults_t0 >= self.span_s:
                    self.sampler.sample(time.monotonic() - self.t0)
                    return
                self.round += 1
                self.start_round()
                round_started = time.monotonic()
            time.sleep(POLL_S)

    # -- rounds and workers

    def round_dir(self, kind: str, job: JobRun) -> Path:
        return self.run_dir / kind / f"round-{self.round}" / job.name

    def start_round(self) -> None:
        """Every job from step 0 on a clean tree (its slots zeroed)."""
        self.say(f"round {self.round}" + (" (reference, no faults)" if self.round == 0 else ""))
        self.done.clear()
        self.killed.clear()
        self.retries.clear()
        self.reinstall(None)
        for job in self.jobs:
            job.out = self.round_dir("logs", job)
            job.out.mkdir(parents=True, exist_ok=True)
            self.segments[job.name] = 0
            self.start_workers(job, -1)

    def start_workers(self, job: JobRun, resume: int) -> None:
        """The job's workers, resuming after step `resume` (-1: from the start)."""
        config = self.write_agent_config(job, f"agent-{job.name}.json")
        checkpoints = self.round_dir("checkpoints", job)
        segment = self.segments[job.name]
        job.processes = [self.start(h, f"{job.name}.{h}.r{self.round}s{segment}", [
            *self.worker_argv(job, h, config), "--checkpoint", str(checkpoints), "--resume-step", str(resume)])
            for h in job.workers]
        self.segments[job.name] = segment + 1

    def check_workers(self) -> None:
        """Mark finished jobs; a job whose worker failed (not killed by us) resumes."""
        for job in self.jobs:
            if job.name in self.done:
                continue
            failed = [f for p in job.processes if p.name not in self.killed and (f := p.failure())]
            if failed:
                self.resume(job, f"{failed[0]} (after {self.last_fault})")
            elif all(p.popen.poll() == 0 for p in job.processes):
                self.done.add(job.name)

    def resume(self, job: JobRun, cause: str) -> None:
        """Stop the job's workers, reinstall its tree alone (slots zeroed) and restart them from the newest
        step they all checkpointed."""
        self.stop_job(job)
        self.reinstall(job)
        self.restart_job(job, cause)

    def restart_job(self, job: JobRun, cause: str) -> None:
        from hosts.checkpoint import common_step

        step = common_step(self.round_dir("checkpoints", job), job.workers)
        self.resumes.append({"round": self.round, "job": job.name, "at_s": round(time.monotonic() - self.t0, 3),
                             "resume_after_step": step, "cause": cause})
        self.say(f"  resume {job.name} after step {step}: {cause}")
        tries = self.retries[(job.name, step)] = self.retries.get((job.name, step), 0) + 1
        if tries > MAX_RETRIES:
            raise RunFailed(f"soak: round {self.round}: job {job.name} resumed {MAX_RETRIES} times after step "
                            f"{step} without getting further; last: {cause}")
        if step >= self.cfg.train.steps - 1:
            self.done.add(job.name)
        else:
            self.start_workers(job, step)

    def stop_job(self, job: JobRun) -> None:
        for proc in job.processes:
            proc.stop(grace_s=0)

    def reinstall(self, job: JobRun | None) -> None:
        """Every job's tree anew (`job` None) or that job's alone, its slot region zeroed; the specs must
        not change (same ids and regions), since running workers keep theirs."""
        placements = [j.placement for j in self.jobs]
        if job is None:
            self.installer.install([])
        else:
            self.installer.remove_job(job.name)
        specs, _ = self.installer.install(placements)
        for j in self.jobs:
            spec = self.job_spec(j, specs[j.name])
            if j.spec is not None and spec != j.spec:
                raise RunFailed(f"soak: job {j.name}'s spec changed on reinstalling it")
            j.spec = spec

    def end_round(self) -> None:
        """Judge the round: each worker's steps once and in order, the weights those of round 0."""
        steps = self.cfg.train.steps
        entry: dict[str, Any] = {"round": self.round, "ended_s": round(time.monotonic() - self.t0, 3), "jobs": {}}
        for job in self.jobs:
            lineage = {h: step_lineage(job.out / f"{h}.metrics.jsonl") for h in job.workers}
            entry["jobs"][job.name] = {
                "steps_applied": {h: len(s) for h, s in lineage.items()},
                "steps_tried": sum(len(read_jsonl(job.out / f"{h}.metrics.jsonl")) for h in job.workers),
                "lineage_ok": all(s == list(range(steps)) for s in lineage.values()),
                "weights_equal_round_0": None if self.round == 0 else self.same_weights(job),
                "resumes": sum(1 for r in self.resumes if r["round"] == self.round and r["job"] == job.name)}
        if self.round > 0:  # round 0's final weights stay as the reference
            shutil.rmtree(self.run_dir / "checkpoints" / f"round-{self.round}", ignore_errors=True)
        self.rounds.append(entry)
        self.say(f"round {self.round} done: " + ", ".join(
            f"{name} lineage {'ok' if j['lineage_ok'] else 'BROKEN'}, weights "
            f"{'reference' if j['weights_equal_round_0'] is None else 'equal' if j['weights_equal_round_0'] else 'DIFFER'}"
            for name, j in entry["jobs"].items()))

    def same_weights(self, job: JobRun) -> bool:
        import torch

        last = self.cfg.train.steps - 1
        ours, reference = self.round_dir("checkpoints", job), self.run_dir / "checkpoints" / "round-0" / job.name
        for h in job.workers:
            try:
                a = torch.load(ours / f"{h}.step-{last}.pt", weights_only=True)["model"]
                b = torch.load(reference / f"{h}.step-{last}.pt", weights_only=True)["model"]
            except OSError:
                return False
            if a.keys() != b.keys() or not all(torch.equal(a[k], b[k]) for k in a):
                return False
        return True

    # -- faults

    def apply(self, action: Action, t: float) -> None:
        """Cause one step of a fault, and for the disruptive ones recover from it."""
        self.say(f"  {t:8.1f} s  {action}")
        self.applied.append({"at_s": round(t, 3), "action": str(action), "fault": action.fault, "round": self.round})
        self.last_fault = str(action)
        if action.kind == "kill_switch":
            self.kill_switch(action.target)
        elif action.kind == "restart_controller":
            self.restart_controller()
        elif action.kind == "kill_worker":
            name, _, host = action.target.partition(":")
            job = next(j for j in self.jobs if j.name == name)
            if name in self.done:
                self.applied[-1]["note"] = f"job {name} had finished its round"
            else:
                proc = next(p for p in job.processes if p.host == host)
                self.killed.add(proc.name)
                proc.popen.send_signal(signal.SIGKILL)
                self.resume(job, f"{action} killed it")
        elif action.kind in ("link_down", "link_up"):
            a, _, b = action.target.partition("-")
            self.tb.net.configLinkStatus(a, b, action.kind.removeprefix("link_"))
        else:
            self.shape(action)

    def shape(self, action: Action) -> None:
        """Loss or delay on a switch port's queue; 0 puts back the link's own."""
        switch, _, port = action.target.partition(":")
        link = next(lk for lk in self.topo.links if switch in (lk.a, lk.b) and lk.port_on(switch) == int(port))
        if action.kind == "loss":
            line = f"set_queue_loss {(action.value or link.loss or 0.0) / 100.0} {port}"
        else:
            line = f"set_queue_delay {action.value or link.delay_ms or 0.0} {port}"
        self.conns[switch].side_command(line)

    def kill_switch(self, name: str) -> None:
        """SIGKILL the switch, start it again, reconnect, reinstall every tree, resume every job."""
        switch = self.tb.switch(name)
        switch.process.send_signal(signal.SIGKILL)
        switch.process.wait()
        running = [j for j in self.jobs if j.name not in self.done]
        if not running:
            self.applied[-1]["note"] = "every job had finished its round"
        for job in running:
            self.stop_job(job)
        self.tb.restart_switch(name)
        self.reconnect()
        self.tb.apply_link_queues()
        self.reinstall(None)
        for job in running:
            self.restart_job(job, f"kill_switch:{name}")

    def restart_controller(self) -> None:
        """A new controller: connections closed and opened again, the state read back (in sync: no writes)."""
        self.reconnect()
        self.reinstall_in_place()

    def reconnect(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.connect()
        self.push_pipeline()

    def reinstall_in_place(self) -> None:
        specs, reports = self.installer.install([j.placement for j in self.jobs])
        writes = sum(r.writes for r in reports.values())
        if writes or any(self.job_spec(j, specs[j.name]) != j.spec for j in self.jobs):
            raise RunFailed(f"soak: the restarted controller found the switches out of sync ({writes} writes)")

    # -- results

    def stop_hosts(self) -> None:
        for job in self.jobs:
            self.stop_job(job)

    def results(self, seconds: float, error: Exception | None) -> dict:
        from testbed import growth

        samples = self.run_dir / "samples.jsonl"
        series = growth.load_series(samples) if samples.exists() else {}
        verdicts = growth.judge(series)
        faulted = self.rounds[1:]
        jobs = {j.name: {"rounds": len(self.rounds),
                         "steps_applied": sum(min(r["jobs"][j.name]["steps_applied"].values()) for r in self.rounds),
                         "resumes": sum(1 for r in self.resumes if r["job"] == j.name)} for j in self.jobs}
        report: dict[str, Any] = {
            "run_dir": str(self.run_dir), "seed": self.seed, "span_s": self.span_s, "wall_time_s": round(seconds, 3),
            "topo": self.topo.source, "steps_per_round": self.cfg.train.steps, "jobs": jobs,
            "schedule": [dataclasses.asdict(a) for a in self.schedule], "applied": self.applied,
            "resumes": self.resumes, "rounds": self.rounds, "samples": self.sampler.count if self.sampler else 0,
            "growth": verdicts,
            "verdicts": {
                "rounds_with_faults": len(faulted),
                "lineage_ok": bool(self.rounds) and all(j["lineage_ok"] for r in self.rounds for j in r["jobs"].values()),
                "weights_equal": bool(faulted) and all(j["weights_equal_round_0"] for r in faulted
                                                       for j in r["jobs"].values()),
                "growth_ok": not growth.failures(verdicts)}}
        if error is not None:
            report["error"] = str(error)
        return report

    def write_results(self, results: dict) -> None:
        from testbed import growth

        (self.run_dir / "soak.json").write_text(json.dumps(results, indent=2) + "\n")
        samples = self.run_dir / "samples.jsonl"
        if samples.exists():
            growth.plot(growth.load_series(samples), self.run_dir / "soak.png", [a["at_s"] for a in self.applied])


def failure_lines(report: dict) -> list[str]:
    """One line per thing the soak found wrong (empty: it passed)."""
    from testbed.growth import failures

    v, out = report["verdicts"], []
    for r in report["rounds"]:
        for name, j in r["jobs"].items():
            if not j["lineage_ok"]:
                out.append(f"round {r['round']}: job {name}: a step was lost or applied twice "
                           f"(steps applied {j['steps_applied']})")
            if j["weights_equal_round_0"] is False:
                out.append(f"round {r['round']}: job {name}: final weights differ from round 0's")
    if not v["rounds_with_faults"]:
        out.append("no round ran with faults: make the soak longer than one round")
    return out + failures(report["growth"])


def load_soak_scenario(path: str, steps: int | None) -> Scenario:
    """The scenario as a soak runs it: mode unaware only, no evaluation during training."""
    from testbed.scenario import load_scenario

    scn = load_scenario(path)
    train = dataclasses.replace(scn.train, eval_every=0, steps=steps or scn.train.steps)
    return dataclasses.replace(scn, modes=("unaware",), train=train, traffic=())
