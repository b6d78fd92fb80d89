"""Ring all-reduce baseline over TCP: reduce-scatter then all-gather, W-1 steps each.

Rank r sends to rank r+1 and receives from rank r-1. The vector is cut into W chunks.
Reduce-scatter step s: send chunk (r - s) mod W, receive chunk (r - s - 1) mod W and add
it in; afterwards rank r holds the full sum of chunk (r + 1) mod W. All-gather step s:
send chunk (r + 1 - s) mod W, receive chunk (r - s) mod W and keep it. Each chunk's sum
is computed on one rank and copied to the others, so all ranks end bit-identical.

Sends run on a helper thread while the main thread receives: with chunks larger than the
socket buffers, "everyone sends, then everyone receives" would deadlock.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .comm import AllReduce, CommError, Connection, Endpoint, accept, connect, listen


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
        chunks = np.array_split(out, w)  # views into `out`
        for s in range(w - 1):
            chunks[(r - s - 1) % w] += self._exchange(chunks[(r - s) % w], chunks[(r - s - 1) % w].size)
        for s in range(w - 1):
            chunks[(r - s) % w][:] = self._exchange(chunks[(r + 1 - s) % w], chunks[(r - s) % w].size)
        return out.reshape(np.shape(vec))

    def _exchange(self, send: np.ndarray, recv_count: int) -> np.ndarray:
        """Send `send` to the right while receiving `recv_count` values from the left."""
        assert self._sender and self._right and self._left, "a ring of one exchanges nothing"
        pending = self._sender.submit(self._right.send_array, send.copy())
        received = self._left.recv_array(recv_count)  # on failure close() abandons the send
        pending.result()
        return received

    def close(self) -> None:
        if self._sender:
            self._sender.shutdown(wait=False, cancel_futures=True)
        for conn in (self._right, self._left):
            if conn:
                conn.close()
