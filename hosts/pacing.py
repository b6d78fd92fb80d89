"""How many chunks a worker keeps in flight: a fixed window, or AIMD pacing with a weight.

The slot window (JobSpec.slot_count) is an upper bound set by switch memory, not by the
network: a worker that always fills it pushes slot_count packets into every queue on its
path at once. Behind a shallow queue (a shaped link, a congested spine) the excess is
tail-dropped and every drop costs a retransmission timeout for the whole job.

`Aimd` paces instead, MLfabric-style, from the results the worker receives (results are the
fabric's acknowledgements): each result adds `weight / cwnd` to the congestion window (so
`weight` chunks per round trip), each loss event halves it, and it never leaves
[1, slot_count]. A queue past its marking depth (ECN, ATP-style) is no loss: marks cut the
window DCTCP's way, by alpha / 2 once per window, alpha the running fraction of marked
results, so a bottleneck held at its marking depth stays busy; halving on every mark left the
busiest link of a 16-worker fat-tree 71-88% busy (docs/scale.md). Jobs that share a bottleneck then split it in proportion to their weights
while the link stays busy (weighted AIMD converges to shares proportional to the additive
increase). `transfer_weights` orders jobs the way MLfabric orders transfers: the job whose
update unblocks the most workers per byte on the wire gets the largest share, so it
finishes first instead of every job finishing late under a fair split.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
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

    def on_results(self, count: int = 1, marked: int = 0) -> None:
        """`count` chunks' results arrived, `marked` of them met a deep queue on the way."""

    def on_loss(self) -> None:
        """A loss event (one or more chunks lost together)."""

    def on_mark(self) -> None:
        """A congestion event: results marked by a queue past its marking depth."""

    def on_loss_burst(self, sent_at: float, now: float) -> None:
        """A chunk sent at `sent_at` was found lost at `now`: one loss event per burst."""
        self._once_per_window(sent_at, now, self.on_loss)

    def on_mark_burst(self, sent_at: float, now: float) -> None:
        """A result for a chunk sent at `sent_at` came back marked at `now`: one congestion event per burst."""
        self._once_per_window(sent_at, now, self.on_mark)

    def _once_per_window(self, sent_at: float, now: float, cut: Callable[[], None]) -> None:
        """Not again for a chunk sent before the last cut: it went out in the window that caused it."""
        if sent_at >= self._cut_at:
            cut()
            self._cut_at = now


class Aimd(Window):
    """Additive increase (`weight` chunks per round trip); a loss halves the window, a mark cuts it by alpha / 2."""

    GAIN = 1 / 16  # DCTCP's g: how fast alpha follows the marked fraction, window by window

    def __init__(self, limit: int, weight: float = 1.0):
        super().__init__(limit)
        self.weight = weight
        self.cwnd = float(limit)
        self.alpha = 1.0  # as DCTCP starts: the first marks halve, as a loss does
        self._results = 0  # results and marked results in the window being observed
        self._marked = 0

    def capacity(self) -> int:
        return min(self.limit, max(1, int(self.cwnd)))

    def on_results(self, count: int = 1, marked: int = 0) -> None:
        self._results += count
        self._marked += marked
        if self._results >= self.capacity():  # a window of results observed: alpha follows its marked fraction
            self.alpha += self.GAIN * (self._marked / self._results - self.alpha)
            self._results = self._marked = 0
        for _ in range(count):  # each result adds weight / cwnd: `weight` chunks per window of results
            if self.cwnd >= self.limit:
                break
            self.cwnd = min(float(self.limit), self.cwnd + self.weight / self.cwnd)

    def on_loss(self) -> None:
        self._cut(0.5)

    def on_mark(self) -> None:
        self._cut(1 - self.alpha / 2)

    def _cut(self, keep: float) -> None:
        self.cwnd = max(1.0, self.cwnd * keep)
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
