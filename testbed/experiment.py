"""The experiment runner: one `aggnet run` from network up to teardown.

    results = run_experiment(RunConfig(topo="star4", workers=4, steps=200), Reporter())

Order: check the input (topology, workers, k, ...) before anything starts -> network up
(testbed.network.Testbed) with link rate/loss applied to the switches' egress queues ->
pipeline pushed, routes and the job's aggregation tree installed over P4Runtime
(controller.installer) -> host processes started inside the Mininet hosts (worker agents
or the all-reduce benchmark, plus a parameter server for scheme ps, or a host aggregator and
its replica for scheme hostagg), each logging under
runs/<ts>/logs/ -> wait, watching every process and switch -> switch counters read ->
host processes stopped -> teardown. Teardown always runs (errors, Ctrl-C, SIGTERM); the
first process that fails is named in a one-line error.

A job that placement gives no in-network capacity (its switches' slot budgets are too small)
is downgraded to scheme hostagg, announced in one line and recorded in results.json.

The run folder gets `agent.json` (the job's agent config every host process reads),
`results.json` (written also when a worker failed, with the error) and logs/.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from hosts.pacing import PACING_CHOICES
from protocol.wire import DEFAULT_LANES, LANE_COUNTS, program_name

REPO = Path(__file__).resolve().parent.parent
SCHEMES = ("innet", "ps", "ring", "hostagg")
WORKLOADS = ("train", "allreduce")
AGG_MAC = "02:00:00:00:ff:fe"  # any unicast MAC: the first switch intercepts by UDP port
JOB_NAME = "job1"
STOP_GRACE_S = 5.0
POLL_S = 0.2


class RunError(Exception):
    """Bad input to a run (topology, workers, options): one line, exit 2."""

    exit_code = 2


class RunFailed(Exception):
    """The run started but did not finish: a host process or a switch failed, or time ran out."""

    exit_code = 1


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs; defaults are `aggnet run`'s."""

    topo: str = "star4"
    workers: int | None = None  # the first N hosts; None: every host (or worker_hosts)
    worker_hosts: tuple[str, ...] = ()
    target: str = "embedded"
    algo: str = "soar"
    k: int = 1
    scheme: str = "innet"
    workload: str = "train"
    model: str = "mlp"
    dataset: str = "digits"
    steps: int = 200
    batch_size: int = 32
    lr: float = 0.1
    eval_every: int = 50
    elements: int = 100_000
    dtype: str = "int32"
    lanes: int = DEFAULT_LANES
    slots: int = 64  # the job's slot window on each aggregating switch
    # The all-reduce client's smallest retransmission timeout (JobSpec.timeout_s). Its backoff keeps
    # resends from snowballing at any value; 0.2 s avoids spurious ones when many switch processes
    # share the CPUs (fattree4 at 0.05 s: up to 6% of a link's packets were resends, at 0.2 s none).
    min_rto_s: float = 0.2
    pacing: str = "fixed"  # chunks in flight per worker: the whole slot window, or AIMD (hosts.pacing)
    link_mbps: float | None = None
    loss: float | None = None  # percent at every switch egress port
    seed: int = 0
    out: str = "runs"
    staleness: int = 0  # hostagg: how many rounds late a gradient may be summed (hosts.host_agg)
    stragglers: tuple[tuple[str, float], ...] = ()  # (worker, extra compute seconds per step)
    timeout_s: float = 900.0  # the whole run, from the first host process on
    comm_timeout_s: float = 30.0  # a host process gives up when its peers are silent this long


class Reporter:
    """What the runner tells the user; this one says nothing (tests). The CLI shows it with rich."""

    def status(self, message: str) -> None:
        """A phase started (network up, pipeline pushed, ...)."""

    def training_step(self, record: dict, total_steps: int) -> None:
        """Rank 0 finished a step (a line of its metrics.jsonl)."""

    def finished(self) -> None:
        """The host processes are done (stop any live display)."""


# ---------------------------------------------------------------------------- input checks

def resolve_topology(name_or_path: str) -> str:
    """A topology file path: the path itself, or a name/file under the repository's topologies/."""
    if os.path.isfile(name_or_path):
        return name_or_path
    for candidate in (REPO / "topologies" / name_or_path, REPO / "topologies" / f"{name_or_path}.yaml"):
        if candidate.is_file():
            return str(candidate)
    raise RunError(f"--topo: no topology file {name_or_path!r} (give a path or one of "
                   f"{', '.join(sorted(p.stem for p in (REPO / 'topologies').glob('*.yaml')))})")


