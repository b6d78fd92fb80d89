"""The worker's window as a state machine: which chunks of one all-reduce to send when.

No sockets and no clock of its own (docs/protocol.md, "Worker behaviour"): the caller asks
`due(now)` what to send, sends it, and feeds back `on_results(chunks, now)`. Everything is
per batch and vectorised (numpy), so a batch of results costs a few array operations, not a
Python loop per packet.

- Slots: chunk c + W (W = the slot window) may go only once chunk c's result is in.
- Pacing (hosts.pacing): how many chunks may be in flight within that bound.
- Retransmission timeout (RetransmitTimer): a chunk without a result after the RTO is resent.
- Fast retransmit: a chunk still without a result when the results of FAST_RETX_RESULTS
  chunks sent after it have come back is resent at once, at most once per chunk.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from protocol.job import MAX_TIMEOUT_S

from .pacing import Window

# Results of this many later chunks passing an outstanding one mean it was lost (TCP's three
# duplicate ACKs): a slot completes when its last contribution arrives, and every worker sends
# in chunk order, so results come back in order unless something of that chunk went missing.
FAST_RETX_RESULTS = 3
_EWMA = 0.125  # TCP's gain for the smoothed round trip


class RetransmitTimer:
    """The retransmission timeout (RTO) of one worker: TCP's estimator with Karn's algorithm.

    The RTO is `min_rto` at least, else twice the smoothed time a chunk takes to come back
    (which includes waiting for the slowest worker). Only chunks sent once give samples (a
    result for a resent chunk may answer either copy). Each timeout doubles the RTO up to
    `max_rto`, so when every chunk in the window is being resent the resends thin out instead
    of snowballing at the minimum; a fresh sample recomputes it from the estimate. A burst of
    chunks that expire together is one loss event: it doubles the RTO once, not per chunk.
    """

    def __init__(self, min_rto: float, max_rto: float = MAX_TIMEOUT_S):
        self.min_rto = min_rto
        self.max_rto = max(min_rto, max_rto)
        self.rto = min_rto
        self.srtt: float | None = None
        self._backed_off_at = -math.inf

    def sample(self, seconds: float | np.ndarray) -> None:
        """Chunks sent once came back after `seconds` (one value, or several in arrival order):
        update the estimate as TCP would one sample at a time, and drop any backoff."""
        s = np.atleast_1d(np.asarray(seconds, dtype=np.float64))
        if s.size == 0:
            return
        srtt = float(s[0]) if self.srtt is None else self.srtt * (1 - _EWMA) + _EWMA * float(s[0])
        rest = s[1:]
        if rest.size:  # srtt_k = (1-g)^k srtt_0 + sum_i g (1-g)^(k-1-i) s_i
            decay = (1 - _EWMA) ** np.arange(rest.size - 1, -1, -1)
            srtt = (1 - _EWMA) ** rest.size * srtt + _EWMA * float(decay @ rest)
        self.srtt = srtt
        self.rto = min(self.max_rto, max(self.min_rto, 2 * srtt))
        self._backed_off_at = -math.inf

    def timeout(self, sent_at: float, now: float) -> bool:
        """A chunk sent at `sent_at` expired at `now`: double the RTO unless this expiry belongs
        to a burst that already doubled it (the chunk was sent before the last doubling).
        True when this expiry starts a new loss event."""
        if sent_at < self._backed_off_at:
            return False
        self.rto = min(self.max_rto, 2 * self.rto)
        self._backed_off_at = now
        return True


@dataclass
class TransferStats:
    """What one worker sent and received, cumulative over calls."""

    chunks: int = 0
    packets_sent: int = 0
    retransmissions: int = 0  # timeouts and fast retransmits
    fast_retransmits: int = 0
    results: int = 0
    marked_results: int = 0  # new results that met a deep queue (wire.FLAG_ECN)
    stale_results: int = 0  # duplicates, other jobs' or calls' results, malformed packets
    spilled: int = 0  # chunks that found their slot in a shared pool taken: summed by the parameter server


_NONE = np.zeros(0, dtype=np.int64)


def _merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted union of two chunk index arrays (cheap when one is empty, as it mostly is)."""
    if not a.size:
        return b
    return np.union1d(a, b) if b.size else a


