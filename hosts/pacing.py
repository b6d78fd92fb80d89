"""How many chunks a worker keeps in flight: a fixed window, or AIMD pacing with a weight.

The slot window (JobSpec.slot_count) is an upper bound set by switch memory, not by the
network: a worker that always fills it pushes slot_count packets into every queue on its
path at once. Behind a shallow queue (a shaped link, a congested spine) the excess is
tail-dropped and every drop costs a retransmission timeout for the whole job.

`Aimd` paces instead, MLfabric-style, from the results the worker receives (results are the
fabric's acknowledgements): each result adds `weight / cwnd` to the congestion window (so
`weight` chunks per round trip), each loss event halves it, and it never leaves
[1, slot_count]. Jobs that share a bottleneck then split it in proportion to their weights
while the link stays busy (weighted AIMD converges to shares proportional to the additive
increase). `transfer_weights` orders jobs the way MLfabric orders transfers: the job whose
update unblocks the most workers per byte on the wire gets the largest share, so it
finishes first instead of every job finishing late under a fair split.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

from protocol.job import PACING_CHOICES

JobKey = TypeVar("JobKey", bound=Hashable)


class Window:
    """A fixed window: always the full slot window in flight (no pacing)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.smallest = limit  # the least capacity it has had: how far pacing backed off (reported per worker)
        self._cut_at = -math.inf  # when the last loss burst shrank the window

    def capacity(self) -> int:
        """How many chunks may be in flight now."""
        return self.limit

    def allows(self, in_flight: int) -> bool:
        return in_flight < self.capacity()

    def on_results(self, count: int = 1) -> None:
        """`count` chunks' results arrived."""

    def on_loss(self) -> None:
        """A loss event (one or more chunks lost together)."""

    def on_loss_burst(self, sent_at: float, now: float) -> None:
        """A chunk sent at `sent_at` was found lost at `now`: one loss event per burst, i.e. not
        again for a chunk sent before the last one shrank the window."""
        if sent_at >= self._cut_at:
            self.on_loss()
            self._cut_at = now


class Aimd(Window):
    """Additive increase (`weight` chunks per round trip), multiplicative decrease (halve)."""

    def __init__(self, limit: int, weight: float = 1.0):
        super().__init__(limit)
        self.weight = weight
        self.cwnd = float(limit)

    def capacity(self) -> int:
        return min(self.limit, max(1, int(self.cwnd)))

    def on_results(self, count: int = 1) -> None:
        for _ in range(count):  # each result adds weight / cwnd: `weight` chunks per window of results
            if self.cwnd >= self.limit:
                break
            self.cwnd = min(float(self.limit), self.cwnd + self.weight / self.cwnd)

    def on_loss(self) -> None:
        self.cwnd = max(1.0, self.cwnd / 2)
        self.smallest = min(self.smallest, self.capacity())


def make_window(pacing: str, limit: int, weight: float = 1.0) -> Window:
    """The window policy a job spec asks for."""
    if pacing == "aimd":
        return Aimd(limit, weight)
    if pacing == "fixed":
        return Window(limit)
    raise ValueError(f"pacing: {pacing!r} is not one of {PACING_CHOICES}")


def transfer_weights(workers: Mapping[JobKey, int], step_bytes: Mapping[JobKey, float],
                     top: float = 4.0) -> dict[JobKey, float]:
    """AIMD weights for jobs sharing links: unblocked workers per byte, scaled to (0, top].

    `workers[j]` is how many workers job j's update unblocks, `step_bytes[j]` what one
    all-reduce of job j puts on the shared link. The most urgent job gets `top`, the others
    `top` times their urgency relative to it, but never less than 1 (no job is starved).
    """
    urgency = {j: workers[j] / max(step_bytes[j], 1.0) for j in workers}
    best = max(urgency.values(), default=1.0)
    return {j: max(1.0, top * u / best) for j, u in urgency.items()}
