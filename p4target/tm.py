"""Traffic manager: one queue per egress port between ingress and egress.

This is how experiments emulate contention (the kernel here has no netem). Each
port's packets go through, in order:

  loss (random, seeded) -> delay line (fixed added delay) -> FIFO queue (tail drop at
  `depth` packets) -> shaper (token buckets in packets/s and bits/s) -> egress

A port may also delay the frames that arrive on it before they enter the parser (its
ingress delay): the delay of the link into the port, whose sending side can shape rate,
depth and loss in its kernel but has no netem to add delay.

`enq_qdepth` is the number of packets already queued when a packet joins the queue,
`deq_qdepth` the number still queued when it leaves, as in BMv2's standard metadata.
The clock is injected so tests are deterministic; the switch uses time.monotonic.
"""
from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from p4target.constants import DEFAULT_BURST_S, DEFAULT_DEPTH


class TokenBucket:
    """Tokens accrue at `rate` per second up to a capacity of `burst_s` seconds' worth
    (never less than one packet's cost, so any packet can eventually leave). The
    burst absorbs a late wake-up of the switch loop without losing rate."""

    def __init__(self, rate: float, burst_s: float, now: float):
        self.rate = rate
        self.burst_s = burst_s
        self.tokens = float("inf")  # starts full; refill() clamps it to the capacity
        self.stamp = now

    def _capacity(self, cost: float) -> float:
        return max(cost, self.rate * self.burst_s)

    def refill(self, now: float, cost: float) -> None:
        self.tokens = min(self._capacity(cost), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def ready_at(self, now: float, cost: float) -> float:
        """The earliest time at which `cost` tokens are there (after refill(now, cost))."""
        missing = cost - self.tokens
        return now if missing <= 0 else now + missing / self.rate


def _seconds(ms: float) -> float:
    if ms < 0:
        raise ValueError(f"delay must not be negative, got {ms} ms")
    return ms / 1000.0


class DelayLine:
    """A FIFO of items, each due the delay it was held for after it came: what a link does.

    Once something is held, later items wait behind it even with no delay, so a delay
    changed (or removed) meanwhile never reorders what goes through the line."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self._items: deque[tuple[float, Any]] = deque()

    def hold(self, item: Any, delay_s: float) -> bool:
        """Keep `item` for `delay_s`; False (not kept: pass it on now) when there is no delay
        and nothing is held."""
        if not delay_s and not self._items:
            return False
        self._items.append((self.clock() + delay_s, item))
        return True

    def due(self) -> Iterator[Any]:
        """The items whose time has come, in the order they came."""
        now = self.clock()
        while self._items and self._items[0][0] <= now:
            yield self._items.popleft()[1]

    def next_due(self) -> float | None:
        return self._items[0][0] if self._items else None


class PortQueue:
    """The queue of one egress port with its shaping, depth, delay and loss settings, and the
    ingress delay of the frames arriving on the port (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, depth: int = DEFAULT_DEPTH,
                 burst_s: float = DEFAULT_BURST_S):
        self.clock = clock
        self.depth = depth
        self.burst_s = burst_s
        self.delay_s = 0.0
        self.ingress_delay_s = 0.0
        self.loss = 0.0
        self._rng = random.Random(0)
        self._pps: TokenBucket | None = None
        self._bps: TokenBucket | None = None
        self._delayed = DelayLine(clock)   # (item, size) on their way to the queue
        self._arriving = DelayLine(clock)  # frames received on this port, on their way to ingress
        self._queue: deque[tuple[Any, int, int]] = deque()  # (item, size, enq_qdepth)
        self.enqueued = self.dequeued = self.tail_drops = self.loss_drops = 0

    # -- settings ---------------------------------------------------------------------
    def set_rate_pps(self, pps: float | None) -> None:
        """Limit to `pps` packets per second; None or 0 removes the limit."""
        self._pps = TokenBucket(float(pps), self.burst_s, self.clock()) if pps else None

    def set_rate_bps(self, bps: float | None) -> None:
        """Limit to `bps` bits per second (frame bytes * 8); None or 0 removes the limit."""
        self._bps = TokenBucket(float(bps), self.burst_s, self.clock()) if bps else None

    def set_depth(self, packets: int) -> None:
        if packets < 1:
            raise ValueError(f"queue depth must be at least 1 packet, got {packets}")
        self.depth = packets

    def set_delay_ms(self, ms: float) -> None:
        self.delay_s = _seconds(ms)

    def set_ingress_delay_ms(self, ms: float) -> None:
        self.ingress_delay_s = _seconds(ms)

    def set_loss(self, probability: float, seed: int | None = None) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"loss probability must be in [0, 1], got {probability}")
        self.loss = probability
        if seed is not None:
            self._rng = random.Random(seed)

    @property
    def rate_pps(self) -> float | None:
        return self._pps.rate if self._pps else None

    @property
    def rate_bps(self) -> float | None:
        return self._bps.rate if self._bps else None

    # -- packets ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._queue)

    def enqueue(self, item: Any, size: int) -> None:
        """Offer a packet of `size` bytes; it may be lost, delayed or tail-dropped."""
        if self.loss and self._rng.random() < self.loss:
            self.loss_drops += 1
            return
        if not self._delayed.hold((item, size), self.delay_s):
            self._join(item, size)

    def _join(self, item: Any, size: int) -> None:
        if len(self._queue) >= self.depth:
            self.tail_drops += 1
            return
        self._queue.append((item, size, len(self._queue)))
        self.enqueued += 1

    def dequeue(self) -> Iterator[tuple[Any, int, int]]:
        """Yield (item, enq_qdepth, deq_qdepth) for every packet allowed to leave now."""
        for item, size in self._delayed.due():
            self._join(item, size)
        now = self.clock()
        while self._queue:
            item, size, enq_qdepth = self._queue[0]
            if self._ready_at(now, size) > now:
                return
            self._queue.popleft()
            for bucket, cost in ((self._pps, 1), (self._bps, size * 8)):
                if bucket:
                    bucket.tokens -= cost
            self.dequeued += 1
            yield item, enq_qdepth, len(self._queue)

    def hold(self, frame: bytes) -> bool:
        """Keep a frame received on this port for the ingress delay; False: ingress it now."""
        return self._arriving.hold(frame, self.ingress_delay_s)

    def arrivals(self) -> Iterator[bytes]:
        """The frames received on this port whose ingress delay is over, in the order they came."""
        return self._arriving.due()

    def _ready_at(self, now: float, size: int) -> float:
        ready = now
        for bucket, cost in ((self._pps, 1), (self._bps, size * 8)):
            if bucket:
                bucket.refill(now, cost)
                ready = max(ready, bucket.ready_at(now, cost))
        return ready

    def next_event(self) -> float | None:
        """When something can next leave or join the queue or enter ingress (None: nothing pending)."""
        times = [t for t in (self._delayed.next_due(), self._arriving.next_due()) if t is not None]
        if self._queue:
            times.append(self._ready_at(self.clock(), self._queue[0][1]))
        return min(times) if times else None

    def stats(self) -> dict[str, Any]:
        return {"qdepth": len(self._queue), "depth": self.depth, "rate_pps": self.rate_pps,
                "rate_bps": self.rate_bps, "delay_ms": self.delay_s * 1000.0,
                "ingress_delay_ms": self.ingress_delay_s * 1000.0, "loss": self.loss,
                "enqueued": self.enqueued, "dequeued": self.dequeued,
                "tail_drops": self.tail_drops, "loss_drops": self.loss_drops}