class Transfer:
    """One all-reduce call's `chunks` chunks through a window of `slots` slots.

    `timer`, `pacing` and `stats` belong to the worker and outlive the call (like TCP's RTO
    and congestion window). Chunk indices are 0..chunks-1 within this call.
    """

    def __init__(self, chunks: int, slots: int, timer: RetransmitTimer, pacing: Window, stats: TransferStats,
                 now: float):
        self.chunks = chunks
        self.slots = slots
        self.timer = timer
        self.pacing = pacing
        self.stats = stats
        self.done = np.zeros(chunks, dtype=bool)
        self.sent_at = np.zeros(chunks)  # the last send of each chunk
        self.deadline = np.full(chunks, math.inf)  # when it times out; inf once done or never sent
        self.resent = np.zeros(chunks, dtype=bool)  # sent more than once: no RTT sample, no fast retransmit
        self.passed = np.zeros(chunks, dtype=np.int32)  # results of later chunks seen while it was outstanding
        self.remaining = chunks
        self.next_new = 0  # the first chunk never sent
        self.settled = 0  # chunks below next_new that are done
        self.oldest = 0  # the first chunk without a result
        self.last_progress = now  # when the last new result arrived (or the call began)
        self._fast: np.ndarray = _NONE  # chunks fast retransmit found lost, to resend next

    @property
    def in_flight(self) -> int:
        """Chunks sent and not answered yet."""
        return self.next_new - self.settled

    def prefill(self, chunks: np.ndarray) -> None:
        """These chunks' results are known before the call sends anything (a replica taking over a seat
        mid-round, hosts.split_agg): they are done and are never sent."""
        chunks = np.unique(np.asarray(chunks, dtype=np.int64))
        chunks = chunks[~self.done[chunks]]
        self.done[chunks] = True
        self.remaining -= int(chunks.size)

    def next_deadline(self) -> float:
        """When the earliest outstanding chunk times out (inf when none is outstanding)."""
        window = self.deadline[self.oldest:self.next_new]
        return float(window.min()) if window.size else math.inf

    def due(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """The chunks to send now, in order, and which of them are retransmissions.

        Fast retransmits first, then chunks whose timeout expired, then new chunks as far as
        the slots and the pacing window allow. They count as sent at `now`.
        """
        resend = _merge(self._fast, self._expired(now))
        resend = resend[~self.done[resend]]  # a result may have overtaken the fast retransmit
        self._fast = _NONE
        fresh = self._admit()
        chunks = np.concatenate([resend, fresh])
        retx = np.zeros(chunks.size, dtype=bool)
        retx[:resend.size] = True
        if chunks.size:
            self.sent_at[chunks] = now
            self.deadline[chunks] = now + self.timer.rto
            self.resent[resend] = True
            self.stats.packets_sent += int(chunks.size)
            self.stats.retransmissions += int(resend.size)
        return chunks, retx

    def resend_now(self, chunks: np.ndarray) -> None:
        """Send these outstanding chunks again at the next due() (they go somewhere else now: a spill)."""
        self._fast = _merge(self._fast, np.asarray(chunks, dtype=np.int64))

    def on_results(self, chunks: np.ndarray, now: float, marked: np.ndarray | None = None) -> np.ndarray:
        """Results for `chunks` (indices in arrival order) arrived at `now`; `marked[i]`: result i met a
        deep queue on the way (wire.FLAG_ECN).

        Returns the positions in `chunks` of the new ones (the first result of a chunk not done
        before); everything else is stale. Updates the RTO from the chunks sent once, grows the
        pacing window (cut once per window for new marked results, DCTCP's way: hosts.pacing), and
        marks chunks that later results passed for fast retransmit.
        """
        chunks = np.asarray(chunks, dtype=np.int64)
        if chunks.size > 1 and not (chunks[1:] > chunks[:-1]).all():  # not the usual rising run: drop repeats
            firsts = np.sort(np.unique(chunks, return_index=True)[1])
        else:
            firsts = np.arange(chunks.size)
        fresh = firsts[~self.done[chunks[firsts]]]
        got = chunks[fresh]
        self.stats.results += int(got.size)
        self.stats.stale_results += int(chunks.size - got.size)
        if not got.size:
            return fresh
        self.done[got] = True
        self.deadline[got] = math.inf
        self.remaining -= int(got.size)
        self.settled += int(got.size)
        self.last_progress = now
        once = got[~self.resent[got]]  # Karn: only unambiguous round trips update the estimate
        self.timer.sample(now - self.sent_at[once])
        congested = got[marked[fresh]] if marked is not None else _NONE
        self.pacing.on_results(int(got.size), int(congested.size))
        if congested.size:
            self.stats.marked_results += int(congested.size)
            self.pacing.on_mark_burst(float(self.sent_at[congested].max()), now)
        sent = self.done[self.oldest:self.next_new]  # the first chunk without a result is among these, or next_new
        self.oldest = self.next_new if sent.all() else self.oldest + int(np.argmin(sent))
        self._count_passes(got, now)
        return fresh

    def _count_passes(self, got: np.ndarray, now: float) -> None:
        """Every outstanding chunk sent once, below a result that just arrived, was passed by it."""
        top = int(got.max())
        if top <= self.oldest:
            return
        lower = self.oldest + np.flatnonzero(~self.done[self.oldest:top] & ~self.resent[self.oldest:top])
        if not lower.size:
            return
        self.passed[lower] += got.size - np.searchsorted(np.sort(got), lower, side="right")
        lost = lower[self.passed[lower] >= FAST_RETX_RESULTS]
        if lost.size:
            self.pacing.on_loss_burst(float(self.sent_at[lost].max()), now)
            self.stats.fast_retransmits += int(lost.size)
            self._fast = _merge(self._fast, lost)
            self.resent[lost] = True  # at most one fast retransmit per chunk

    def _expired(self, now: float) -> np.ndarray:
        """Outstanding chunks whose timeout passed; a new burst of them backs the RTO off once."""
        expired = self.oldest + np.flatnonzero(self.deadline[self.oldest:self.next_new] <= now)
        if expired.size:
            newest = float(self.sent_at[expired].max())
            if self.timer.timeout(newest, now):
                self.pacing.on_loss_burst(newest, now)
        return expired

    def _admit(self) -> np.ndarray:
        """New chunks the pacing window and the slots allow now, in order."""
        budget = min(self.pacing.capacity() - self.in_flight, self.chunks - self.next_new)
        if budget <= 0:
            return _NONE
        fresh = np.arange(self.next_new, self.next_new + budget)
        previous = fresh - self.slots  # the chunk before it in the same slot: its result must be in
        free = (previous < 0) | self.done[np.maximum(previous, 0)]
        if not free.all():
            fresh = fresh[:int(np.argmin(free))]
        self.next_new += int(fresh.size)
        known = self.done[fresh]  # prefilled: passed over, never sent
        self.settled += int(known.sum())
        return fresh[~known]
