"""What one run is: small composed config dataclasses, read by config.fields from the command line
(`aggnet run`, `aggnet faults`, `aggnet compare`) and from scenario files alike.

    RunConfig(network=NetworkConfig(topo="tree2"), job=JobConfig(k=2), train=TrainConfig(steps=50))

- NetworkConfig: the topology and what the testbed does to it (target, link rate, loss, lanes);
- JobConfig: the aggregation job (workers, scheme, placement, slots, pacing, timeouts of the client);
- WorkloadConfig: training, the all-reduce benchmark (elements, dtype), or a real model's DDP
  iterations (model:NAME: profile, buckets, gradient scale; hosts.models);
- TrainConfig (hosts.agent_config): what every worker trains, and the run's seed;
- FaultConfig: faults to inject and how the controller watches for them.
Each checks itself (`__post_init__`), so a bad value is refused however the config was made; the
checks that need the topology (which hosts exist) are in testbed.run.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from config import FieldProblem, option
from hosts.agent_config import SCHEMES, TrainConfig
from hosts.models import MODEL_NAMES
from hosts.pacing import PACING_CHOICES
from protocol.job import MAX_TIMEOUT_S
from protocol.wire import DEFAULT_ECN_FRACTION, DEFAULT_LANES, LANE_COUNTS, program_name
from testbed.timescale import AUTO, parse_scale

MACHINE_MIN_RTO_S = 0.2  # the default smallest retransmission timeout, this machine's time (JobConfig.min_rto_s)

TARGETS = ("embedded", "bmv2")
WORKLOADS = ("train", "allreduce", *(f"model:{m}" for m in MODEL_NAMES))
DTYPES = ("int32", "float32")


@dataclass(frozen=True)
class NetworkConfig:
    topo: str = option("star4", help="topology file, or a name under topologies/")
    target: str = option("embedded", choices=TARGETS, help="P4 target")
    link_mbps: float | None = option(None, minimum=1e-3, help="shape every link to this many Mbit/s")
    loss: float | None = option(None, minimum=0, help="drop this percentage of packets at every switch port")
    ecn_fraction: float = option(DEFAULT_ECN_FRACTION, minimum=0, maximum=1,
                                 help="switch ports mark aggregation packets once this fraction of their queue "
                                      "is full, and workers back off as for a loss (0: never)")
    lanes: int = option(DEFAULT_LANES, choices=LANE_COUNTS, help="values per aggregation packet (" + ", ".join(
        f"{program_name(n)}: {n}" for n in LANE_COUNTS) + ")")
    servers: tuple[str, ...] = option((), help="place the nodes over these servers, reached as root over ssh "
                                               "(SRV1,SRV2,...; localhost or this machine's name: here), "
                                               "Mininet's cluster edition (docs/cluster.md)")
    placement: dict[str, str] = option(default_factory=dict, repeat=True,
                                       help="NODE=SERVER: put NODE there (default: switches in even bins over "
                                            "--servers in topology order, each host with its switch)")
    ssh_config: str | None = option(None, help="ssh_config file for reaching --servers (ssh -F)")
    tls: str | None = option(None, help="DIR: make a throwaway CA and certificates there; every switch serves "
                                        "P4Runtime over mutual TLS and the controller connects with them")

    def __post_init__(self) -> None:
        if self.loss is not None and self.loss >= 100:
            raise FieldProblem("loss", f"a percentage in [0, 100), got {self.loss}")
        if self.placement and not self.servers:
            raise FieldProblem("placement", "places nodes on --servers, and none are given")
        for node, server in self.placement.items():
            if server not in self.servers:
                raise FieldProblem("placement", f"{node}={server}: {server} is not one of --servers "
                                                f"({', '.join(self.servers)})")
        if self.servers and self.target != "embedded":
            raise FieldProblem("servers", f"runs the embedded target on several servers, not {self.target}")
        if self.servers and self.tls:
            raise FieldProblem("tls", "not with --servers yet (the switches there would need the certificates)")


@dataclass(frozen=True)
class JobConfig:
    workers: int | None = option(None, minimum=2, help="use the first N hosts as workers (default: all)")
    worker_hosts: tuple[str, ...] = option((), help="these hosts as workers, in rank order (H1,H2,...)")
    scheme: str = option("innet", choices=SCHEMES, help="innet (host aggregation when the switches have no slots "
                                                        "for it), ps, ring, hostagg, or split (the switches sum "
                                                        "the on-time workers, a host the stragglers' late gradients)")
    algo: str = option("soar", help="placement algorithm")
    k: int = option(1, minimum=0, help="aggregating switches besides the root")
    slots: int = option(64, minimum=1, help="the job's slot window on each aggregating switch")
    # The all-reduce client's retransmission timeouts (JobSpec.timeout_s, max_timeout_s), in the cluster's time
    # (x F in real time). Unset, they are MACHINE_MIN_RTO_S and MAX_TIMEOUT_S of this machine's time at any
    # --scale: the floor guards against this machine's scheduling jitter (many switch processes on few cores;
    # fattree4 at 0.05 s: up to 6% of a link's packets were resends, at 0.2 s none), which time scaling does not
    # slow. Multiplied by F the floor cost every lost chunk 0.2 s of the cluster's time: fat-tree k=4 at F 6 took
    # 1.14x its link-bound time with one timeout and 1.43x with two.
    min_rto_s: float | None = option(None, minimum=1e-6, flag="--min-rto", timer=True,
                                     help="smallest retransmission timeout (s, the cluster's; default: 0.2 s of this "
                                          "machine's time at any --scale)")
    max_rto_s: float | None = option(None, minimum=1e-6, flag="--max-rto", timer=True,
                                     help="largest retransmission timeout, backed off or not (s, the cluster's; at "
                                          "least --min-rto; default: 1 s of this machine's time)")
    agg_wait_s: float = option(0.05, minimum=0, cli=False, timer=True)  # host aggregation's wait (hosts.host_agg)
    # AIMD by default: where unaggregated streams meet (fattree4, 16 workers) a fixed window flooded the
    # queues (2,035 drops, 6.4 s for a 1.3 s all-reduce); AIMD backs off there and costs nothing elsewhere.
    pacing: str = option("aimd", choices=PACING_CHOICES,
                         help="pace the slot window with AIMD from the results (aimd) or keep it all in flight (fixed)")
    staleness: int = option(0, minimum=0, help="host aggregation: sum a gradient up to S rounds late")
    stragglers: dict[str, float] = option(default_factory=dict, flag="--straggler", repeat=True, minimum=0,
                                          help="HOST=DELAY_S: the worker computes DELAY_S longer every step")
    straggle_s: tuple[float, ...] = option((), flag="--straggle", minimum=0,
                                           help="START,END: the stragglers are slow only from START to END seconds "
                                                "after the end of their first step (default: all the time)")
    replica: bool = option(True, help="host aggregation: run a replica of the aggregator")

    def __post_init__(self) -> None:
        if self.workers is not None and self.worker_hosts and self.workers != len(self.worker_hosts):
            raise FieldProblem("workers", f"{self.workers} disagrees with the {len(self.worker_hosts)} worker hosts")
        if len(set(self.worker_hosts)) != len(self.worker_hosts):
            raise FieldProblem("worker_hosts", "a host is listed twice")
        if self.staleness and self.scheme not in ("hostagg", "innet", "split"):
            raise FieldProblem("staleness", f"only host and split aggregation bound staleness (scheme hostagg or "
                                            f"split, or innet when downgraded), not scheme {self.scheme}")
        if self.scheme == "split" and not self.stragglers:
            raise FieldProblem("stragglers", "scheme split needs --straggler HOST=DELAY_S: the workers whose "
                                             "seat in the tree the host aggregator takes")
        if self.straggle_s and (len(self.straggle_s) != 2 or self.straggle_s[1] <= self.straggle_s[0]):
            raise FieldProblem("straggle_s", f"give START,END with END > START, got {','.join(map(str, self.straggle_s))}")

    def rto_bounds(self) -> tuple[float, float]:
        """The smallest and largest retransmission timeout, the unset ones this machine's (read them from the
        config as this machine runs it: testbed.timescale.real_config)."""
        low = self.min_rto_s if self.min_rto_s is not None else MACHINE_MIN_RTO_S
        return low, max(low, self.max_rto_s if self.max_rto_s is not None else MAX_TIMEOUT_S)


@dataclass(frozen=True)
class WorkloadConfig:
    workload: str = option("train", choices=WORKLOADS, help="train a model, all-reduce random vectors, or play "
                                                               "DDP iterations of a real model (model:NAME)")
    elements: int = option(100_000, minimum=1, help="all-reduce: elements per worker")
    dtype: str = option("int32", choices=DTYPES, help="all-reduce: vector type (float32 is quantized in-network)")
    profile: str | None = option(None, help="model: the compute profile, a shipped name (a100, h100 or v100 where "
                                            "shipped: a published GPU figure; cpu: this machine) or a JSON file "
                                            "(`aggnet profile`); default: the model's GPU profile, A100 where shipped")
    batch: int | None = option(None, minimum=1, help="model: samples a worker computes an iteration (default: the "
                                                     "profile's); compute time scales with it")
    bucket_mb: float | None = option(None, minimum=1e-3, help="model: DDP's bucket cap in MiB (default 25, the "
                                                              "first bucket 1 MiB, as DDP)")
    iterations: int = option(3, minimum=1, help="model: DDP iterations")
    grad_scale: float = option(1.0, minimum=1e-9, maximum=1.0,
                               help="model: send this fraction of every bucket; links then emulate "
                                    "link rate / fraction (reported)")

    def __post_init__(self) -> None:
        from hosts.models.profile import ProfileError, check_name

        if self.kind == "model" and self.profile is not None:
            try:
                check_name(self.model, self.profile)
            except ProfileError as exc:
                raise FieldProblem("profile", str(exc)) from None

    @property
    def kind(self) -> str:
        """train, allreduce or model."""
        return self.workload.split(":")[0]

    @property
    def model(self) -> str:
        """The model of a model:NAME workload."""
        return self.workload.partition(":")[2]

    @property
    def profile_name(self) -> str:
        """The model's compute profile: as given, else its GPU profile (hosts.models.profile.resolve)."""
        from hosts.models.profile import resolve

        return resolve(self.model, self.profile)


