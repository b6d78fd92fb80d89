"""Job spec: what the controller hands every worker of one aggregation job (JSON on the wire).

Nothing about addresses is hard-coded in the client: the workers' addresses, the address
contributions are sent to, the slot window and the lane count all come from here.
"""
from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass
from typing import Any

from .wire import AGG_PORT, BASE_LANES, LANE_COUNTS

MAX_JOBS = 1024  # aggnet.p4 AGG_MAX_JOBS: per-job counters are indexed by job id
PACING_CHOICES = ("fixed", "aimd")  # how a worker paces its window (hosts.pacing)
MAX_TIMEOUT_S = 1.0  # the default largest retransmission timeout (hosts.transfer.RetransmitTimer)


class JobSpecError(ValueError):
    """A malformed job spec; the message names the source and the field."""

    exit_code = 2


@dataclass(frozen=True)
class WorkerSpec:
    """One worker: results for it are rewritten (by its edge switch) to ip:port and mac."""

    name: str
    ip: str
    port: int = AGG_PORT
    mac: str = ""


@dataclass(frozen=True)
class JobSpec:
    """One all-reduce job.

    job_id:     the agg header's job id (switch counters are indexed by it: 0..1023)
    workers:    every worker, in rank order
    slot_base:  start of the job's slot region on the switches (hosts send relative slots)
    slot_count: size of the region = the window of chunks each worker keeps in flight
    lanes:      int32 values per packet (must equal the switches' compiled AGG_LANES)
    timeout_s:  minimum retransmission timeout of a chunk (the client adapts it upwards)
    max_timeout_s: the most it adapts (and backs off) to
    agg_ip:     the IPv4 address contributions are sent to (routed towards the tree)
    agg_port:   the UDP destination port switches recognise (AGG_PORT)
    pacing:     one of PACING_CHOICES: "fixed" (always slot_count chunks in flight) or "aimd" (hosts.pacing)
    weight:     the AIMD increase per round trip: the job's share of a contended link
    pool:       0, or the size of a slot pool at slot_base that the job shares with others (ATP's way,
                docs/protocol.md "Shared slot pool"): chunks are hashed into it, slot_count stays the window
    spill_ip, spill_port: with a pool: the job's parameter server, where a chunk that finds its slot
                taken is summed (hosts.spill)
    """

    job_id: int
    workers: tuple[WorkerSpec, ...]
    slot_base: int
    slot_count: int
    agg_ip: str
    lanes: int = BASE_LANES  # what p4src/aggnet.p4 carries; the installer sets the program's
    timeout_s: float = 0.05
    max_timeout_s: float = MAX_TIMEOUT_S
    agg_port: int = AGG_PORT
    pacing: str = "fixed"
    weight: float = 1.0
    pool: int = 0
    spill_ip: str = ""
    spill_port: int = AGG_PORT

    @property
    def world_size(self) -> int:
        return len(self.workers)

    def rank_of(self, name: str) -> int:
        """The rank of the worker called `name`."""
        for rank, worker in enumerate(self.workers):
            if worker.name == name:
                return rank
        raise JobSpecError(f"job {self.job_id}: no worker named {name!r}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["workers"] = [asdict(w) for w in self.workers]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str = "<job spec>") -> JobSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise JobSpecError(f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<job spec>") -> JobSpec:
        """Build and validate a spec; errors read `SOURCE: field 'workers[1].ip': ...`."""
        v = _Validator(source)
        v.require(isinstance(data, dict), "", "expected an object")
        workers_raw = v.get(data, "workers", list)
        v.require(len(workers_raw) > 0, "workers", "needs at least one worker")
        workers = []
        for i, w in enumerate(workers_raw):
            where = f"workers[{i}]"
            v.require(isinstance(w, dict), where, "expected an object")
            workers.append(WorkerSpec(
                name=v.get(w, "name", str, where),
                ip=v.ipv4(v.get(w, "ip", str, where), f"{where}.ip"),
                port=v.port(v.get(w, "port", int, where, AGG_PORT), f"{where}.port"),
                mac=v.get(w, "mac", str, where, ""),
            ))
        names = [w.name for w in workers]
        v.require(len(set(names)) == len(names), "workers", "worker names must be unique")
        spec = cls(
            job_id=v.ranged(v.get(data, "job_id", int), "job_id", 0, MAX_JOBS - 1),
            workers=tuple(workers),
            slot_base=v.ranged(v.get(data, "slot_base", int), "slot_base", 0, 0xFFFFFFFF),
            slot_count=v.ranged(v.get(data, "slot_count", int), "slot_count", 1, 0xFFFF),
            agg_ip=v.ipv4(v.get(data, "agg_ip", str), "agg_ip"),
            lanes=v.get(data, "lanes", int, default=BASE_LANES),
            timeout_s=float(v.get(data, "timeout_s", (int, float), default=0.05)),
            max_timeout_s=float(v.get(data, "max_timeout_s", (int, float), default=MAX_TIMEOUT_S)),
            agg_port=v.port(v.get(data, "agg_port", int, default=AGG_PORT), "agg_port"),
            pacing=v.get(data, "pacing", str, default="fixed"),
            weight=float(v.get(data, "weight", (int, float), default=1.0)),
            pool=v.ranged(v.get(data, "pool", int, default=0), "pool", 0, 0xFFFF),
            spill_ip=v.get(data, "spill_ip", str, default=""),
            spill_port=v.port(v.get(data, "spill_port", int, default=AGG_PORT), "spill_port"),
        )
        v.require(spec.lanes in LANE_COUNTS, "lanes", f"{spec.lanes} is not one of {LANE_COUNTS}")
        v.require(spec.timeout_s > 0, "timeout_s", "must be positive")
        v.require(spec.max_timeout_s >= spec.timeout_s, "max_timeout_s", "must be at least timeout_s")
        v.require(spec.pacing in PACING_CHOICES, "pacing", f"{spec.pacing!r} is not one of {PACING_CHOICES}")
        v.require(spec.weight > 0, "weight", "must be positive")
        if spec.pool:
            v.ipv4(spec.spill_ip, "spill_ip")
            v.require(spec.slot_count <= spec.pool, "slot_count", f"a window of {spec.slot_count} chunks does not "
                                                                  f"fit the shared pool of {spec.pool} slots")
        return spec


class _Validator:
    """Field checks that raise JobSpecError naming the source and the field."""

    _MISSING = object()

    def __init__(self, source: str):
        self.source = source

    def require(self, ok: bool, where: str, message: str) -> None:
        if not ok:
            field_part = f" field '{where}':" if where else ""
            raise JobSpecError(f"{self.source}:{field_part} {message}")

    def get(self, obj: dict, key: str, types: type | tuple[type, ...], where: str = "", default: Any = _MISSING) -> Any:
        path = f"{where}.{key}" if where else key
        if key not in obj:
            self.require(default is not self._MISSING, path, "missing")
            return default
        value = obj[key]
        type_ok = isinstance(value, types) and not (isinstance(value, bool) and types is not bool)
        names = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        self.require(type_ok, path, f"expected {names}, got {type(value).__name__}")
        return value

    def ranged(self, value: int, path: str, lo: int, hi: int) -> int:
        self.require(lo <= value <= hi, path, f"{value} is outside [{lo}, {hi}]")
        return value

    def port(self, value: int, path: str) -> int:
        return self.ranged(value, path, 1, 65535)

    def ipv4(self, value: str, path: str) -> str:
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            self.require(False, path, f"{value!r} is not an IPv4 address")
        return value
