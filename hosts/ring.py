"""Ring all-reduce baseline over TCP: reduce-scatter then all-gather, W-1 steps each.

Rank r sends to rank r+1 and receives from rank r-1. The vector is cut into W chunks.
Reduce-scatter step s: send chunk (r - s) mod W, receive chunk (r - s - 1) mod W and add
it in; afterwards rank r holds the full sum of chunk (r + 1) mod W. All-gather step s:
send chunk (r + 1 - s) mod W, receive chunk (r - s) mod W and keep it. Each chunk's sum
is computed on one rank and copied to the others, so all ranks end bit-identical.

Every step's chunk travels in slices of at most SLICE_BYTES, and a slice of the next step leaves
as soon as the same slice of this step is in and added: the steps overlap, as NCCL's and Gloo's
rings pipeline them. Without slices each of the 2 (W-1) steps would wait for its whole chunk's
last byte before its neighbour's link had anything to send, and the links would idle between
steps (issue 23 measured the ring 11% over its byte count that way at 8 workers).

Sends run on a helper thread, in order, while the main thread receives: with chunks larger than
the socket buffers, "everyone sends, then everyone receives" would deadlock.
"""
from __future__ import annotations

import math
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .comm import WIRE_DTYPE, AllReduce, CommError, Connection, Endpoint, accept, connect, listen

SLICE_BYTES = 16384  # about 11 full frames: small against a bucket's chunk, large against a loop turn
MIN_SLICES = 4  # a small chunk still overlaps its steps: 16 KiB goes as four slices of three frames
MIN_SLICE_BYTES = 4096


def slices(chunk: np.ndarray) -> list[np.ndarray]:
    """A chunk's slices (views), a function of its length alone, so sender and receiver agree."""
    nbytes = chunk.size * WIRE_DTYPE.itemsize
    count = max(1, math.ceil(nbytes / SLICE_BYTES), min(MIN_SLICES, nbytes // MIN_SLICE_BYTES))
    return np.array_split(chunk, count)


class RingAllReduce(AllReduce):
    """One rank of a ring; `peers` lists every rank's endpoint in rank order."""

    def __init__(self, peers: list[Endpoint], rank: int, timeout_s: float = 30.0):
        if not 0 <= rank < len(peers):
            raise CommError(f"ring: rank {rank} is outside the {len(peers)} peers")
        self.rank = rank
        self.world_size = len(peers)
        me = peers[rank]
        self.context = f"ring {me.name}"
        self._right: Connection | None = None
        self._left: Connection | None = None
        self._sender: ThreadPoolExecutor | None = None
        if self.world_size == 1:
            return
        left = peers[(rank - 1) % self.world_size]
        server = listen(me, backlog=1)
        try:
            self._right = connect(peers[(rank + 1) % self.world_size], me.name, rank, self.context, timeout_s)
            got_rank, got_name, self._left = accept(server, self.context, timeout_s)
        except CommError:
            self.close()
            raise
        finally:
            server.close()
        if (got_rank, got_name) != ((rank - 1) % self.world_size, left.name):
            self.close()
            raise CommError(f"{self.context}: expected left neighbour {left.name}, "
                            f"got {got_name!r} claiming rank {got_rank}")
        self._left.peer = str(left)
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.context)

    @property
    def bytes_sent(self) -> int:
        return self._right.bytes_sent if self._right else 0

    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        out = np.array(vec, dtype=np.float32).reshape(-1)
        w, r = self.world_size, self.rank
        if w == 1:
            return out.reshape(np.shape(vec))
        left = self._left
        assert left is not None, "a ring of more than one has a left neighbour"
        chunks = np.array_split(out, w)  # views into `out`
        # Step t receives chunk recv[t] and sends what it received at step t - 1 (step 0: chunk r):
        # reduce-scatter adds what it receives, all-gather keeps it.
        recv = [(r - t - 1) % w for t in range(w - 1)] + [(r - t) % w for t in range(w - 1)]
        sending: deque[Future] = deque(self._send(piece) for piece in slices(chunks[r]))
        for t, index in enumerate(recv):
            for piece in slices(chunks[index]):
                received = left.recv_array(piece.size)  # on failure close() abandons the sends
                if t < w - 1:
                    piece += received
                else:
                    piece[:] = received
                if t + 1 < len(recv):
                    sending.append(self._send(piece))
                while sending and sending[0].done():
                    sending.popleft().result()  # a failed send raises here
        for pending in sending:
            pending.result()
        return out.reshape(np.shape(vec))

    def _send(self, piece: np.ndarray) -> Future:
        """Queue a copy of `piece` for the right neighbour (the view may change before it goes)."""
        assert self._sender and self._right, "a ring of one sends nothing"
        return self._sender.submit(self._right.send_array, piece.copy())

    def close(self) -> None:
        if self._sender:
            self._sender.shutdown(wait=False, cancel_futures=True)
        for conn in (self._right, self._left):
            if conn:
                conn.close()
