"""All-reduce client: streams a tensor through the switches' aggregation slots over UDP.

Protocol (docs/protocol.md, "Worker behaviour"): the tensor is cut into chunks of
`job.lanes` int32 values. Chunks are numbered by a counter that every worker of the job
advances identically across calls; chunk g uses slot g % W and pool (g // W) % 2, where
W = job.slot_count is the window. A worker sends chunk g + W only after it holds the result
of chunk g, so at most W chunks are in flight and a slot's pool is reused only after every
worker has the previous result. A chunk without a result after the retransmission timeout
is sent again with the retransmission flag; the switch ignores the duplicate contribution and answers
from its stored result if the slot is already complete. A chunk passed by the results of
FAST_RETX_RESULTS chunks sent after it is resent at once (fast retransmit), without waiting
for the timeout.

Float tensors are quantized with a scale the workers agree on through the fabric first
(hosts.quantize); int32 tensors are summed exactly, and an overflow flagged by the switch
raises AggOverflowError instead of returning a wrapped or clamped sum.
"""
from __future__ import annotations

import heapq
import math
import socket
import time
from dataclasses import dataclass

import numpy as np

from protocol import wire
from protocol.job import JobSpec

from . import codec, quantize
from .comm import AllReduce
from .pacing import make_window

FLOAT_RETRIES = 3  # rescale attempts after an overflow in the float path (see allreduce())
FLOAT_RETRY_BITS = 8  # fractional bits given up per attempt
MAX_RTO_S = 1.0  # the retransmission timeout never grows beyond this, backed off or not
# Results of this many later chunks passing an outstanding one mean it was lost (TCP's three
# duplicate ACKs): a slot completes when its last contribution arrives, and every worker sends
# in chunk order, so results come back in order unless something of that chunk went missing.
FAST_RETX_RESULTS = 3


class AllReduceError(RuntimeError):
    """The all-reduce could not produce a correct sum (stalled, misconfigured fabric, ...)."""

    exit_code = 1


class AggOverflowError(AllReduceError):
    """A switch saturated while summing: the exact int32 sum does not exist."""


class RetransmitTimer:
    """The retransmission timeout (RTO) of one worker: TCP's estimator with Karn's algorithm.

    The RTO is `min_rto` at least, else twice the smoothed time a chunk takes to come back
    (which includes waiting for the slowest worker). Only chunks sent once give samples (a
    result for a resent chunk may answer either copy). Each timeout doubles the RTO up to
    `max_rto`, so when every chunk in the window is being resent the resends thin out instead
    of snowballing at the minimum; a fresh sample recomputes it from the estimate. A burst of
    chunks that expire together is one loss event: it doubles the RTO once, not per chunk.
    """

    def __init__(self, min_rto: float, max_rto: float = MAX_RTO_S):
        self.min_rto = min_rto
        self.max_rto = max(min_rto, max_rto)
        self.rto = min_rto
        self.srtt: float | None = None
        self._backed_off_at = -math.inf

    def sample(self, seconds: float) -> None:
        """A chunk sent once came back after `seconds`: update the estimate, drop any backoff."""
        self.srtt = seconds if self.srtt is None else 0.875 * self.srtt + 0.125 * seconds
        self.rto = min(self.max_rto, max(self.min_rto, 2 * self.srtt))
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
class ClientStats:
    """What one worker sent and received, cumulative over calls."""

    chunks: int = 0
    packets_sent: int = 0
    retransmissions: int = 0  # timeouts and fast retransmits
    fast_retransmits: int = 0
    results: int = 0
    stale_results: int = 0


