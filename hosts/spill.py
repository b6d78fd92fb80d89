"""The parameter server of a job that shares its switch's slots, ATP's way: it sums the chunks that spilled.

    python -m hosts spill --config JOB.json --out DIR

A job with a shared pool (JobSpec.pool) hashes its chunks into slots other jobs use too. A
chunk that finds its slot held by another spills: the switch tells every worker of the job,
and each sends its copy of that chunk here (flag ps: plain IPv4 for the switches) instead
(hosts.allreduce). Once every worker's copy is in, the exact sum goes back to each worker
(result | ps; saturated with the overflow flag where it does not fit int32, as a switch does)
and stays for retransmissions. A worker lacking chunk c's result cannot send chunk c + W (its
window), so once some spilled chunk c' completes here every worker is past c' - W: sums and
partial chunks up to there are dropped, which bounds what the server holds.

Runs until SIGTERM (the testbed stops it with the job), then writes NAME-spill.json: chunks
summed, copies received, retransmissions answered, stray datagrams.
"""
from __future__ import annotations

import json
import logging
import select
import signal
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from protocol import wire
from protocol.job import JobSpec

from . import codec
from .agent_config import AgentConfig, ConfigError
from .process import setup_logging

log = logging.getLogger("aggnet.spill")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_HALF = 1 << 31  # seq arithmetic is mod 2^32: "newer" means less than half the circle ahead


@dataclass
class SpillStats:
    chunks: int = 0  # spilled chunks summed and answered
    copies: int = 0  # workers' copies received (duplicates included)
    answered: int = 0  # retransmissions answered from a stored sum
    stray: int = 0  # datagrams of another job, size, or sender, or not a spilled contribution


class SpillServer:
    """Sums the spilled chunks of one job (`job`), received on `sock`; `handle` takes one datagram."""

    def __init__(self, job: JobSpec, sock: socket.socket):
        self.job = job
        self.sock = sock
        self.rank = {(w.ip, w.port): r for r, w in enumerate(job.workers)}
        self.full = (1 << job.world_size) - 1
        self.partial: dict[int, tuple[int, np.ndarray, int]] = {}  # seq -> (ranks in, int64 sum, scale)
        self.sums: dict[int, bytes] = {}  # seq -> the result datagram
        self.stats = SpillStats()
        self._bytes = wire.packet_bytes(job.lanes)

    def handle(self, data: bytes, sender: tuple[str, int]) -> None:
        if len(data) != self._bytes or sender not in self.rank:
            self.stats.stray += 1
            return
        pkt = codec.decode(data, self.job.lanes)[0]
        flags = int(pkt["flags"])
        if (int(pkt["job_id"]) != self.job.job_id or int(pkt["lanes"]) != self.job.lanes
                or flags & (wire.FLAG_PS | wire.FLAG_RESULT) != wire.FLAG_PS):
            self.stats.stray += 1
            return
        self.stats.copies += 1
        seq, rank = int(pkt["seq"]), self.rank[sender]
        if seq in self.sums:
            self.stats.answered += 1
            self._send(self.sums[seq], rank)
            return
        have, total, scale = self.partial.get(seq, (0, np.zeros(self.job.lanes, dtype=np.int64), int(pkt["scale"])))
        if have >> rank & 1:
            return  # a copy already in
        self.partial[seq] = (have | 1 << rank, total + pkt["values"].astype(np.int64), scale)
        if have | 1 << rank == self.full:
            self._complete(seq, pkt)

    def _complete(self, seq: int, pkt: np.void) -> None:
        _, total, scale = self.partial.pop(seq)
        overflow = bool(((total < INT32_MIN) | (total > INT32_MAX)).any())
        flags = wire.FLAG_RESULT | wire.FLAG_PS | (wire.FLAG_OVERFLOW if overflow else 0) | (
            int(pkt["flags"]) & wire.FLAG_POOL)
        result = codec.encode(self.job.job_id, int(pkt["slot"]), seq, flags,
                              np.clip(total, INT32_MIN, INT32_MAX).astype(np.int32)[None, :],
                              workers=self.job.world_size, scale=scale).tobytes()
        self.sums[seq] = result
        self.stats.chunks += 1
        for rank in range(self.job.world_size):
            self._send(result, rank)
        done = (seq - self.job.slot_count) % (1 << 32)  # every worker holds the sums up to here
        for held in (self.sums, self.partial):
            for old in [s for s in held if (done - s) % (1 << 32) < _HALF]:
                del held[old]

    def _send(self, data: bytes, rank: int) -> None:
        w = self.job.workers[rank]
        self.sock.sendto(data, (w.ip, w.port))

    def serve(self, stop: list[bool]) -> SpillStats:
        """Until stop[0] turns true (SIGTERM)."""
        while not stop[0]:
            ready, _, _ = select.select([self.sock], [], [], 0.2)
            if ready:
                data, sender = self.sock.recvfrom(65536)
                self.handle(data, sender)
        return self.stats


def run_spill_server(config: AgentConfig, out_dir: Path, source: str = "<agent config>") -> None:
    """The spill server host process for the job in `config`: OUT/NAME-spill.log and NAME-spill.json."""
    if config.job is None or not config.job.pool or config.ps is None:
        raise ConfigError(f"{source}: field 'job.pool': a spill server serves a job with a shared pool and a "
                          "parameter server ('ps')")
    name = config.ps.name + "-spill"
    setup_logging(out_dir, name)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((config.ps.host, config.job.spill_port))
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    log.info("job %d: summing spilled chunks of %d workers", config.job.job_id, config.job.world_size)
    try:
        stats = SpillServer(config.job, sock).serve(stop)
    finally:
        sock.close()
    (out_dir / f"{name}.json").write_text(json.dumps(asdict(stats), indent=2) + "\n")
    log.info("done: %s", asdict(stats))
