"""The agent config: one JSON file per job, read by every worker agent and the PS host.

    {
      "scheme": "ring",                     # innet | ps | ring
      "train": {"model": "mlp", "dataset": "digits", "steps": 200, "seed": 0, ...},
      "workers": [{"name": "h1", "ip": "10.0.0.1", "port": 47000}, ...],   # rank order
      "ps": {"name": "h5", "ip": "10.0.0.5", "port": 47100},              # scheme ps
      "job": { ...protocol.job.JobSpec... },                                  # scheme innet
      "aggregator": {"name": "h5", "ip": "10.0.0.5", "port": 47200},      # scheme hostagg
      "replica": {"name": "h6", "ip": "10.0.0.6", "port": 47300},         # optional (hostagg)
      "staleness": 0, "wait_s": 0.05,                                      # hostagg, split bound (hosts.host_agg)
      "split_workers": ["h2"],      # scheme split: they send to the aggregator, which sits in their seat
      "lead_rounds": 5, "iteration_rounds": 3,  # a model job's rounds: barriers and warm-up, then per iteration
      "stragglers": {"h2": {"delay_s": 0.2}},                              # any scheme (hosts.straggler)
      "timeout_s": 30,
      "time_scale": 1                     # compute takes this many times as long (testbed.timescale)
    }

`workers[].port` is the TCP port of the ring baseline (default RING_PORT). For innet the
job spec's workers must be the same names in the same order; for split they are the tree's
members: the workers without the split ones, and the aggregator in the first split worker's
place (hosts.split_agg). Kept free of torch so the PS process starts fast.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import ConfigError, load, option
from protocol.job import JobSpec, JobSpecError

from .comm import Endpoint
from .straggler import Straggler, StragglerError, parse_stragglers

SCHEMES = ("innet", "ps", "ring", "hostagg", "split")
MODEL_NAMES = ("mlp", "cnn")  # hosts.model builds them
DATASET_NAMES = ("digits", "synthetic")  # hosts.data loads them
RING_PORT = 47000
PS_PORT = 47100
AGG_PORT_TCP = 47200
REPLICA_PORT = 47300


@dataclass(frozen=True)
class TrainConfig:
    """What every worker trains, identically. batch_size is per worker; seed seeds model, data and the run."""

    model: str = option("mlp", choices=MODEL_NAMES, help="model every worker trains")
    dataset: str = option("digits", choices=DATASET_NAMES, help="dataset (shipped offline)")
    hidden: int = option(64, minimum=1, help="hidden units of the MLP")
    batch_size: int = option(32, minimum=1, help="per-worker batch size")
    lr: float = option(0.1, minimum=1e-12, help="learning rate")
    momentum: float = option(0.9, minimum=0, help="SGD momentum")
    steps: int = option(200, minimum=1, help="training steps")
    seed: int = option(0, help="seed of model, data and vectors")
    eval_every: int = option(50, minimum=0, help="evaluate on the test split every N steps (and after the last)")

    @classmethod
    def from_dict(cls, data: Any, source: str, where: str = "train") -> TrainConfig:
        """Read a `train` mapping; unknown fields and bad values are one-line ConfigErrors."""
        return load(cls, data, source, where)


@dataclass(frozen=True)
class AgentConfig:
    scheme: str
    train: TrainConfig
    workers: tuple[Endpoint, ...]
    ps: Endpoint | None = None
    job: JobSpec | None = None
    timeout_s: float = 30.0
    aggregator: Endpoint | None = None
    replica: Endpoint | None = None
    staleness: int = 0
    wait_s: float = 0.05
    stragglers: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> hosts.straggler.Straggler
    time_scale: float = 1.0  # every worker's compute is slowed this many times (testbed.timescale)
    split_workers: tuple[str, ...] = ()  # scheme split: the workers the aggregator stands for in the tree
    lead_rounds: int = 0  # hostagg, split: rounds before the iterations (a model's barriers and warm-up pass)
    iteration_rounds: int = 1  # hostagg, split: rounds an iteration (a model's buckets; hosts.host_agg.RoundBook)

    def rank_of(self, name: str, source: str = "<agent config>") -> int:
        for rank, worker in enumerate(self.workers):
            if worker.name == name:
                return rank
        raise ConfigError(f"{source}: field 'workers': no worker named {name!r} "
                          f"(have {', '.join(w.name for w in self.workers)})")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form load_config() reads back."""
        data: dict[str, Any] = {"scheme": self.scheme, "train": dataclasses.asdict(self.train),
                                "workers": [_endpoint_dict(w) for w in self.workers], "timeout_s": self.timeout_s}
        if self.ps:
            data["ps"] = _endpoint_dict(self.ps)
        if self.job:
            data["job"] = self.job.to_dict()
        for name in ("aggregator", "replica"):
            if getattr(self, name):
                data[name] = _endpoint_dict(getattr(self, name))
        if self.scheme in ("hostagg", "split"):
            data.update(staleness=self.staleness, wait_s=self.wait_s)
        if self.split_workers:
            data["split_workers"] = list(self.split_workers)
        if (self.lead_rounds, self.iteration_rounds) != (0, 1):
            data.update(lead_rounds=self.lead_rounds, iteration_rounds=self.iteration_rounds)
        if self.stragglers:
            data["stragglers"] = {w: s.to_dict() for w, s in self.stragglers.items()}
        if self.time_scale != 1:
            data["time_scale"] = self.time_scale
        return data

    def compute_pause(self, worker: str) -> Straggler | None:
        """What slows `worker`'s compute: its straggler entry, slowed by the time scale; None when nothing does."""
        straggler = self.stragglers.get(worker)
        if self.time_scale == 1:
            return straggler
        return (straggler or Straggler()).slowed(self.time_scale)