class AllReduceClient:
    """One worker's endpoint of a job: the UDP socket plus the chunk counter shared in lockstep."""

    def __init__(self, job: JobSpec, rank: int, sock: socket.socket | None = None,
                 stall_timeout_s: float = 30.0):
        if not 0 <= rank < job.world_size:
            raise AllReduceError(f"rank {rank} is outside job {job.job_id}'s {job.world_size} workers")
        self.job = job
        self.rank = rank
        self.stall_timeout_s = stall_timeout_s
        self.dest = (job.agg_ip, job.agg_port)
        self.next_chunk = 0
        self.stats = ClientStats()
        self.timer = RetransmitTimer(job.timeout_s)
        self.window = make_window(job.pacing, job.slot_count, job.weight)  # persists across calls, like TCP's cwnd
        self._window_cut_at = -math.inf  # when the window last shrank for a loss event
        if sock is None:
            me = job.workers[rank]
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((me.ip, me.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.sock = sock
        self._packet_bytes = wire.packet_bytes(job.lanes)
        self._buf = bytearray(self._packet_bytes + 64)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "AllReduceClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ public API

    def allreduce(self, tensor: np.ndarray) -> np.ndarray:
        """Sum `tensor` over all workers: int32 exactly, floating point within quantize.error_bound."""
        arr = np.asarray(tensor)
        if arr.dtype == np.int32:
            return self.allreduce_int(arr)
        if arr.dtype.kind != "f":
            raise AllReduceError(f"allreduce: dtype {arr.dtype} is not supported (int32 or floating point)")
        return self.allreduce_float(arr)

    def allreduce_int(self, values: np.ndarray) -> np.ndarray:
        """Exact int32 sum over all workers; raises AggOverflowError if it does not fit int32."""
        values = np.asarray(values)
        if values.dtype != np.int32:
            raise AllReduceError(f"allreduce_int: expected int32, got {values.dtype}")
        sums, overflow = self._stream(values.ravel(), scale=0)
        if overflow.any():
            raise AggOverflowError(f"job {self.job.job_id}: int32 sum overflowed in {int(overflow.sum())} "
                                   f"of {overflow.size} chunks (first: chunk {int(np.argmax(overflow))})")
        return sums.reshape(values.shape)

    def allreduce_float(self, tensor: np.ndarray) -> np.ndarray:
        """Quantized sum: agree on a scale through the fabric, sum int32, dequantize.

        Every worker sees the same overflow flags, so all of them take the same retry path.
        """
        x = np.asarray(tensor)
        votes = self.allreduce_int(quantize.exponent_vote(quantize.max_exponent(x)))
        e_max, workers = quantize.tally_votes(votes)
        if workers != self.job.world_size:
            raise AllReduceError(f"job {self.job.job_id}: {workers} workers voted, the job has "
                                 f"{self.job.world_size}")
        f = quantize.frac_bits(e_max, workers)
        for _ in range(FLOAT_RETRIES):
            sums, overflow = self._stream(quantize.quantize(x, f).ravel(), scale=f)
            if not overflow.any():
                return quantize.dequantize(sums, f, x.dtype).reshape(x.shape)
            f -= FLOAT_RETRY_BITS
        raise AggOverflowError(f"job {self.job.job_id}: quantized sum still overflows after "
                               f"{FLOAT_RETRIES} rescales")

    # ------------------------------------------------------------------ streaming

    def _stream(self, flat: np.ndarray, scale: int) -> tuple[np.ndarray, np.ndarray]:
        """Send every chunk of `flat` through the window; return (sums, per-chunk overflow)."""
        job, lanes, window = self.job, self.job.lanes, self.job.slot_count
        n = max(1, math.ceil(flat.size / lanes))
        chunks = np.zeros(n * lanes, dtype=np.int32)
        chunks[:flat.size] = flat
        g0 = self.next_chunk
        g = g0 + np.arange(n, dtype=np.int64)
        packets = codec.encode(job.job_id, g % window, g, ((g // window) % 2) * wire.FLAG_POOL,
                               chunks.reshape(n, lanes), scale=scale).tobytes()
        pb = self._packet_bytes

        sums = np.zeros((n, lanes), dtype=np.int32)
        overflow = np.zeros(n, dtype=bool)
        done = np.zeros(n, dtype=bool)
        sent_at = np.zeros(n, dtype=np.float64)
        deadline = np.zeros(n, dtype=np.float64)
        resent = np.zeros(n, dtype=bool)
        passed = np.zeros(n, dtype=np.int16)  # results of later chunks seen while this one was outstanding
        timers: list[tuple[float, int]] = []  # heap of (deadline, chunk); stale deadlines are skipped
        remaining = n

        def send(c: int, retx: bool) -> None:
            data = packets[c * pb:(c + 1) * pb]
            if retx:
                flags = wire.OFFSETS["flags"]
                data = data[:flags] + bytes([data[flags] | wire.FLAG_RETX]) + data[flags + 1:]
                self.stats.retransmissions += 1
                resent[c] = True
            self.sock.sendto(data, self.dest)
            self.stats.packets_sent += 1
            sent_at[c] = time.monotonic()
            deadline[c] = sent_at[c] + self.timer.rto
            heapq.heappush(timers, (deadline[c], c))

        next_new = 0  # the first chunk never sent; chunk c may go once chunk c - window is done (slot reuse)

        def send_new() -> None:
            nonlocal next_new
            while (next_new < n and self.window.allows(next_new - (n - remaining))
                   and (next_new < window or done[next_new - window])):
                send(next_new, retx=False)
                next_new += 1

        oldest = 0  # the first chunk without a result

        def fast_retransmit(c: int) -> None:
            """Results of later chunks passed every outstanding chunk below c: resend those passed often enough."""
            gaps = oldest + np.flatnonzero(~done[oldest:c] & ~resent[oldest:c])
            passed[gaps] += 1
            for lost in gaps[passed[gaps] >= FAST_RETX_RESULTS]:
                self._loss_event(sent_at[lost], time.monotonic())
                self.stats.fast_retransmits += 1
                send(int(lost), retx=True)

        send_new()
        last_progress = time.monotonic()
        while remaining:
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                _, c = heapq.heappop(timers)
                if not done[c] and deadline[c] <= now:
                    if self.timer.timeout(sent_at[c], now):
                        self._loss_event(sent_at[c], now)
                    send(c, retx=True)
            if now - last_progress > self.stall_timeout_s:
                raise AllReduceError(f"job {job.job_id}: no result for {self.stall_timeout_s:.1f} s; "
                                     f"{remaining} of {n} chunks outstanding (first: seq {g0 + int(np.argmin(done))})")
            self.sock.settimeout(max(1e-4, timers[0][0] - now) if timers else job.timeout_s)
            try:
                size = self.sock.recv_into(self._buf)
            except socket.timeout:
                continue
            c = self._accept(memoryview(self._buf)[:size], g0, n, scale, done)
            if c is None:
                continue
            sums[c] = np.frombuffer(self._buf, dtype=">i4", count=lanes, offset=wire.HEADER_BYTES)
            overflow[c] = bool(self._buf[wire.OFFSETS["flags"]] & wire.FLAG_OVERFLOW)
            done[c] = True
            remaining -= 1
            last_progress = time.monotonic()
            if not resent[c]:  # Karn: only unambiguous round trips update the estimate
                self.timer.sample(last_progress - sent_at[c])
            self.window.on_result()
            while oldest < n and done[oldest]:
                oldest += 1
            if oldest < c:
                fast_retransmit(c)
            send_new()
        self.next_chunk = g0 + n
        self.stats.chunks += n
        return sums.ravel()[:flat.size], overflow

    def _loss_event(self, sent_at: float, now: float) -> None:
        """Shrink the pacing window once per burst of losses: not again for a chunk sent before the last cut."""
        if sent_at >= self._window_cut_at:
            self.window.on_loss()
            self._window_cut_at = now

    def _accept(self, data: memoryview, g0: int, n: int, scale: int, done: np.ndarray) -> int | None:
        """The chunk index a received result completes, or None for anything to ignore."""
        if len(data) != self._packet_bytes:
            self.stats.stale_results += 1
            return None
        job_id, _slot, seq, flags, _reserved, lanes, workers, pkt_scale = wire.HEADER_STRUCT.unpack_from(data)
        c = (seq - g0) % (1 << 32)
        if (job_id != self.job.job_id or not flags & wire.FLAG_RESULT or lanes != self.job.lanes
                or c >= n or done[c]):
            self.stats.stale_results += 1
            return None
        if workers != self.job.world_size or pkt_scale != scale:
            raise AllReduceError(f"job {self.job.job_id}: result for seq {seq} sums {workers} contributions "
                                 f"at scale {pkt_scale}, expected {self.job.world_size} at scale {scale} "
                                 f"(switch children or worker set misconfigured)")
        self.stats.results += 1
        return c



class InNetworkAllReduce(AllReduce):
    """The switches sum: gradients are quantized (hosts.quantize) and streamed over UDP.

    Sums are exact for the quantized values; against the float sum each element errs by at
    most quantize.error_bound(W, f) with the f the call used (see hosts.quantize).
    """

    def __init__(self, job: JobSpec, rank: int, stall_timeout_s: float = 30.0, sock: socket.socket | None = None):
        self.client = AllReduceClient(job, rank, sock, stall_timeout_s=stall_timeout_s)
        self.rank = rank
        self.world_size = job.world_size

    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        before = self.client.stats.packets_sent
        out = self.client.allreduce(np.asarray(vec, dtype=np.float32))
        self.bytes_sent += (self.client.stats.packets_sent - before) * wire.packet_bytes(self.client.job.lanes)
        return out

    def close(self) -> None:
        self.client.close()