FAULT_KINDS = ("kill_switch", "link_down", "slow_worker", "kill_aggregator")
_FAULT_RE = re.compile(r"^(?P<kind>[a-z_]+):(?P<target>[A-Za-z0-9-]+)@(?P<step>\d+)(=(?P<value>[0-9.]+))?$")


@dataclass(frozen=True)
class Fault:
    """KIND:TARGET@STEP[=VALUE], injected once rank 0 has finished STEP (testbed.faults)."""

    kind: str
    target: str  # a switch, "a-b" for a link, or a host
    at_step: int
    value: float | None = None  # slow_worker: the CPU share left (0 < share < 1)

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}@{self.at_step}" + (f"={self.value:g}" if self.value is not None else "")


def parse_fault(text: str) -> Fault:
    """`kill_switch:s1@10` -> Fault (testbed.faults.check_fault checks it against the topology)."""
    m = _FAULT_RE.match(text.strip())
    if not m or m["kind"] not in FAULT_KINDS:
        raise ValueError(f"{text!r}: expected KIND:TARGET@STEP with KIND one of {', '.join(FAULT_KINDS)} "
                         "(e.g. kill_switch:s1@10, link_down:s3-s1@10, slow_worker:h2@5=0.3, kill_aggregator:h4@10)")
    value = float(m["value"]) if m["value"] else None
    if m["kind"] == "slow_worker" and not (value is not None and 0 < value < 1):
        raise ValueError(f"{text!r}: slow_worker needs =SHARE, the CPU share left, between 0 and 1")
    return Fault(m["kind"], m["target"], int(m["step"]), value)


