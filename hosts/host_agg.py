"""Host aggregator: a host sums the job's gradients, with bounded staleness for stragglers.

Used when the switches cannot aggregate a job (no slot capacity: placement's fallback) and
when workers straggle: the aggregator runs on an idle host or on the fastest worker
(hosts.straggler.pick_aggregators), and with a staleness bound S > 0 the fast workers stop
waiting for the slow ones (stale-synchronous parallel, as MLfabric's bounded-delay rounds).

Rounds. Every worker applies round 0, 1, 2, ... in order, so all workers hold the same
weights after the same round. A worker at step t sends its gradient g(w, t) (computed on the
weights after rounds < t) and waits for round t. Round r closes when
- every worker has sent step r (the synchronous case, always the rule when S = 0), or
- every worker has sent (or pulled, below) step r - S or later (the laggards' gradients are in
  or will be, at most S late), and the round waited `wait_s` since it opened for the workers that
  compute step r on round r's weights; a worker still computing on older weights is not
  waited for (its gradient is stale whenever it comes). Round r opens when the first step-r
  gradient arrives; in split aggregation (hosts.split_agg) when round r - 1 ends.
The first and the last round wait for everyone: all start together, and no gradient is ever
left out. A round's sum holds every gradient received and not yet summed, added in
(rank, step) order (S = 0 thus sums exactly like the parameter server). A laggard whose
step t is already closed gets round t at once; its gradient joins the next round to close.
Every answer says up to which step the worker's gradients are summed ("committed") and the
newest closed round: a laggard then pulls the rounds it missed instead of computing them
(hosts.train: it catches up with the newest weights, as an asynchronous worker with bounded
delay does in MLfabric), so it sends one gradient per step it really computes. A worker keeps
its uncommitted gradients (at most S + 1 steps' worth) to resend after a failover.

A model job (hosts.models.workload) counts S in iterations, each a round per DDP bucket after the
lead rounds (barriers, warm-up pass) that wait for everyone: in the rules above "step" reads
"iteration", and a late bucket joins the same bucket's round of a later iteration (RoundBook).
The record of which gradients each round holds (`included`) lets every worker's sums be checked
exactly afterwards.

Replication (hosts.replica): each closed round goes to the replica, and is acknowledged by
it, before any worker sees it. When the aggregator dies, workers reconnect to the replica
and resend their unacknowledged gradient; the replica answers from its copy of the rounds
or sums it afresh, so no step is lost and no gradient is summed twice.

Wire (over hosts.comm frames): worker -> aggregator `step(i64) flags(i32) + float32 vector`
(flags RESEND: an uncommitted gradient sent again after a failover, not answered; PULL, `last(i64)`
instead of a vector: "send me closed rounds `step` .. `last`", one answer each); an empty frame is
"bye"; aggregator -> worker
`round(i64) contributions(i32) staleness(i32, iterations) committed(i64) newest(i64) + sum`.
"""
from __future__ import annotations

import json
import logging
import selectors
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .agent_config import AgentConfig, ConfigError
from .comm import WIRE_DTYPE, AllReduce, CommError, Connection, Endpoint, accept, connect, listen
from .process import setup_logging

log = logging.getLogger("aggnet.host_agg")
GRAD = struct.Struct("!qi")
RESULT = struct.Struct("!qiiqq")
LAST = struct.Struct("!q")  # a pull's last round
RESEND, PULL = 1, 2  # GRAD flags
REPLICA_RANK = 1 << 20  # the rank the aggregator's feed connection to its replica introduces itself with


@dataclass
class Round:
    """One closed round: its sum and which (worker rank, step) gradients it holds."""

    index: int
    total: np.ndarray
    included: tuple[tuple[int, int], ...]