def check_config(cfg: RunConfig) -> None:
    """Reject options that cannot work, before any network exists."""
    choices = {"scheme": (cfg.scheme, SCHEMES), "workload": (cfg.workload, WORKLOADS),
               "lanes": (cfg.lanes, LANE_COUNTS), "dtype": (cfg.dtype, ("int32", "float32")),
               "pacing": (cfg.pacing, PACING_CHOICES)}
    for option, (value, allowed) in choices.items():
        if value not in allowed:
            raise RunError(f"--{option}: {value!r} is not one of {', '.join(map(str, allowed))}")
    if cfg.k < 0:
        raise RunError(f"--k: must be >= 0, got {cfg.k}")
    positive = {"steps": cfg.steps, "elements": cfg.elements, "slots": cfg.slots, "timeout": cfg.timeout_s,
                "min-rto": cfg.min_rto_s}
    for option, value in positive.items():
        if value <= 0:
            raise RunError(f"--{option}: must be positive, got {value}")
    if cfg.link_mbps is not None and cfg.link_mbps <= 0:
        raise RunError(f"--link-mbps: must be positive, got {cfg.link_mbps}")
    if cfg.loss is not None and not 0 <= cfg.loss < 100:
        raise RunError(f"--loss: a percentage in [0, 100), got {cfg.loss}")
    if cfg.workload == "allreduce" and cfg.scheme in ("ring", "hostagg"):
        raise RunError(f"--scheme {cfg.scheme}: the all-reduce benchmark runs innet and ps "
                       f"({cfg.scheme} is for training)")
    if cfg.staleness < 0:
        raise RunError(f"--staleness: must be >= 0, got {cfg.staleness}")
    if cfg.staleness and cfg.scheme not in ("hostagg", "innet"):
        raise RunError(f"--staleness: only host aggregation bounds staleness (--scheme hostagg, or innet "
                       f"when downgraded), not --scheme {cfg.scheme}")
    for name, delay in cfg.stragglers:
        if delay < 0:
            raise RunError(f"--straggler {name}={delay:g}: the delay must be >= 0 seconds")


def parse_stragglers(items: list[str], option: str = "--straggler") -> tuple[tuple[str, float], ...]:
    """["h2=0.2", ...] -> (("h2", 0.2), ...): workers that compute that many seconds longer per step."""
    out = []
    for item in items:
        name, _, delay = item.partition("=")
        try:
            out.append((name.strip(), float(delay)))
        except ValueError:
            raise RunError(f"{option} {item!r}: expected HOST=DELAY_S, e.g. h2=0.2") from None
    return tuple(out)


def choose_workers(topo: Any, cfg: RunConfig) -> list[str]:
    """The worker hosts in rank order: --worker-hosts as given, else the first --workers hosts."""
    hosts = list(topo.hosts)
    if cfg.worker_hosts:
        unknown = [h for h in cfg.worker_hosts if h not in topo.hosts]
        if unknown:
            raise RunError(f"--worker-hosts: {unknown[0]!r} is not a host of {topo.source} "
                           f"(hosts: {', '.join(hosts)})")
        if len(set(cfg.worker_hosts)) != len(cfg.worker_hosts):
            raise RunError("--worker-hosts: a host is listed twice")
        if cfg.workers is not None and cfg.workers != len(cfg.worker_hosts):
            raise RunError(f"--workers {cfg.workers} disagrees with the {len(cfg.worker_hosts)} --worker-hosts")
        workers = list(cfg.worker_hosts)
    else:
        n = len(hosts) if cfg.workers is None else cfg.workers
        if not 1 <= n <= len(hosts):
            raise RunError(f"--workers: {topo.source} has {len(hosts)} hosts, asked for {n}")
        workers = hosts[:n]
    if len(workers) < 2:
        raise RunError(f"--workers: an all-reduce needs at least 2 workers, got {len(workers)}")
    for name, _ in cfg.stragglers:
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
    return str(REPO / "p4src" / program_name(lanes))


# ---------------------------------------------------------------------------- host processes

@dataclass
class HostProcess:
    """One process started inside a Mininet host; its stdout+stderr go to logs/NAME.out."""

    name: str  # "h1", or "ps" for the parameter server
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

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; safe when it already ended."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def start_process(tb: Any, host: str, name: str, argv: list[str], logs: Path) -> HostProcess:
    """`python -m ...` inside host's network namespace, with the interpreter running us (the .venv one)."""
    output = logs / f"{name}.out"
    with open(output, "wb") as out:
        popen = tb.host(host).popen([sys.executable, *argv], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=str(REPO))
    return HostProcess(name, host, popen, output)


