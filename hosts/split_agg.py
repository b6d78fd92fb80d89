"""Split aggregation: the switches sum the on-time workers, a host aggregator adds the late ones.

A job with stragglers keeps in-network aggregation instead of waiting for them or leaving the
switches. The controller installs the job's tree with the aggregator host in the stragglers'
seat: one member of the tree stands for all of them, so the switches sum the on-time workers
and the aggregator as they sum any workers (aggnet.p4 needs nothing new; testbed.run plans it).
The stragglers send their gradients to the aggregator over TCP on host aggregation's wire
(hosts.host_agg). Each round the aggregator contributes, as a member of the tree, the stragglers'
gradients that came in and are not summed yet (zeros when none), under host aggregation's
rules with the staleness bound S (RoundBook, rounds opening when the previous one ends):

- a straggler that computes on round r's weights is waited for up to `wait_s` after round
  r - 1 ended: one that keeps up has its step r in round r (staleness 0), so a straggler
  that catches up is back in its own rounds at once;
- one that lags (computing on older weights) is not waited for, unless going on would leave
  a gradient it has still to send more than S rounds behind: then the round waits for it. The
  first and the last round wait for everyone;
- a model job's rounds are its buckets, iteration after iteration, and S counts iterations: a
  late bucket joins the same bucket's round of a later iteration (RoundBook).

The switches' sum of round r (the on-time workers' step r and the late gradients) is what every
worker applies: the on-time workers get it from the switches, the stragglers from the aggregator,
with the newest round, so that a straggler pulls the rounds it missed instead of computing
them (hosts.train) and computes its next gradient on the newest weights. The aggregator's
OUT/NAME-agg.agg.json records the staleness it applied (per gradient, `staleness_counts`).

The replica (SplitReplica) stands by on a host of the seat's switch, installed in the tree as
the seat too (the seat's child bit on its port, the job's results to it: JobPlan.standby). The
aggregator copies every round to it twice, acknowledged: before contributing it (the late
gradients and the seat's stream state: its next chunk and agreed fractional bits), and once
complete (the sum). Meanwhile the replica keeps the results the switches send the seat. When the
aggregator dies, the replica takes the seat: the round in flight goes through the tree again
from the copied state, the chunks whose results it saw not sent again (the switch may have
reused their slots since: hosts.allreduce `known`), then it serves the stragglers, which fail
over to it and resend what was not summed (hosts.host_agg), from the next round on.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import select
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

from protocol import wire

from .agent_config import AgentConfig, ConfigError
from .comm import AllReduce, Endpoint, listen
from .host_agg import HostAggregator, Round, RoundBook, decode_round, encode_round, follow_feed, write_stats
from .process import setup_logging

log = logging.getLogger("aggnet.split_agg")
BEFORE, AFTER = b"B", b"A"  # a copied round: before the seat contributes it, and complete
_LENGTH = struct.Struct("!I")


class SplitAggregator(HostAggregator):
    """A host aggregator whose rounds also go through the switches, as the stragglers' seat in the tree."""

    def __init__(self, endpoint: Endpoint, stragglers: list[str], book: RoundBook, member: AllReduce,
                 timeout_s: float = 30.0, replica: Endpoint | None = None, server: socket.socket | None = None):
        super().__init__(endpoint, stragglers, book, timeout_s, replica, server)
        self.member = member

    def complete(self, rnd: Round) -> Round:
        """The late gradients into the tree (copied to the replica first); what comes back is the round
        every worker applies."""
        if self._replica:
            self.replicate(copy_round(BEFORE, self.member, rnd), rnd.index)
        return Round(rnd.index, self.member.allreduce(rnd.total), rnd.included)

    def copy(self, rnd: Round) -> bytes:
        return copy_round(AFTER, self.member, rnd)


def copy_round(kind: bytes, member: Any, rnd: Round) -> bytes:
    """A round for the replica: BEFORE or AFTER, the seat's stream state, the round."""
    client = member.client
    state = json.dumps({"next_chunk": client.next_chunk, "next_scale": client.state_dict()["next_scale"]}).encode()
    return kind + _LENGTH.pack(len(state)) + state + encode_round(rnd)


def read_copy(data: bytes | bytearray) -> tuple[bytes, dict, Round]:
    (length,) = _LENGTH.unpack_from(data, 1)
    state = json.loads(bytes(data[1 + _LENGTH.size:1 + _LENGTH.size + length]))
    return bytes(data[:1]), state, decode_round(data[1 + _LENGTH.size + length:])