@dataclass
class AggStats:
    rounds: int = 0
    contributions: int = 0
    max_staleness: int = 0
    stale_contributions: int = 0  # gradients summed into a later round than their step
    resent: int = 0  # gradients a worker sent again after a failover (answered or summed once)
    pulled: int = 0  # closed rounds a laggard fetched instead of computing their step
    staleness_counts: dict[int, int] = field(default_factory=dict)  # staleness -> gradients summed with it
    included: list[list[list[int]]] = field(default_factory=list)  # per round: its [rank, step] gradients

    def to_dict(self) -> dict:
        return {"rounds": self.rounds, "contributions": self.contributions, "max_staleness": self.max_staleness,
                "stale_contributions": self.stale_contributions, "resent": self.resent, "pulled": self.pulled,
                "staleness_counts": {str(k): v for k, v in sorted(self.staleness_counts.items())},
                "included": self.included}


class RoundBook:
    """The aggregation state machine, free of sockets (what primary and replica share).

    Rounds come in iterations of `per_iteration` rounds after `lead` rounds of their own (a model job:
    two barriers and the warm-up pass lead, then a round per bucket; training: one round a step).
    The staleness bound S counts iterations: a gradient for round (j, b), bucket b of iteration j,
    joins round (i, b) with j <= i <= j + S, the same bucket (so of the same length); the lead rounds,
    and the first and last iteration, wait for everyone. Within an iteration a worker is waited for
    (`wait_s`) only while it may still be on time: computing on the iteration's weights, its previous
    bucket in.
    """

    def __init__(self, world: int, steps: int, staleness: int = 0, wait_s: float = 0.05,
                 in_tree: bool = False, lead: int = 0, per_iteration: int = 1):
        if staleness < 0:
            raise ValueError(f"staleness bound must be >= 0, got {staleness}")
        self.world = world
        self.steps = steps
        self.staleness = staleness
        self.wait_s = wait_s
        self.in_tree = in_tree  # split aggregation: rounds open as the previous one ends, and may hold no gradient
        self.lead = lead
        self.per_iteration = per_iteration
        self.sizes: dict[int, int] = {}  # step -> its gradients' length, until its round closes (a model's
        # buckets differ from step to step)
        self.closed_sizes: dict[int, int] = {}  # the last iteration's closed rounds -> their length
        self.latest = [-1] * world  # newest step each rank sent or pulled (it sends no older one)
        self.computing = [0] * world  # the round whose weights each rank computes its next gradient on
        self.pending: dict[tuple[int, int], np.ndarray] = {}  # (rank, step) -> gradient not yet summed
        self.rounds: dict[int, Round] = {}
        self.summed: set[tuple[int, int]] = set()
        self.committed = [-1] * world  # each rank's gradients are summed up to this step
        self.next_round = 0
        self.opened: float | None = None  # when round `next_round` opened (module docstring)
        self.stats = AggStats()

    @classmethod
    def from_config(cls, config: AgentConfig) -> RoundBook:
        """The round state of the job an agent config describes (aggregator and replica alike): over
        every worker, or in split aggregation over the workers that send to the aggregator."""
        split = config.scheme == "split"
        return cls(len(config.split_workers) if split else len(config.workers), config.train.steps,
                   config.staleness, config.wait_s, in_tree=split, lead=config.lead_rounds,
                   per_iteration=config.iteration_rounds)

    def first_of(self, r: int) -> int:
        """The first round of round r's iteration: a gradient for round r is computed on the weights
        after the round before it (a lead round is an iteration of its own)."""
        return r if r < self.lead else r - (r - self.lead) % self.per_iteration

    def joins(self, step: int, r: int) -> bool:
        """Whether a gradient for round `step` may be summed in round r: its own, or the same bucket of a
        later iteration."""
        return step == r or (min(step, r) >= self.lead and (r - step) % self.per_iteration == 0)

    def lag(self, rnd: Round) -> int:
        """How many iterations late the stalest gradient of `rnd` is."""
        return max((rnd.index - step for _, step in rnd.included), default=0) // self.per_iteration

    def offer(self, rank: int, step: int, grad: np.ndarray, now: float) -> Round | None:
        """A gradient arrived; returns the closed round that answers it (step t < next round), else None."""
        if step > self.next_round:
            raise CommError(f"host aggregator: rank {rank} sent step {step} before round {self.next_round} closed")
        if step >= self.next_round and np.size(grad) != self.sizes.setdefault(step, int(np.size(grad))):
            raise CommError(f"host aggregator: rank {rank} sent {np.size(grad)} values for step {step}, its "
                            f"gradients have {self.sizes[step]}")  # a late one: take() checks it
        if (rank, step) in self.summed or (rank, step) in self.pending:
            self.stats.resent += 1
        else:
            self.pending[(rank, step)] = np.asarray(grad, dtype=np.float32)
            self.latest[rank] = max(self.latest[rank], step)
            if step == self.next_round and self.opened is None and not self.in_tree:
                self.opened = now
        return self.rounds.get(step)

    def pull(self, rank: int, step: int) -> Round:
        """Closed round `step` for a laggard that skips computing it."""
        rnd = self.rounds.get(step)
        if rnd is None:
            raise CommError(f"host aggregator: rank {rank} pulled round {step}, which is "
                            + ("not closed" if step >= self.next_round else "no longer held"))
        self.stats.pulled += 1
        self.latest[rank] = max(self.latest[rank], step)  # it computes its next gradient on newer weights
        return rnd

    def ready(self, now: float) -> bool:
        """Whether round `next_round` may close now (see the module docstring)."""
        r, per = self.next_round, self.per_iteration
        if r >= self.steps:
            return False
        if min(self.latest) >= r:
            return True
        if self.staleness == 0 or r < self.lead + per or r >= self.steps - per \
                or min(self.latest) < r - self.staleness * per:
            return False
        if not (self.in_tree or any(self.joins(step, r) for _, step in self.pending)):
            return False
        if not self.maybe_on_time():
            return True  # every missing gradient is computed on older weights: waiting cannot make it fresh
        return self.opened is not None and now - self.opened >= self.wait_s

    def maybe_on_time(self) -> list[int]:
        """Ranks whose step `next_round` is not in but is being computed on that round's iteration's
        weights, with the iteration's previous bucket in (a rank that missed it is late for the rest)."""
        r = self.next_round
        first = self.first_of(r)
        return [k for k in range(self.world)
                if self.latest[k] < r and first <= self.computing[k] and (r == first or self.latest[k] >= r - 1)]

    def answered(self, rank: int, index: int) -> None:
        """`rank` got round `index`: it computes its next gradient on the weights after it (or pulls on)."""
        self.computing[rank] = max(self.computing[rank], index + 1)

    def take(self) -> Round:
        """The pending gradients that may join round `next_round` (joins) summed in (rank, step) order (zeros
        when none is pending: split aggregation contributes a round even when no laggard's gradient is in)."""
        r = self.next_round
        keys = sorted(key for key in self.pending if self.joins(key[1], r))
        size = self.sizes.get(r, self.closed_sizes.get(r - self.per_iteration))
        odd = [key for key in keys if np.size(self.pending[key]) != size]  # a late gradient of another length
        if odd:
            raise CommError(f"host aggregator: round {r} has {size} values, a late gradient (rank {odd[0][0]}, "
                            f"step {odd[0][1]}) {np.size(self.pending[odd[0]])}: the same bucket of an earlier "
                            "iteration must have its length")
        assert size is not None, "the first round waits for every gradient"
        total = np.zeros(size, dtype=np.float32)
        for key in keys:
            total += self.pending[key]
        return Round(r, total, tuple(keys))

    def close(self, now: float | None = None) -> Round:
        """take() and apply(): the next round, summed and recorded."""
        rnd = self.take()
        self.apply(rnd, now)
        return rnd

    def apply(self, rnd: Round, now: float | None = None) -> None:
        """Record a closed round (ours, or the primary's on a replica); `now` opens the next one when rounds
        open as the previous ends."""
        if rnd.index != self.next_round:
            raise CommError(f"host aggregator: round {rnd.index} arrived, expected round {self.next_round}")
        self.rounds[rnd.index] = rnd
        self.sizes.pop(rnd.index, None)
        self.closed_sizes[rnd.index] = int(np.size(rnd.total))  # also on a replica (rounds, not gradients)
        self.closed_sizes.pop(rnd.index - self.per_iteration, None)
        for rank, step in rnd.included:
            self.summed.add((rank, step))
            self.latest[rank] = max(self.latest[rank], step)
            self.committed[rank] = max(self.committed[rank], step)
            self.pending.pop((rank, step), None)
        self.next_round += 1
        self.opened = now if self.in_tree else None
        for old in [i for i in self.rounds if i < min(self.latest)]:  # nobody can ask for these any more
            del self.rounds[old]
        s = self.stats
        s.rounds += 1
        s.contributions += len(rnd.included)
        s.max_staleness = max(s.max_staleness, self.lag(rnd))
        s.stale_contributions += sum(1 for _, step in rnd.included if step < rnd.index)
        for _, step in rnd.included:
            late = (rnd.index - step) // self.per_iteration
            s.staleness_counts[late] = s.staleness_counts.get(late, 0) + 1
        s.included.append([[rank, step] for rank, step in rnd.included])

    def deadline(self) -> float | None:
        """When ready() may turn true without new input (the wait for laggards ends)."""
        if self.staleness == 0 or self.opened is None or not self.maybe_on_time():
            return None
        return self.opened + self.wait_s