def prepare_worker_hosts(tb: Any, hosts: Iterable[str], agg_ip: str) -> None:
    """Static ARP for the job's aggregation address on every worker host.

    Contributions are sent to agg_ip, which no host owns, so nothing would answer ARP for it;
    results come back from agg_ip too (aggnet.p4 set_host), so the host takes them as from a
    neighbour. One function for every runner (experiment, faults, scenario).
    """
    for h in hosts:
        node = tb.host(h)
        node.cmd(f"ip neigh replace {agg_ip} lladdr {AGG_MAC} dev {node.defaultIntf().name} nud permanent")


def start_host_aggregators(tb: Any, hosts: list[str], config: Path, logs: Path) -> list[HostProcess]:
    """The job's host aggregator on hosts[0] and, given a second host, its replica there.

    The replica starts first: the aggregator connects to it before serving anyone.
    Process names: agg@HOST, replica@HOST (logs/NAME.out).
    """
    roles = list(zip(("hosts.host_agg", "hosts.replica"), hosts))
    return [start_process(tb, host, f"{'agg' if module == 'hosts.host_agg' else 'replica'}@{host}",
                          ["-m", module, "--config", str(config), "--out", str(logs)], logs)
            for module, host in reversed(roles)]


def read_aggregation_stats(logs: Path) -> dict[str, dict]:
    """NAME -> what each host aggregator or replica did (its NAME.agg.json)."""
    return {p.name.removesuffix(".agg.json"): json.loads(p.read_text()) for p in sorted(logs.glob("*.agg.json"))}


# ---------------------------------------------------------------------------- results helpers

def read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return []


# ---------------------------------------------------------------------------- the run

