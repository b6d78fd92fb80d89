"""All-reduce client: streams a tensor through the switches' aggregation slots over UDP.

Protocol (docs/protocol.md, "Worker behaviour"): the tensor is cut into chunks of
`job.lanes` int32 values. Chunks are numbered by a counter that every worker of the job
advances identically across calls; chunk g uses slot g % W and pool (g // W) % 2, where
W = job.slot_count is the window. Which chunk goes when (slots, pacing, retransmission
timeout, fast retransmit) is hosts.transfer.Transfer's business; this module is the thin
socket loop around it: encode the chunks, send what the Transfer says in batches
(hosts.batch_socket), hand it the results, collect the sums.

Memory: a call holds its input, its output and the window, nothing the size of the tensor besides.
The window is one packet per slot (`_window`, allocated once): a chunk is encoded into its slot's
packet when the window admits it (quantized there, for a float tensor) and stays there for any
resend, since chunk g + W takes the slot only once chunk g's result is in; a result is written
into the output as it arrives (dequantized, for a float tensor). An int32 all-reduce of 1M
elements made three fresh copies of the tensor per call before (chunks, packets, sums: 12 MB).

A job that shares its switch's slots with others (JobSpec.pool, ATP's way) hashes each chunk
into the pool; when the switch says a chunk spilled (its slot was taken), that chunk goes to
the job's parameter server instead (hosts.spill), and what the chunk's round holds at the
switch is released.

Float tensors are quantized (hosts.quantize) with the fractional bits the previous call of
the same size agreed on, and this call's exponent votes ride in the same stream, so a step
costs no extra round trip; when the votes show that those bits did not fit (or a switch
flagged an overflow) the call is repeated with the bits they agree on now. int32 tensors
are summed exactly, and an overflow flagged by the switch raises AggOverflowError instead of
returning a wrapped or clamped sum.
"""
from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable

import numpy as np

from protocol import wire
from protocol.job import JobSpec

from . import codec, quantize
from .batch_socket import BatchSocket
from .comm import AllReduce
from .pacing import make_window
from .transfer import RetransmitTimer, Transfer, TransferStats

FLOAT_RETRIES = 3  # rescale attempts after an overflow at the agreed bits (workers that disagree)
FLOAT_RETRY_BITS = 8  # fractional bits given up per attempt
_FLAGS = wire.OFFSETS["flags"]


class AllReduceError(RuntimeError):
    """The all-reduce could not produce a correct sum (stalled, misconfigured fabric, ...)."""

    exit_code = 1


class AggOverflowError(AllReduceError):
    """A switch saturated while summing: the exact int32 sum does not exist."""


