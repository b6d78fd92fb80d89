"""The traffic manager's settings as the switch keeps them, mirrored into a native engine.

The packet queues themselves live in the engine (engine/tm.c) while it runs the switch; the
Python TrafficManager stays the model the side channel validates and reads. `NativeQueue`
is a PortQueue (so the Python engine can still use it when a program falls back) whose
setters also reach the attached engine and whose stats add the engine's counts.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from p4target.native.binding import Engine
from p4target.tm import DEFAULT_BURST_S, PortQueue, TrafficManager

_COUNTS = ("enqueued", "dequeued", "tail_drops", "loss_drops")


class NativeQueue(PortQueue):
    """One port's queue settings and counters; see the module docstring."""

    def __init__(self, port: int, clock: Callable[[], float], burst_s: float):
        super().__init__(clock, burst_s=burst_s)
        self.port = port
        self.engine: Engine | None = None
        self._loss_seed: int | None = None

    def attach(self, engine: Engine) -> None:
        """Give the engine this queue's settings; from now on it holds the packets."""
        self.engine = engine
        engine.queue_depth(self.port, self.depth)
        engine.queue_rate(self.port, self.rate_pps, bits=False)
        engine.queue_rate(self.port, self.rate_bps, bits=True)
        engine.queue_delay(self.port, self.delay_s)
        engine.ingress_delay(self.port, self.ingress_delay_s)
        engine.queue_loss(self.port, self.loss, self._loss_seed)

    def detach(self) -> None:
        """The engine stops: keep its counts."""
        if self.engine is not None:
            counts = self.engine.queue_stats(self.port)
            for name in _COUNTS:
                setattr(self, name, getattr(self, name) + counts[name])
            self.engine = None

    def set_rate_pps(self, pps: float | None) -> None:
        super().set_rate_pps(pps)
        if self.engine is not None:
            self.engine.queue_rate(self.port, pps, bits=False)

    def set_rate_bps(self, bps: float | None) -> None:
        super().set_rate_bps(bps)
        if self.engine is not None:
            self.engine.queue_rate(self.port, bps, bits=True)

    def set_depth(self, packets: int) -> None:
        super().set_depth(packets)
        if self.engine is not None:
            self.engine.queue_depth(self.port, packets)

    def set_delay_ms(self, ms: float) -> None:
        super().set_delay_ms(ms)
        if self.engine is not None:
            self.engine.queue_delay(self.port, self.delay_s)

    def set_ingress_delay_ms(self, ms: float) -> None:
        super().set_ingress_delay_ms(ms)
        if self.engine is not None:
            self.engine.ingress_delay(self.port, self.ingress_delay_s)

    def set_loss(self, probability: float, seed: int | None = None) -> None:
        super().set_loss(probability, seed)
        if seed is not None:
            self._loss_seed = seed
        if self.engine is not None:
            self.engine.queue_loss(self.port, probability, seed)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if self.engine is not None:
            counts = self.engine.queue_stats(self.port)
            for name in _COUNTS:
                out[name] += counts[name]
            out["qdepth"] = counts["qdepth"]
        return out


class NativeTrafficManager(TrafficManager):
    """A TrafficManager of NativeQueues, attachable to the engine that runs the switch."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, burst_s: float = DEFAULT_BURST_S):
        super().__init__(clock, burst_s)
        self.engine: Engine | None = None

    def queue(self, port: int) -> NativeQueue:
        q = self.queues.get(port)
        if not isinstance(q, NativeQueue):  # None: every queue here is made below
            q = self.queues[port] = NativeQueue(port, self.clock, self.burst_s)
            if self.engine is not None:
                q.attach(self.engine)
        return q

    def attach(self, engine: Engine) -> None:
        self.engine = engine
        for port in self.queues:
            self.queue(port).attach(engine)

    def detach(self) -> None:
        for port in self.queues:
            self.queue(port).detach()
        self.engine = None