def encode_round(rnd: Round) -> bytes:
    """A round for the replica feed: index, included pairs, sum."""
    head = struct.pack("!qi", rnd.index, len(rnd.included))
    pairs = b"".join(struct.pack("!iq", rank, step) for rank, step in rnd.included)
    return head + pairs + np.ascontiguousarray(rnd.total, dtype=WIRE_DTYPE).tobytes()


def decode_round(data: bytes | bytearray) -> Round:
    index, n = struct.unpack_from("!qi", data)
    pairs = tuple(struct.unpack_from("!iq", data, 12 + 12 * i) for i in range(n))
    total = np.frombuffer(bytes(data[12 + 12 * n:]), dtype=WIRE_DTYPE).astype(np.float32)
    return Round(index, total, pairs)


def follow_feed(server: Any, context: str, timeout_s: float, book: RoundBook, take: Any) -> bool:
    """A replica's standby: accept the aggregator's feed and hand every copied round to `take`, then
    acknowledge it. True when the feed broke (the aggregator died: take over), False after its bye.
    A round whose ack cannot be sent is kept: no worker saw it, and they resend to us what it summed."""
    rank, name, feed = accept(server, context, timeout_s)
    if rank != REPLICA_RANK:
        feed.close()
        raise CommError(f"{context}: {name!r} connected before the aggregator it replicates")
    feed.sock.settimeout(None)  # rounds may be far apart (stragglers); only a closed feed means death
    log.info("aggregator %s feeding", feed.peer)
    try:
        while True:
            try:
                data = feed.recv()
            except CommError as exc:
                return _feed_broke(exc, book)
            if not data:
                log.info("aggregator finished after %d rounds", book.next_round)
                return False
            take(data)
            try:
                feed.send(b"ack")
            except CommError as exc:  # it died before reading the ack: the round is kept all the same
                return _feed_broke(exc, book)
    finally:
        feed.close()