class Part:
    """One tensor streamed as chunks of `lanes` int32: `read(lo, hi)` gives its elements lo..hi-1 as int32
    (quantized, for a float tensor), and its sums go to `out` through `convert` (dequantized)."""

    def __init__(self, size: int, lanes: int, read: Callable[[int, int], np.ndarray], out: np.ndarray,
                 convert: Callable[[np.ndarray], np.ndarray] = lambda sums: sums):
        self.size, self.lanes, self.read, self.out, self.convert = size, lanes, read, out.reshape(-1), convert
        self.full = size // lanes  # whole chunks; a last, partial one holds the rest (zero-padded on the wire)
        self.chunks = max(1, -(-size // lanes))

    @classmethod
    def of(cls, values: np.ndarray, lanes: int, out: np.ndarray) -> Part:
        """An int32 tensor's part: read as it is, summed into `out`."""
        flat = values.reshape(-1)
        return cls(flat.size, lanes, lambda lo, hi: flat[lo:hi], out)

    def fill(self, first: int, values: np.ndarray) -> None:
        """Chunks first, first+1, ... of this part into the rows of `values` ((k, lanes), zero-padded)."""
        k = values.shape[0]
        lo, hi = first * self.lanes, min(self.size, (first + k) * self.lanes)
        flat = self.read(lo, hi)
        whole = (hi - lo) // self.lanes
        values[:whole] = flat[:whole * self.lanes].reshape(whole, self.lanes)
        if whole < k:  # the last chunk: its values, then zeros
            rest = flat[whole * self.lanes:]
            values[whole, :rest.size] = rest
            values[whole, rest.size:] = 0

    def store(self, chunks: np.ndarray, sums: np.ndarray) -> None:
        """The sums (rows of `sums`) of this part's chunks `chunks` into the output."""
        whole = chunks < self.full
        if whole.any():
            self.out[:self.full * self.lanes].reshape(self.full, self.lanes)[chunks[whole]] = self.convert(sums[whole])
        if not whole.all():
            rest = self.size - self.full * self.lanes
            self.out[self.full * self.lanes:] = self.convert(sums[~whole][-1, :rest])


class AllReduceClient:
    """One worker's endpoint of a job: the UDP socket plus the chunk counter shared in lockstep."""

    def __init__(self, job: JobSpec, rank: int, sock: socket.socket | None = None,
                 stall_timeout_s: float = 30.0):
        if not 0 <= rank < job.world_size:
            raise AllReduceError(f"rank {rank} is outside job {job.job_id}'s {job.world_size} workers")
        self.job = job
        self.rank = rank
        self.stall_timeout_s = stall_timeout_s
        self.next_chunk = 0
        self.stats = TransferStats()
        self.timer = RetransmitTimer(job.timeout_s, job.max_timeout_s)  # both persist across calls, like TCP's RTO and cwnd
        self.window = make_window(job.pacing, job.slot_count, job.weight)
        self.scale = 0  # fractional bits of the last call (0 for int32)
        self.known: dict[int, bytes] = {}  # seq -> a result datagram seen before this worker sent anything
        self._spilled_ahead: set[int] = set()  # seqs of later calls whose spill notice came during an earlier one
        self._next_scale: dict[int, int] = {}  # tensor size -> fractional bits its last call agreed on
        if sock is None:
            me = job.workers[rank]
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((me.ip, me.port))
        self.sock = sock
        self._packet_bytes = wire.packet_bytes(job.lanes)
        self.io = BatchSocket(sock, (job.agg_ip, job.agg_port), self._packet_bytes)
        self.spill_io = BatchSocket(sock, (job.spill_ip, job.spill_port), self._packet_bytes) if job.pool else None
        # the window: row r's packet is the chunk in flight in window position r (see the module docstring);
        # its switch slot is r, or r's place in a shared pool
        position = np.arange(job.slot_count)
        self._window = codec.encode(job.job_id, pool_slots(job.job_id, position, job.slot_count, job.pool)
                                    if job.pool else position, 0, 0,
                                    np.zeros((job.slot_count, job.lanes), dtype=np.int32))
        self._window_bytes = self._window.view(np.uint8)
        rx, stride = self.io.data, self.io.data.strides[0]
        self._rx_header = np.ndarray((self.io.batch,), wire.HEADER_DTYPE, rx, 0, (stride,))
        self._rx_values = np.ndarray((self.io.batch, job.lanes), ">i4", rx, wire.HEADER_BYTES, (stride, 4))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> AllReduceClient:
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
        sums = np.empty(values.shape, dtype=np.int32)
        overflow = self._stream([Part.of(values, self.job.lanes, sums)], scale=0)
        if overflow.any():
            raise AggOverflowError(f"job {self.job.job_id}: int32 sum overflowed in {int(overflow.sum())} "
                                   f"of {overflow.size} chunks (first: chunk {int(np.argmax(overflow))})")
        self.scale = 0
        return sums

    def state_dict(self) -> dict:
        """The bits each tensor size's next call starts at: a resumed worker must quantize as it would have."""
        return {"next_scale": dict(self._next_scale)}

    def load_state_dict(self, state: dict) -> None:
        self._next_scale = {int(size): int(bits) for size, bits in state.get("next_scale", {}).items()}

    def allreduce_float(self, tensor: np.ndarray) -> np.ndarray:
        """Quantized sum at fractional bits every worker derives alike, summed as int32, dequantized.

        The first call of a tensor size agrees on the bits through the fabric first (an exponent
        vote). Later calls use the bits the previous call of that size agreed on and send this
        call's vote in the same stream; if the vote shows a value that may not have fit
        (e_max + f > HEADROOM_BITS, so it was clamped) or a switch flagged an overflow, the call
        is repeated at the bits the vote gives. Every worker sees the same votes and flags, so
        all of them take the same path.
        """
        x = np.asarray(tensor)
        out = np.empty(x.shape, dtype=x.dtype)
        e = quantize.max_exponent(x)
        f = self._next_scale.get(x.size)
        if f is None:  # the first call of this size: agree on the bits, then send the data
            e_max, done = self._tally(self.allreduce_int(quantize.exponent_vote(e))), False
        else:
            vote, votes = quantize.exponent_vote(e), np.empty(quantize.E_BUCKETS, dtype=np.int32)
            overflow = self._stream([self._quantized(x, f, out, saturate=True), Part.of(vote, self.job.lanes, votes)],
                                    scale=f)
            e_max = self._tally(votes)
            done = quantize.fits(e_max, f) and not overflow.any()
        agreed = quantize.frac_bits(e_max, self.job.world_size)
        if not done:
            f = self._float_at(x, agreed, out)
        assert f is not None, "a first call is never done: it sent at the agreed scale"
        self._next_scale[x.size] = agreed
        self.scale = f
        return out

    def _quantized(self, x: np.ndarray, f: int, out: np.ndarray, saturate: bool = False) -> Part:
        """A float tensor's part: quantized at f bits chunk by chunk as the window takes it, its sums
        dequantized into `out` as they arrive."""
        flat = x.reshape(-1)
        return Part(flat.size, self.job.lanes, lambda lo, hi: quantize.quantize(flat[lo:hi], f, saturate), out,
                    lambda sums: quantize.dequantize(sums, f, out.dtype))

    # ------------------------------------------------------------------ float helpers

    def _tally(self, votes: np.ndarray) -> int:
        """e_max of the summed exponent votes, checked to hold one vote per worker of the job."""
        e_max, workers = quantize.tally_votes(votes)
        if workers != self.job.world_size:
            raise AllReduceError(f"job {self.job.job_id}: {workers} workers voted, the job has "
                                 f"{self.job.world_size}")
        return e_max

    def _float_at(self, x: np.ndarray, f: int, out: np.ndarray) -> int:
        """The sum of `x` into `out` at f agreed bits, giving up FLOAT_RETRY_BITS per overflow; the bits used."""
        for _ in range(FLOAT_RETRIES):
            if not self._stream([self._quantized(x, f, out)], scale=f).any():
                return f
            f -= FLOAT_RETRY_BITS
        raise AggOverflowError(f"job {self.job.job_id}: quantized sum still overflows after "
                               f"{FLOAT_RETRIES} rescales")

    # ------------------------------------------------------------------ streaming

    def _stream(self, parts: list[Part], scale: int) -> np.ndarray:
        """Send every chunk of `parts` (each starting on a chunk of its own) through the window, their
        sums into the parts' outputs; return each chunk's overflow flag."""
        job, pb = self.job, self._packet_bytes
        first = np.cumsum([0] + [p.chunks for p in parts])
        n = int(first[-1])
        g0 = self.next_chunk
        overflow = np.zeros(n, dtype=bool)
        spilled = np.zeros(n, dtype=bool)  # chunks the switch sent to the parameter server (shared pool)
        transfer = Transfer(n, job.slot_count, self.timer, self.window, self.stats, time.monotonic())
        if self.known:
            self._prefill(transfer, g0, parts, first, overflow)
        if self._spilled_ahead:
            self._spill(transfer, g0, self._noticed_before(g0, n), spilled)
        while transfer.remaining:
            now = time.monotonic()
            before = transfer.next_new
            send, retx = transfer.due(now)
            if transfer.next_new > before:
                self._encode(parts, first, before, transfer.next_new, g0, scale, spilled)
            if send.size:
                rows = (g0 + send) % job.slot_count
                self._window_bytes[rows[retx] * pb + _FLAGS] |= wire.FLAG_RETX
                away = spilled[send]
                self.io.send(self._window_bytes, rows[~away] * pb)
                if self.spill_io is not None and away.any():
                    self.spill_io.send(self._window_bytes, rows[away] * pb)
            if now - transfer.last_progress > self.stall_timeout_s:
                raise AllReduceError(f"job {job.job_id}: no result for {self.stall_timeout_s:.1f} s; "
                                     f"{transfer.remaining} of {n} chunks outstanding "
                                     f"(first: seq {g0 + int(np.argmin(transfer.done))})")
            wait = transfer.next_deadline() - now
            received = self.io.recv(job.timeout_s if math.isinf(wait) else wait)
            if received:
                self._take_results(transfer, received, g0, scale, parts, first, overflow, spilled)
        self.next_chunk = g0 + n
        self.stats.chunks += n
        return overflow

    def _encode(self, parts: list[Part], first: np.ndarray, lo: int, hi: int, g0: int, scale: int,
                spilled: np.ndarray) -> None:
        """Chunks lo..hi-1 (newly admitted) into their slots' packets, a block at a time: a run of chunks whose
        slots do not wrap around the window, within one part; a spilled chunk is marked for the parameter server."""
        slots = self.job.slot_count
        start = lo
        while start < hi:
            p = int(np.searchsorted(first, start, side="right")) - 1
            slot = (g0 + start) % slots
            end = min(hi, start + slots - slot, int(first[p + 1]))
            g = g0 + np.arange(start, end)
            rows = self._window[slot:slot + g.size]
            rows["seq"] = g & 0xFFFFFFFF
            rows["flags"] = ((g // slots) % 2) * wire.FLAG_POOL | spilled[start:end] * wire.FLAG_PS
            rows["scale"] = scale
            parts[p].fill(start - int(first[p]), rows["values"])
            start = end

    def _take_results(self, transfer: Transfer, count: int, g0: int, scale: int, parts: list[Part],
                      first: np.ndarray, overflow: np.ndarray, spilled: np.ndarray) -> None:
        """Hand the `count` datagrams just received to the Transfer; store the new results' sums; spill
        the chunks the switch says spilled."""
        header = self._rx_header[:count]
        chunk = (header["seq"].astype(np.int64) - g0) % (1 << 32)
        ours = ((self.io.lengths[:count] == self._packet_bytes) & (header["job_id"] == self.job.job_id)
                & (header["flags"] & wire.FLAG_RESULT != 0) & (header["lanes"] == self.job.lanes))
        notices = ours & (header["flags"] & wire.FLAG_SPILL != 0)
        if notices.any() and self.spill_io is not None:
            here = notices & (chunk < transfer.chunks)
            # one of the next call's first W chunks: a peer there already (this call's last result reached it
            # first) sent that chunk and it spilled, so this worker must send it to the server too, next call
            ahead = notices & ~here & (chunk < transfer.chunks + self.job.slot_count)
            self._spilled_ahead.update(header["seq"][ahead].tolist())
            self._spill(transfer, g0, chunk[here], spilled)
        ours &= ~notices & (chunk < transfer.chunks)
        pos = np.flatnonzero(ours)
        self.stats.stale_results += count - pos.size
        marked = header["flags"][pos] & wire.FLAG_ECN != 0
        new = pos[transfer.on_results(chunk[pos], time.monotonic(), marked)]
        wrong = (header["workers"][new] != self.job.world_size) | (header["scale"][new] != scale)
        if wrong.any():
            bad = header[new[np.argmax(wrong)]]
            raise AllReduceError(f"job {self.job.job_id}: result for seq {int(bad['seq'])} sums {int(bad['workers'])} "
                                 f"contributions at scale {int(bad['scale'])}, expected {self.job.world_size} at "
                                 f"scale {scale} (switch children or worker set misconfigured)")
        overflow[chunk[new]] = header["flags"][new] & wire.FLAG_OVERFLOW != 0
        _store(parts, first, chunk[new], self._rx_values[new])

    def _prefill(self, transfer: Transfer, g0: int, parts: list[Part], first: np.ndarray,
                 overflow: np.ndarray) -> None:
        """Chunks whose results are `known` (a replica that takes over a seat saw them come back for the
        seat it stood by for): theirs are the sums, and they are not sent again."""
        seqs = ((g0 + np.arange(transfer.chunks)) % (1 << 32)).tolist()
        hits = np.array([i for i, seq in enumerate(seqs) if seq in self.known], dtype=np.int64)
        if hits.size:
            results = np.concatenate([codec.decode(self.known[seqs[i]], self.job.lanes) for i in hits])
            overflow[hits] = results["flags"] & wire.FLAG_OVERFLOW != 0
            _store(parts, first, hits, results["values"])
        transfer.prefill(hits)

    def _noticed_before(self, g0: int, n: int) -> np.ndarray:
        """The chunks of the call of n chunks from g0 whose spill notice came during an earlier call
        (no longer kept); the later calls' stay."""
        chunks = {seq: (seq - g0) % (1 << 32) for seq in self._spilled_ahead}
        now = [seq for seq, c in chunks.items() if c < n]
        self._spilled_ahead.difference_update(now)
        return np.array([chunks[seq] for seq in now], dtype=np.int64)

    def _spill(self, transfer: Transfer, g0: int, chunks: np.ndarray, spilled: np.ndarray) -> None:
        """Chunks whose slot in the shared pool was taken: from now on they go to the parameter server
        (at once for those sent already), and what their rounds hold at the switch is freed."""
        assert self.spill_io is not None, "only a job with a shared pool spills"
        fresh = np.unique(chunks[~transfer.done[chunks] & ~spilled[chunks]])
        if not fresh.size:
            return
        pb = self._packet_bytes
        self.stats.spilled += int(fresh.size)
        spilled[fresh] = True
        sent = fresh[fresh < transfer.next_new]  # in the window already (later ones are marked as encoded)
        if sent.size:
            rows = (g0 + sent) % self.job.slot_count
            release = self._window_bytes.reshape(-1, pb)[rows].copy()
            release[:, _FLAGS] = (release[:, _FLAGS] & (0xFF ^ wire.FLAG_RETX)) | wire.FLAG_SPILL
            self.io.send(release.reshape(-1), np.arange(sent.size) * pb)
            transfer.resend_now(sent)
            self._window_bytes[rows * pb + _FLAGS] |= wire.FLAG_PS


def _store(parts: list[Part], first: np.ndarray, chunks: np.ndarray, sums: np.ndarray) -> None:
    """The sums (rows of `sums`) of the call's chunks `chunks` into the outputs of the parts they belong to."""
    which = np.searchsorted(first, chunks, side="right") - 1
    for p, part in enumerate(parts):
        mine = which == p
        if mine.any():
            part.store(chunks[mine] - first[p], sums[mine])


def pool_slots(job_id: int, g: np.ndarray, window: int, pool: int) -> np.ndarray:
    """The shared-pool slot of each chunk g. As ATP's workers map the positions of their window to
    aggregators by a hash, the job's window lands at an offset hashed from its id and goes around the
    pool from there: distinct slots within the window (chunk g + W reuses g's slot, in the other pool
    as in a region of its own), and jobs whose windows overlap there share those slots."""
    offset = ((job_id * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) >> 32
    return (offset + np.asarray(g, dtype=np.int64) % window) % pool


class InNetworkAllReduce(AllReduce):
    """The switches sum: gradients are quantized (hosts.quantize) and streamed over UDP.

    Sums are exact for the quantized values; against the float sum each element errs by at
    most quantize.error_bound(W, f) with the f the call used (see hosts.quantize).
    """

    def __init__(self, job: JobSpec, rank: int, stall_timeout_s: float = 30.0, sock: socket.socket | None = None):
        self.client = AllReduceClient(job, rank, sock, stall_timeout_s=stall_timeout_s)
        self.rank = rank
        self.world_size = job.world_size

    def run_metrics(self) -> dict[str, int]:
        return {"spilled_chunks": self.client.stats.spilled} if self.client.job.pool else {}

    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        before = self.client.stats.packets_sent
        out = self.client.allreduce(np.asarray(vec, dtype=np.float32))
        self._bytes_sent += (self.client.stats.packets_sent - before) * wire.packet_bytes(self.client.job.lanes)
        return out

    def state_dict(self) -> dict:
        return self.client.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.client.load_state_dict(state)

    def close(self) -> None:
        self.client.close()