@dataclass(frozen=True)
class FaultConfig:
    faults: tuple[Fault, ...] = option((), flag="--fault", repeat=True, parse=parse_fault,
                           help="KIND:TARGET@STEP[=SHARE]: kill_switch:s1@10, link_down:s3-s1@10, "
                                "slow_worker:h2@5=0.3, kill_aggregator:h4@8")
    detect_interval_s: float = option(0.1, minimum=1e-3, cli=False, timer=True)
    detect_timeout_s: float = option(10.0, minimum=0.1, cli=False, timer=True)


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs; the defaults are `aggnet run`'s."""

    network: NetworkConfig = NetworkConfig()
    job: JobConfig = JobConfig()
    workload: WorkloadConfig = WorkloadConfig()
    train: TrainConfig = TrainConfig()
    faults: FaultConfig = FaultConfig()
    timeout_s: float = option(900.0, minimum=1e-3, flag="--timeout",
                              help="give up after this many seconds (of this machine's time, also with --scale)")
    comm_timeout_s: float = option(30.0, minimum=1e-3, flag="--comm-timeout", timer=True,
                                   help="a host process gives up when its peers are silent this long")
    scale: float = option(1.0, parse=parse_scale, help="emulate a cluster F times faster: link rates / F, compute, "
                                                        "link delays and protocol timers x F; results in the cluster's "
                                                        "time (testbed.timescale); auto: the smallest F at which this "
                                                        "machine's cores let the links bind (testbed.autoscale)")
    out: str = option("runs", help="runs go to OUT/<timestamp>/")

    def __post_init__(self) -> None:
        if self.scale != AUTO and self.scale < 1:
            raise FieldProblem("scale", f"a factor >= 1, or auto, got {self.scale:g}")
        if self.workload.workload == "allreduce" and self.job.scheme in ("hostagg", "split"):
            raise FieldProblem("job.scheme", f"the all-reduce benchmark runs innet, ps and ring ({self.job.scheme} "
                                             "is for training)")
        if self.faults.faults and self.workload.workload != "train":
            raise FieldProblem("faults.faults", "faults are injected into training runs")


def resolve_topology(name_or_path: str, repo: str) -> str | None:
    """A topology file path: the path itself, or a name/file under the repository's topologies/; None if none."""
    if os.path.isfile(name_or_path):
        return name_or_path
    for candidate in (os.path.join(repo, "topologies", name_or_path),
                      os.path.join(repo, "topologies", f"{name_or_path}.yaml")):
        if os.path.isfile(candidate):
            return candidate
    return None