class SplitReplica:
    """The split aggregator's standby (module docstring); `serve()` returns (took_over, stats)."""

    def __init__(self, config: AgentConfig):
        from .allreduce import InNetworkAllReduce

        assert config.replica is not None and config.job is not None and config.aggregator is not None
        self.config = config
        self.endpoint = config.replica
        self.book = RoundBook.from_config(config)
        self.context = f"replica {self.endpoint.name}"
        self._server = listen(self.endpoint, backlog=len(config.split_workers) + 1)
        seat = member_rank(config, config.aggregator.name)
        workers = list(config.job.workers)
        workers[seat] = dataclasses.replace(workers[seat], name=self.endpoint.name, ip=self.endpoint.host)
        self.member = InNetworkAllReduce(dataclasses.replace(config.job, workers=tuple(workers)), seat,
                                         stall_timeout_s=config.timeout_s)
        self.seen: dict[int, bytes] = {}  # seq -> a result for the seat, of the round in flight
        self._state: dict[str, Any] = {"next_chunk": 0, "next_scale": {}}  # the seat's stream, last copied
        self._before: Round | None = None  # the round copied before going into the tree, not yet complete
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def _listen(self) -> None:
        """Keep the results the switches send the seat (a thread while standing by)."""
        sock, job = self.member.client.sock, self.member.client.job
        size = wire.packet_bytes(job.lanes)
        while not self._listening.is_set():
            if not select.select([sock], [], [], 0.1)[0]:
                continue
            while True:
                try:
                    data = sock.recv(size + 64)
                except BlockingIOError:
                    break
                head = wire.HEADER_STRUCT.unpack_from(data) if len(data) == size else None
                if head and head[0] == job.job_id and head[3] & (wire.FLAG_RESULT | wire.FLAG_SPILL) == wire.FLAG_RESULT:
                    self.seen[head[2]] = data

    def serve(self) -> tuple[bool, Any]:
        self._thread.start()
        try:
            died = follow_feed(self._server, self.context, self.config.timeout_s, self.book, self._take)
        finally:
            self._listening.set()
            self._thread.join()
        if not died:
            return False, self.book.stats
        return True, self.take_over(self._state, self._before)

    def _take(self, data: bytes | bytearray) -> None:
        """A copied round: the one about to go into the tree (BEFORE), or complete (AFTER)."""
        kind, self._state, rnd = read_copy(data)
        if kind == BEFORE:
            self._before = rnd
            start = int(self._state["next_chunk"])
            self.seen = {s: d for s, d in self.seen.items() if (s - start) % (1 << 32) < 1 << 31}
        else:
            self.book.apply(rnd, time.monotonic())
            self._before = None

    def take_over(self, state: dict, before: Round | None) -> Any:
        """The seat from the copied state: the round in flight again (the results seen kept), then serve."""
        client = self.member.client
        client.next_chunk = state["next_chunk"]
        client.load_state_dict({"next_scale": state["next_scale"]})
        if before is not None:
            client.known = self.seen
            rnd = Round(before.index, self.member.allreduce(before.total), before.included)
            client.known = {}
            self.book.apply(rnd, time.monotonic())
            log.info("round %d completed in the seat (%d of its results seen before)", rnd.index, len(self.seen))
        return SplitAggregator(self.endpoint, list(self.config.split_workers), self.book, self.member,
                               self.config.timeout_s, server=self._server).serve()

    def close(self) -> None:
        self._server.close()
        self.member.close()


def member_rank(config: AgentConfig, name: str) -> int:
    """`name`'s place in the job spec: the tree's members (the on-time workers and the aggregator)."""
    assert config.job is not None, "the config loader requires a job spec for scheme split"
    return [w.name for w in config.job.workers].index(name)


def run_split_aggregator(config: AgentConfig, out_dir: Path, source: str = "<agent config>") -> None:
    """The aggregator of a split job: serve its stragglers, contribute for them in the tree; OUT/NAME-agg.log
    and NAME-agg.agg.json."""
    from .allreduce import InNetworkAllReduce

    if config.aggregator is None or config.job is None:
        raise ConfigError(f"{source}: field 'aggregator': missing (needed to run a split aggregator)")
    name = config.aggregator.name + "-agg"
    setup_logging(out_dir, name)
    member = InNetworkAllReduce(config.job, member_rank(config, config.aggregator.name),
                                stall_timeout_s=config.timeout_s)
    server = SplitAggregator(config.aggregator, list(config.split_workers), RoundBook.from_config(config), member,
                             config.timeout_s, config.replica)
    log.info("seat of %s in job %d's tree, staleness bound %d", ", ".join(config.split_workers), config.job.job_id,
             config.staleness)
    try:
        stats = server.serve()
    finally:
        server.close()
        member.close()
    write_stats(out_dir, name, stats, config.staleness)
    log.info("done after %d rounds", stats.rounds)