class TrafficManager:
    """The per-port queues of one switch; a port's queue is made on first use."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, burst_s: float = DEFAULT_BURST_S):
        self.clock = clock
        self.burst_s = burst_s
        self.queues: dict[int, PortQueue] = {}

    def queue(self, port: int) -> PortQueue:
        q = self.queues.get(port)
        if q is None:
            q = self.queues[port] = PortQueue(self.clock, burst_s=self.burst_s)
        return q

    def enqueue(self, port: int, item: Any, size: int) -> None:
        self.queue(port).enqueue(item, size)

    def dequeue(self) -> Iterator[tuple[int, Any, int, int]]:
        """Yield (port, item, enq_qdepth, deq_qdepth) for every packet that may leave now."""
        for port, q in self.queues.items():
            for item, enq_qdepth, deq_qdepth in q.dequeue():
                yield port, item, enq_qdepth, deq_qdepth

    def hold(self, port: int, frame: bytes) -> bool:
        """Keep a frame received on `port` for the port's ingress delay; False: ingress it now."""
        q = self.queues.get(port)
        return q is not None and q.hold(frame)

    def arrivals(self) -> Iterator[tuple[int, bytes]]:
        """(port, frame) for every held frame whose ingress delay is over."""
        for port, q in self.queues.items():
            for frame in q.arrivals():
                yield port, frame

    def next_event(self) -> float | None:
        times = [t for t in (q.next_event() for q in self.queues.values()) if t is not None]
        return min(times) if times else None