def _endpoint_dict(e: Endpoint) -> dict[str, Any]:
    return {"name": e.name, "ip": e.host, "port": e.port}


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _endpoint(data: Any, source: str, where: str, default_port: int) -> Endpoint:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: field '{where}': expected an object with name, ip, port")
    name, ip, port = data.get("name"), data.get("ip"), data.get("port", default_port)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: field '{where}.name': expected a non-empty string")
    if not isinstance(ip, str) or not _is_ipv4(ip):
        raise ConfigError(f"{source}: field '{where}.ip': {ip!r} is not an IPv4 address")
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ConfigError(f"{source}: field '{where}.port': {port!r} is not a port number")
    return Endpoint(name, ip, port)


def parse_config(data: Any, source: str = "<agent config>") -> AgentConfig:
    """Validate a decoded config; every error names `source` and the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    unknown = set(data) - {"scheme", "train", "workers", "ps", "job", "timeout_s", "aggregator", "replica",
                           "staleness", "wait_s", "stragglers", "time_scale", "split_workers",
                           "lead_rounds", "iteration_rounds"}
    if unknown:
        raise ConfigError(f"{source}: field '{sorted(unknown)[0]}': unknown")
    scheme = data.get("scheme")
    if scheme not in SCHEMES:
        raise ConfigError(f"{source}: field 'scheme': {scheme!r} is not one of {', '.join(SCHEMES)}")
    workers_raw = data.get("workers")
    if not isinstance(workers_raw, list) or not workers_raw:
        raise ConfigError(f"{source}: field 'workers': expected a non-empty list")
    workers = tuple(_endpoint(w, source, f"workers[{i}]", RING_PORT) for i, w in enumerate(workers_raw))
    if len({w.name for w in workers}) != len(workers):
        raise ConfigError(f"{source}: field 'workers': worker names must be unique")
    timeout = data.get("timeout_s", 30.0)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"{source}: field 'timeout_s': expected a positive number")
    ps = _endpoint(data["ps"], source, "ps", PS_PORT) if "ps" in data else None
    if scheme == "ps" and ps is None:
        raise ConfigError(f"{source}: field 'ps': missing (scheme ps needs the server's name and ip)")
    aggregator = _endpoint(data["aggregator"], source, "aggregator", AGG_PORT_TCP) if "aggregator" in data else None
    replica = _endpoint(data["replica"], source, "replica", REPLICA_PORT) if "replica" in data else None
    if scheme in ("hostagg", "split") and aggregator is None:
        raise ConfigError(f"{source}: field 'aggregator': missing (scheme {scheme} needs the aggregator's name and ip)")
    split = _split_workers(data.get("split_workers", []), scheme, [w.name for w in workers], source)
    job = None
    if "job" in data:
        try:
            job = JobSpec.from_dict(data["job"], f"{source}: job")
        except JobSpecError as exc:
            raise ConfigError(str(exc)) from None
        members = tree_members([w.name for w in workers], split, aggregator.name if aggregator else "")
        if [w.name for w in job.workers] != members:
            raise ConfigError(f"{source}: field 'job.workers': names must be {', '.join(members)} in this order"
                              + (" (the workers, the aggregator in the split workers' seat)" if split else ""))
    if scheme in ("innet", "split") and job is None:
        raise ConfigError(f"{source}: field 'job': missing (scheme {scheme} needs the job spec)")
    staleness, wait_s = data.get("staleness", 0), data.get("wait_s", 0.05)
    if not isinstance(staleness, int) or isinstance(staleness, bool) or staleness < 0:
        raise ConfigError(f"{source}: field 'staleness': expected an integer >= 0, got {staleness!r}")
    if not isinstance(wait_s, (int, float)) or isinstance(wait_s, bool) or wait_s < 0:
        raise ConfigError(f"{source}: field 'wait_s': expected a number >= 0, got {wait_s!r}")
    lead, per = data.get("lead_rounds", 0), data.get("iteration_rounds", 1)
    for name, value, least in (("lead_rounds", lead, 0), ("iteration_rounds", per, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ConfigError(f"{source}: field '{name}': expected an integer >= {least}, got {value!r}")
    time_scale = data.get("time_scale", 1.0)
    if not isinstance(time_scale, (int, float)) or isinstance(time_scale, bool) or time_scale < 1:
        raise ConfigError(f"{source}: field 'time_scale': expected a number >= 1, got {time_scale!r}")
    try:
        stragglers = parse_stragglers(data.get("stragglers", {}), [w.name for w in workers], source)
    except StragglerError as exc:
        raise ConfigError(str(exc)) from None
    return AgentConfig(scheme, TrainConfig.from_dict(data.get("train", {}), source), workers, ps, job, float(timeout),
                       aggregator, replica, staleness, float(wait_s), stragglers, float(time_scale), split, lead, per)


def tree_members(workers: list[str], split: tuple[str, ...], aggregator: str) -> list[str]:
    """The job tree's members in rank order: the workers, the aggregator in the first split worker's
    place and the other split workers left out (hosts.split_agg)."""
    if not split:
        return list(workers)
    return [aggregator if w == split[0] else w for w in workers if w == split[0] or w not in split]


def _split_workers(data: Any, scheme: str, workers: list[str], source: str) -> tuple[str, ...]:
    if not isinstance(data, list) or not all(isinstance(w, str) for w in data):
        raise ConfigError(f"{source}: field 'split_workers': expected a list of worker names")
    for name in data:
        if name not in workers:
            raise ConfigError(f"{source}: field 'split_workers': {name!r} is not a worker")
    if len(set(data)) != len(data):
        raise ConfigError(f"{source}: field 'split_workers': a worker is listed twice")
    if (scheme == "split") != bool(data):
        raise ConfigError(f"{source}: field 'split_workers': " + ("scheme split needs at least one"
                                                                   if data else f"only for scheme split, not {scheme}"))
    if len(data) == len(workers):
        raise ConfigError(f"{source}: field 'split_workers': leaves no worker on time in the tree")
    return tuple(data)


def load_config(path: str | Path) -> AgentConfig:
    """Read and validate an agent config file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    return parse_config(data, str(path))