class Experiment:
    """One run: call `run()` once; it returns the results dict (also written to results.json)."""

    def __init__(self, cfg: RunConfig, reporter: Reporter | None = None):
        from controller.topology import load_topology
        from testbed.network import new_run_dir
        from testbed.p4switch import check_target

        check_config(cfg)
        check_target(cfg.target)
        self.cfg = cfg
        self.reporter = reporter or Reporter()
        self.topo = shape_links(load_topology(resolve_topology(cfg.topo)), cfg.link_mbps, cfg.loss)
        self.workers = choose_workers(self.topo, cfg)
        self.ps = ps_host(self.topo, self.workers) if cfg.scheme == "ps" else None
        self.scheme = cfg.scheme  # what runs: innet becomes hostagg when the job gets no switch capacity
        self.admission: Any = None  # controller.tenants.Admission, for scheme innet
        self.placements: list = []
        if cfg.scheme == "innet":
            self._admit()
        self.aggregators = self._pick_aggregators() if self.scheme == "hostagg" else []
        self.run_dir = Path(new_run_dir(cfg.out))
        self.logs = self.run_dir / "logs"
        self.processes: list[HostProcess] = []
        self.job_ids: list[int] = []

    def _admit(self) -> None:
        """Place the job within the switches' slot budgets; none left -> downgrade to hostagg."""
        from controller.placement import Job
        from controller.tenants import IN_NETWORK, admit

        job = Job(JOB_NAME, tuple(self.workers), k=self.cfg.k, slots=self.cfg.slots)
        tenancy = admit(self.topo, [job], self.cfg.algo, seed=self.cfg.seed)
        self.admission = tenancy.admission(JOB_NAME)
        if self.admission.status == IN_NETWORK:
            self.placements = tenancy.in_network()
        elif self.cfg.workload == "train":
            self.scheme = "hostagg"
        else:
            raise RunError(f"--slots {self.cfg.slots}: no in-network capacity ({tenancy.placements[0].fallback}), "
                           "and the all-reduce benchmark has no host aggregation to fall back to")

    def _pick_aggregators(self) -> list[str]:
        """Aggregator and replica hosts, idlest first (hosts.straggler.pick_aggregators)."""
        from hosts.straggler import Straggler, pick_aggregators

        stragglers = {name: Straggler(delay) for name, delay in self.cfg.stragglers}
        return pick_aggregators(list(self.topo.hosts), self.workers, stragglers, 2)

    def run(self) -> dict:
        from controller.installer import connect_all
        from controller.monitor import queue_stats
        from testbed import report
        from testbed.network import BMV2_LIMITS, Testbed

        if self.admission is not None and self.scheme == "hostagg":
            self.reporter.status(f"{self.admission.message}; aggregator on {self.aggregators[0]}, "
                                 f"replica on {self.aggregators[1]}")
        self.reporter.status(f"network {self.topo.name} up in {self.run_dir}")
        if self.cfg.target == "bmv2":
            self.reporter.status(BMV2_LIMITS)
        started = time.time()
        error: Exception | None = None
        with Testbed(self.topo, self.cfg.target, str(self.run_dir)) as tb:
            conns = connect_all(self.topo, side_channel_ports={s: tb.side_channel_port(s) for s in self.topo.switches},
                                target=self.cfg.target)
            try:
                specs, placement = self._install(conns)
                if self.cfg.target == "bmv2":
                    tb.apply_link_queues()  # BMv2's CLI needs the pushed program (testbed.network)
                config_path = self._write_agent_config(specs)
                if JOB_NAME in specs:  # in-network: the workers talk to the aggregation address
                    prepare_worker_hosts(tb, self.workers, specs[JOB_NAME].agg_ip)
                try:
                    self._start_processes(tb, config_path)
                    self._wait(tb)
                except RunFailed as exc:
                    error = exc
                finally:
                    for proc in self.processes:
                        proc.stop()
                    self.reporter.finished()
                counters = report.collect_counters(self.topo, conns, self.job_ids)
                # BMv2 has no queue statistics to read (only the embedded traffic manager keeps them).
                queues = {s: queue_stats(conn) for s, conn in conns.items()} if self.cfg.target == "embedded" else {}
            finally:
                for conn in conns.values():
                    conn.close()
        results = self._results(counters, queues, placement, time.time() - started, error)
        if self._complete():
            report.write_results(self.run_dir, results, self.cfg.workload)
        if error is not None:
            raise error
        return results

    # -- phases

    def _install(self, conns: dict) -> tuple[dict, Any]:
        """Pipeline + routes everywhere, and the job's tree when it aggregates in-network."""
        from controller.installer import Installer, load_program

        placements = self.placements if self.scheme == "innet" else []
        self.reporter.status(f"pushing {program_name(self.cfg.lanes)}, routes"
                             + (" and the aggregation tree" if placements else ""))
        program = load_program(program_path(self.cfg.lanes), self.cfg.target, str(self.run_dir / "build"))
        installer = Installer(self.topo, program, conns, timeout_s=self.cfg.min_rto_s)
        specs, _ = installer.install(placements)
        specs = {name: dataclasses.replace(spec, pacing=self.cfg.pacing) for name, spec in specs.items()}
        self.job_ids = [plan.job_id for plan in installer.plans.values()]
        placement = placements[0].placement.to_json() if placements else None
        if placement is not None:
            placement["promoted"] = list(installer.plans[JOB_NAME].promoted)
        return specs, placement

    def _write_agent_config(self, specs: dict) -> Path:
        from hosts.agent_config import AGG_PORT_TCP, PS_PORT, REPLICA_PORT, RING_PORT, AgentConfig, TrainConfig
        from hosts.comm import Endpoint
        from hosts.straggler import Straggler

        cfg = self.cfg
        train = TrainConfig(model=cfg.model, dataset=cfg.dataset, steps=cfg.steps, seed=cfg.seed,
                            batch_size=cfg.batch_size, lr=cfg.lr, eval_every=cfg.eval_every)
        workers = tuple(Endpoint(h, self.topo.hosts[h].ip, RING_PORT) for h in self.workers)
        ps = Endpoint(self.ps, self.topo.hosts[self.ps].ip, PS_PORT) if self.ps else None
        ends = [Endpoint(h, self.topo.hosts[h].ip, port) for h, port in zip(self.aggregators, (AGG_PORT_TCP, REPLICA_PORT))]
        aggregator, replica = (ends + [None, None])[:2]
        config = AgentConfig(self.scheme, train, workers, ps, specs.get(JOB_NAME), cfg.comm_timeout_s,
                             aggregator=aggregator, replica=replica, staleness=cfg.staleness,
                             stragglers={name: Straggler(delay) for name, delay in cfg.stragglers})
        path = self.run_dir / "agent.json"
        path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        return path

    def _start_processes(self, tb: Any, config: Path) -> None:
        cfg = self.cfg
        self.reporter.status(f"starting {len(self.workers)} workers ({self.scheme}, {cfg.workload})"
                             + (f" and the parameter server on {self.ps}" if self.ps else "")
                             + (f" and the host aggregator on {self.aggregators[0]}, its replica on "
                                f"{self.aggregators[1]}" if self.aggregators else ""))
        if self.ps:
            self.processes.append(start_process(tb, self.ps, "ps", ["-m", "hosts.ps", "--config", str(config),
                                                                     "--out", str(self.logs)], self.logs))
        self.processes += start_host_aggregators(tb, self.aggregators, config, self.logs)
        for h in self.workers:
            if cfg.workload == "train":
                argv = ["-m", "hosts.agent", "--config", str(config), "--worker", h, "--out", str(self.logs)]
            else:
                argv = ["-m", "hosts.allreduce_bench", "--config", str(config), "--worker", h, "--elements",
                        str(cfg.elements), "--seed", str(cfg.seed), "--dtype", cfg.dtype, "--out", str(self.logs)]
            self.processes.append(start_process(tb, h, h, argv, self.logs))

    def _wait(self, tb: Any) -> None:
        """Until every host process exited 0; RunFailed naming the first process or switch that failed."""
        deadline = time.monotonic() + self.cfg.timeout_s
        metrics = self.logs / f"{self.workers[0]}.metrics.jsonl"
        seen = 0
        while True:
            if self.cfg.workload == "train":
                records = read_jsonl(metrics)
                for record in records[seen:]:
                    self.reporter.training_step(record, self.cfg.steps)
                seen = max(seen, len(records))
            failed = [f for f in (p.failure() for p in self.processes) if f]
            if failed:
                raise RunFailed(f"run failed: {failed[0]} (logs in {self.logs})")
            dead = tb.dead_switches()
            if dead:
                raise RunFailed(f"run failed: switch {dead[0]}")
            if all(p.popen.poll() == 0 for p in self.processes):
                return
            if time.monotonic() > deadline:
                running = [p.name for p in self.processes if p.popen.poll() is None]
                raise RunFailed(f"run failed: still running after {self.cfg.timeout_s:g} s: {', '.join(running)} "
                                f"(logs in {self.logs})")
            time.sleep(POLL_S)

    # -- results

    def _result_file(self, worker: str) -> Path:
        suffix = ".result.json" if self.cfg.workload == "train" else ".bench.json"
        return self.logs / f"{worker}{suffix}"

    def _complete(self) -> bool:
        """Every worker wrote its result (a benchmark worker writes one also when its sum is wrong)."""
        return all(self._result_file(h).exists() for h in self.workers)

    def _results(self, counters: dict, queues: dict, placement: Any, seconds: float,
                 error: Exception | None) -> dict:
        from testbed import report

        cfg = self.cfg
        config = dataclasses.asdict(cfg)
        config.update(topo=self.topo.source, worker_hosts=self.workers, ps_host=self.ps)
        results: dict[str, Any] = {
            "config": config, "seeds": {"model": cfg.seed, "data": cfg.seed, "vectors": cfg.seed},
            "run_dir": str(self.run_dir), "workers": len(self.workers), "placement": placement,
            "wall_time_s": seconds, "versions": report.versions(cfg.target), "counters": counters,
            "queues": queues, "link_bytes": report.link_bytes(self.topo, counters), "scheme": self.scheme,
            "admission": self.admission.to_json() if self.admission is not None else None,
        }
        if self.aggregators:
            results.update(aggregators=self.aggregators, staleness_bound=cfg.staleness,
                           aggregation=read_aggregation_stats(self.logs))
        if error is not None:
            results["error"] = str(error)
        if cfg.workload == "train":
            results.update(self._train_results())
        else:
            results.update(self._bench_results())
        return results

    def _train_results(self) -> dict:
        per_worker = self._per_worker()
        first = per_worker.get(self.workers[0], {})
        steps = [r["step_time_s"] for r in read_jsonl(self.logs / f"{self.workers[0]}.metrics.jsonl")]
        return {"final_accuracy": first.get("final_accuracy"), "final_loss": first.get("final_loss"),
                "steps": len(steps), "step_time_s": statistics.median(steps) if steps else None,
                "per_worker": per_worker}

    def _per_worker(self) -> dict[str, dict]:
        return {h: json.loads(self._result_file(h).read_text()) for h in self.workers if self._result_file(h).exists()}

    def _bench_results(self) -> dict:
        reports = self._per_worker()
        complete = len(reports) == len(self.workers)
        seconds = max((r["seconds"] for r in reports.values()), default=None)
        return {"elements": self.cfg.elements, "dtype": self.cfg.dtype,
                "allreduce_exact": complete and all(r["exact"] for r in reports.values()),
                "allreduce_correct": complete and all(r["correct"] for r in reports.values()),
                "max_abs_error": max((r["max_abs_error"] for r in reports.values()), default=None),
                "seconds": seconds,
                "goodput_elements_per_s": self.cfg.elements / seconds if seconds else None,
                "per_worker": reports}


def run_experiment(cfg: RunConfig, reporter: Reporter | None = None) -> dict:
    """Check `cfg`, run it, return the results (RunError for bad input, RunFailed if it broke)."""
    return Experiment(cfg, reporter).run()