def _feed_broke(exc: CommError, book: RoundBook) -> bool:
    """The aggregator died: say so in the log, and take over (True)."""
    log.warning("%s: taking over at round %d", exc, book.next_round)
    return True


class HostAggregator:
    """The aggregating host process's core: serves the workers until every one said bye.

    replica: where each closed round is copied (and acknowledged) before workers see it.
    """

    def __init__(self, endpoint: Endpoint, workers: list[str], book: RoundBook, timeout_s: float = 30.0,
                 replica: Endpoint | None = None, server=None):
        self.endpoint = endpoint
        self.workers = list(workers)
        self.book = book
        self.timeout_s = timeout_s
        self.context = f"host aggregator {endpoint.name}"
        self._server = server or listen(endpoint, backlog=len(workers) + 1)
        self._replica = connect(replica, endpoint.name, REPLICA_RANK, self.context, timeout_s) if replica else None
        self._conns: dict[int, Connection] = {}
        self._waiting: dict[int, int] = {}  # rank -> step it awaits
        self._done: set[int] = set()

    def serve(self) -> AggStats:
        """Accept workers (also late ones: a failover brings them all at once) and run rounds."""
        sel = selectors.DefaultSelector()
        sel.register(self._server, selectors.EVENT_READ, None)
        last_input = time.monotonic()
        try:
            while len(self._done) < len(self.workers):
                deadline = self.book.deadline()
                wait = self.timeout_s if deadline is None else max(0.0, deadline - time.monotonic())
                if self.book.ready(time.monotonic()):
                    wait = 0.0
                events = sel.select(min(wait, self.timeout_s))
                now = time.monotonic()
                for key, _ in events:
                    last_input = now
                    if key.data is None:
                        self._accept(sel)
                    else:
                        self._receive(sel, key.data, now)
                if self.book.ready(time.monotonic()):  # one round, then what came in meanwhile (pulls wait)
                    rnd = self.complete(self.book.take())
                    self.book.apply(rnd, time.monotonic())
                    self._publish(rnd)
                    last_input = time.monotonic()
                if not events and now - last_input > self.timeout_s:
                    silent = [w for r, w in enumerate(self.workers) if r not in self._done and r not in self._waiting]
                    raise CommError(f"{self.context}: nothing received for {self.timeout_s:g} s in round "
                                    f"{self.book.next_round} (waiting for {', '.join(silent) or 'nobody'})")
            if self._replica:
                self._replica.send(b"")
            return self.book.stats
        finally:
            sel.close()
            for conn in self._conns.values():
                conn.close()

    def copy(self, rnd: Round) -> bytes:
        """What the replica gets of a closed round (split aggregation adds its seat's state)."""
        return encode_round(rnd)

    def replicate(self, data: bytes, index: int) -> None:
        """`data` to the replica, acknowledged."""
        assert self._replica is not None, "replicate only with a replica"
        self._replica.send(data)
        if self._replica.recv() != b"ack":
            raise CommError(f"{self.context}: replica {self._replica.peer} did not acknowledge round {index}")

    def complete(self, rnd: Round) -> Round:
        """The round's sum as the workers get it: here the gradients' own (split aggregation adds the
        switches' sum of the on-time workers, hosts.split_agg)."""
        return rnd

    def close(self) -> None:
        self._server.close()
        if self._replica:
            self._replica.close()

    def _accept(self, sel: selectors.BaseSelector) -> None:
        rank, name, conn = accept(self._server, self.context, self.timeout_s)
        if not 0 <= rank < len(self.workers) or self.workers[rank] != name:
            conn.close()
            raise CommError(f"{self.context}: unexpected peer {name!r} claiming rank {rank} "
                            f"(workers: {', '.join(self.workers)})")
        if rank in self._conns:
            sel.unregister(self._conns[rank].sock)
            self._conns[rank].close()
        self._conns[rank] = conn
        sel.register(conn.sock, selectors.EVENT_READ, rank)
        log.info("worker %s (rank %d) connected", name, rank)

    def _receive(self, sel: selectors.BaseSelector, rank: int, now: float) -> None:
        payload = self._conns[rank].recv()
        if not payload:  # bye: this worker is finished
            self._done.add(rank)
            sel.unregister(self._conns[rank].sock)
            self._conns.pop(rank).close()
            return
        step, flags = GRAD.unpack_from(payload)
        if flags & PULL:  # rounds step .. last, answered together: the aggregator is busy between rounds
            (last,) = LAST.unpack_from(payload, GRAD.size)
            for index in range(step, last + 1):  # ends at the first round not closed (pull raises)
                self._answer(rank, self.book.pull(rank, index))
            return
        grad = np.frombuffer(bytes(payload[GRAD.size:]), dtype=WIRE_DTYPE)
        answered = self.book.offer(rank, step, grad, now)
        if flags & RESEND:
            return
        if answered is not None:
            self._answer(rank, answered)
        else:
            self._waiting[rank] = step

    def _publish(self, rnd: Round) -> None:
        """Replica first (and its ack), then every worker whose gradient this round holds."""
        if self._replica:
            self.replicate(self.copy(rnd), rnd.index)
        log.info("round %d: %d gradients, staleness %d", rnd.index, len(rnd.included), self.book.lag(rnd))
        for rank in [r for r, step in self._waiting.items() if step == rnd.index and r in self._conns]:
            del self._waiting[rank]
            self._answer(rank, rnd)

    def _answer(self, rank: int, rnd: Round) -> None:
        self.book.answered(rank, rnd.index)
        self._conns[rank].send(RESULT.pack(rnd.index, len(rnd.included), self.book.lag(rnd), self.book.committed[rank],
                                           self.book.next_round - 1)
                               + np.ascontiguousarray(rnd.total, dtype=WIRE_DTYPE).tobytes())


