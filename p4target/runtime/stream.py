"""One StreamChannel (`Session`): its arbitration data and the bounded queue of what is sent to it.

Any thread may queue a message (the packet path's PacketIns, the poller's digests, another
stream's arbitration change); the stream's own task in the server's event loop takes them in
order and writes them to the client, which `wake` (called after every put) tells it to do.

The queue is bounded so that a client that stops reading costs the switch at most STREAM_QUEUE
messages or STREAM_QUEUE_BYTES (whichever comes first), never more:
- PacketIns, digest lists, idle-timeout notifications and stream errors past the bound are
  dropped and counted (`dropped`): losing one is what a slow reader gets on BMv2 too;
- an arbitration update cannot be dropped (the client would be wrong about who is primary), so
  past the bound the stream is ended instead, with RESOURCE_EXHAUSTED naming why.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import grpc
from finsy.proto import p4r

from p4target.limits import STREAM_QUEUE, STREAM_QUEUE_BYTES
from p4target.runtime.errors import RuntimeStatus
from p4target.runtime.roles import RoleScope


class Closed:
    """The end of a stream as queued: `failure` is its status (None: it ends OK)."""

    def __init__(self, failure: RuntimeStatus | None):
        self.failure = failure


class Session:
    """One StreamChannel: arbitration data (set by p4target.runtime.arbitration) and its outbox."""

    def __init__(self, device_id: int, wake: Callable[[], None] = lambda: None):
        self.device_id = device_id
        self.role = ""
        self.scope: RoleScope | None = None  # the role config this session announced
        self.election_id: int | None = None
        self.arbitrated = False
        self.dropped = 0  # messages refused: the client was STREAM_QUEUE messages or STREAM_QUEUE_BYTES behind
        self._wake = wake
        self._lock = threading.Lock()
        self._outbox: deque[tuple[p4r.StreamMessageResponse | Closed, int]] = deque()
        self._bytes = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether the stream's end is queued (after what waits before it)."""
        return self._closed

    def _full(self, size: int) -> bool:
        return len(self._outbox) >= STREAM_QUEUE or self._bytes + size > STREAM_QUEUE_BYTES

    def _put(self, item: p4r.StreamMessageResponse | Closed, size: int) -> None:
        self._outbox.append((item, size))
        self._bytes += size
        self._wake()

    def offer(self, message: p4r.StreamMessageResponse) -> bool:
        """Queue a PacketIn, digest list, notification or stream error unless the queue is full;
        False (and counted) if dropped, so a client that stops reading never holds up the caller."""
        size = message.ByteSize()
        with self._lock:
            if self._closed or self._full(size):
                self.dropped += 1
                return False
            self._put(message, size)
        return True

    def send(self, message: p4r.StreamMessageResponse) -> None:
        """Queue an arbitration update; past the bound, end the stream (RESOURCE_EXHAUSTED) instead."""
        size = message.ByteSize()
        with self._lock:
            if self._closed:
                return
            if not self._full(size):
                self._put(message, size)
                return
        self.close(RuntimeStatus(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"the client is not reading its stream: {STREAM_QUEUE} messages or "
                                 f"{STREAM_QUEUE_BYTES >> 20} MiB were waiting for it"))

    def close(self, failure: RuntimeStatus | None = None) -> None:
        """End the stream after what is queued, or, with a `failure`, at once (what waits is dropped)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if failure is not None:
                self.dropped += len(self._outbox)
                self._outbox.clear()
                self._bytes = 0
            self._put(Closed(failure), 0)

    def take(self) -> list[p4r.StreamMessageResponse | Closed]:
        """Everything queued, in order (a Closed last if the stream ends)."""
        with self._lock:
            items = [item for item, _ in self._outbox]
            self._outbox.clear()
            self._bytes = 0
        return items