class HostAggClient(AllReduce):
    """A worker's side: send (step, gradient), receive round `step`'s sum; fail over in order.

    `servers` lists the aggregator first, then its replicas. When one fails (closed
    connection, silence for timeout_s) the unanswered gradient goes to the next. `seat`: the
    rank the aggregator knows this worker by (default its rank; in split aggregation its place
    among the workers that send to the aggregator).
    """

    def __init__(self, servers: list[Endpoint], name: str, rank: int, world_size: int, timeout_s: float = 30.0,
                 start_step: int = 0, seat: int | None = None):
        if not servers:
            raise CommError(f"host aggregator client {name}: no aggregator endpoint given")
        self.servers = list(servers)
        self.name = name
        self.rank = rank
        self.seat = rank if seat is None else seat
        self.world_size = world_size
        self.timeout_s = timeout_s
        self.step = start_step
        self.newest = start_step - 1  # the newest round the aggregator had closed at its last answer
        self.failovers = 0
        self.skipped = 0  # steps not computed: their round had closed already (closed_rounds)
        self.last_round: tuple[int, int] = (0, 0)  # (contributions, staleness) of the last sum received
        self._uncommitted: list[tuple[int, bytes]] = []  # (step, frame) not yet summed: resent on failover
        self._sent = 0
        self._conn = self._connect()

    @property
    def bytes_sent(self) -> int:
        return self._sent + (self._conn.bytes_sent if self._conn else 0)

    def step_metrics(self) -> dict[str, int]:
        count, staleness = self.last_round
        return {"round_contributions": count, "staleness": staleness}

    def run_metrics(self) -> dict[str, int]:
        return {"failovers": self.failovers, "skipped_steps": self.skipped}

    def _connect(self) -> Connection:
        return connect(self.servers[0], self.name, self.seat, f"host aggregator client {self.name}", self.timeout_s)

    def closed_rounds(self, first: int, count: int) -> list[np.ndarray] | None:
        """Rounds first .. first + count - 1 when all closed already (this worker lags): pulled in one request,
        not computed."""
        if first != self.step:
            raise CommError(f"host aggregator client {self.name}: asked for round {first} at step {self.step}")
        if self.newest < first + count - 1:
            return None
        self.skipped += count
        return self._exchange(None, first + count - 1)

    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        flat = np.ascontiguousarray(vec, dtype=WIRE_DTYPE).reshape(-1)
        body = flat.tobytes()
        self._uncommitted.append((self.step, body))
        return self._exchange(body, self.step)[0].reshape(np.shape(vec))

    def _exchange(self, body: bytes | None, last: int) -> list[np.ndarray]:
        """Send this step's gradient `body` (None: pull the closed rounds up to `last`) and return the sums of
        the rounds up to `last`; on a failover the uncommitted gradients go to the next server first, then the
        request again from the step reached."""
        sums: list[np.ndarray] = []
        send, resend = True, False
        while self.step <= last:
            try:
                if resend:  # a new aggregator: first the gradients it may not have summed
                    for step, older in self._uncommitted:
                        if step != self.step or body is None:
                            self._conn.send(GRAD.pack(step, RESEND) + older)
                if send:
                    self._conn.send(GRAD.pack(self.step, 0) + body if body is not None
                                    else GRAD.pack(self.step, PULL) + LAST.pack(last))
                    send = resend = False
                reply = self._conn.recv()
            except CommError as exc:
                self._fail_over(exc)
                send = resend = True
                continue
            sums.append(self._take(reply, None if body is None else len(body)))
        return sums

    def _take(self, reply: bytes | bytearray, nbytes: int | None) -> np.ndarray:
        """This step's round from an answer. `nbytes`: the sum's size (None: any)."""
        index, count, staleness, committed, newest = RESULT.unpack_from(reply)
        if index != self.step or (nbytes is not None and len(reply) != RESULT.size + nbytes):
            raise CommError(f"host aggregator client {self.name}: got round {index} ({len(reply)} bytes) "
                            f"for step {self.step}" + (f" ({nbytes} bytes of gradient)" if nbytes is not None else ""))
        self.step += 1
        self.newest = max(self.newest, newest)
        self.last_round = (count, staleness)
        self._uncommitted = [(step, older) for step, older in self._uncommitted if step > committed]
        return np.frombuffer(bytes(reply[RESULT.size:]), dtype=WIRE_DTYPE).astype(np.float32)

    def _fail_over(self, exc: CommError) -> None:
        """Drop the failed server, connect to the next; re-raise when none is left."""
        self._sent += self._conn.bytes_sent
        self._conn.close()
        self.servers.pop(0)
        if not self.servers:
            raise exc
        log.warning("%s; failing over to %s", exc, self.servers[0])
        self.failovers += 1
        self._conn = self._connect()

    def close(self) -> None:
        try:
            self._conn.send(b"")
        except CommError:
            pass  # the aggregator is gone already
        self._conn.close()


def write_stats(out_dir: str | Path, name: str, stats: AggStats, staleness: int, took_over: bool | None = None) -> None:
    """OUT/NAME.agg.json: what the aggregating process did, with the staleness bound in force."""
    data = {"staleness_bound": staleness, **stats.to_dict()}
    if took_over is not None:
        data["took_over"] = took_over
    (Path(out_dir) / f"{name}.agg.json").write_text(json.dumps(data, indent=2) + "\n")



def run_host_aggregator(config: AgentConfig, out_dir: Path, source: str = "<agent config>") -> None:
    """The aggregator host process: serve the job in `config`; OUT/NAME-agg.log and NAME-agg.agg.json."""
    if config.aggregator is None:
        raise ConfigError(f"{source}: field 'aggregator': missing (needed to run a host aggregator)")
    name = config.aggregator.name + "-agg"
    setup_logging(out_dir, name)
    server = HostAggregator(config.aggregator, [w.name for w in config.workers], RoundBook.from_config(config),
                            config.timeout_s, config.replica)
    try:
        stats = server.serve()
    finally:
        server.close()
    write_stats(out_dir, name, stats, config.staleness)
    log.info("done after %d rounds", stats.rounds)
