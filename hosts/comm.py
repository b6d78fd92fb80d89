"""The AllReduce interface the trainer talks to, and the TCP framing the host baselines share.

Implementations:
- hosts.allreduce.InNetworkAllReduce: the switches sum (UDP).
- hosts.ps.ParameterServerClient: one host sums (TCP).
- hosts.ring.RingAllReduce: reduce-scatter + all-gather between the workers (TCP).

Every implementation returns bit-identical sums on every rank (one place computes each
element's sum and everyone receives it), so replicas never drift apart.

TCP frames are `magic(4) tag(u32) length(u64) payload`; the tag is a per-connection frame
counter both ends advance in lockstep, so a lost or reordered message cannot go unnoticed.
Every failure names the peer: a crashed peer surfaces as "closed the connection".
"""
from __future__ import annotations

import abc
import socket
import struct
import time
from dataclasses import dataclass

import numpy as np

MAGIC = b"AGN1"
_FRAME = struct.Struct("!4sIQ")
WIRE_DTYPE = np.dtype("<f4")  # gradients travel as little-endian float32
HELLO_TAG = 0xFFFFFFFF  # the first frame on a connection: payload "RANK NAME"
CONNECT_RETRY_S = 0.05


class CommError(RuntimeError):
    """A peer crashed, hung, or spoke nonsense; the message names the peer."""

    exit_code = 1


@dataclass(frozen=True)
class Endpoint:
    """A named process reachable over TCP."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name} ({self.host}:{self.port})"


class AllReduce(abc.ABC):
    """Sum a float32 vector over all workers; every rank gets the same result."""

    rank: int
    world_size: int
    _bytes_sent: int = 0

    @property
    def bytes_sent(self) -> int:
        """Bytes this rank has put on the wire so far."""
        return self._bytes_sent

    @abc.abstractmethod
    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        """The element-wise sum of `vec` over all ranks (float32, same shape)."""

    def step_metrics(self) -> dict[str, int]:
        """What this scheme adds to the metrics record of the step that just finished (default: nothing)."""
        return {}

    def run_metrics(self) -> dict[str, int]:
        """What this scheme adds to the worker's result at the end of the run (default: nothing)."""
        return {}

    def closed_rounds(self, first: int, count: int) -> list[np.ndarray] | None:
        """The sums of steps first .. first + count - 1 when every one was completed without this rank (a
        laggard under bounded staleness, hosts.host_agg), so the rank applies them instead of computing
        them (a training step, or a model's iteration of `count` buckets); default: never (every step
        waits for every rank)."""
        return None

    def state_dict(self) -> dict:
        """What a worker resumed from a checkpoint needs so that its sums are the ones an
        uninterrupted worker computes (saved with the model; default: nothing)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict() returned."""
        if state:
            raise CommError(f"{type(self).__name__} keeps no state, got {sorted(state)}")

    @abc.abstractmethod
    def close(self) -> None:
        """Release this scheme's sockets (every scheme has some)."""

    def __enter__(self) -> AllReduce:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Connection:
    """One TCP connection to a named peer, speaking tagged frames."""

    def __init__(self, sock: socket.socket, peer: str, context: str, timeout_s: float):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout_s)
        self.sock = sock
        self.peer = peer
        self.context = context
        self.timeout_s = timeout_s
        self.sent = 0
        self.received = 0
        self.bytes_sent = 0

    def _fail(self, what: str) -> CommError:
        return CommError(f"{self.context}: peer {self.peer} {what}")

    def send(self, payload: bytes | memoryview, tag: int | None = None) -> None:
        """Send one frame; tag defaults to the next frame number."""
        self.send_header(len(payload), tag)
        self.send_part(payload)

    def send_header(self, length: int, tag: int | None = None) -> None:
        """Start a frame of `length` payload bytes, sent on with send_part (a frame streamed in pieces)."""
        if tag is None:
            tag, self.sent = self.sent, self.sent + 1
        self.send_part(_FRAME.pack(MAGIC, tag, length))

    def send_part(self, data: bytes | memoryview) -> None:
        """Send bytes of the frame under way."""
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise self._fail(f"accepted no data for {self.timeout_s:g} s") from None
        except OSError as exc:
            raise self._fail(f"closed the connection ({exc.strerror or exc})") from None
        self.bytes_sent += len(data)

    def recv(self, tag: int | None = None) -> bytearray:
        """Receive one frame, checking its tag (default: the next frame number)."""
        return self.recv_part(self.recv_header(tag))

    def recv_header(self, tag: int | None = None) -> int:
        """Start receiving a frame, checking its tag: its payload length, read on with recv_part."""
        if tag is None:
            tag, self.received = self.received, self.received + 1
        magic, got_tag, length = _FRAME.unpack(self.recv_part(_FRAME.size))
        if magic != MAGIC:
            raise self._fail(f"sent a malformed frame (magic {magic!r})")
        if got_tag != tag:
            raise self._fail(f"is out of step: sent frame {got_tag}, expected {tag}")
        return length

    def send_array(self, vec: np.ndarray) -> None:
        self.send(np.ascontiguousarray(vec, dtype=WIRE_DTYPE).data.cast("B"))

    def recv_array(self, count: int) -> np.ndarray:
        data = self.recv()
        if len(data) != count * WIRE_DTYPE.itemsize:
            raise self._fail(f"sent {len(data)} bytes, expected {count} float32 values")
        return np.frombuffer(data, dtype=WIRE_DTYPE).astype(np.float32)

    def recv_part(self, n: int) -> bytearray:
        """The next `n` bytes of the frame under way."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                k = self.sock.recv_into(view[got:])
            except TimeoutError:
                raise self._fail(f"sent nothing for {self.timeout_s:g} s") from None
            except OSError as exc:
                raise self._fail(f"closed the connection ({exc.strerror or exc})") from None
            if k == 0:
                raise self._fail("closed the connection")
            got += k
        return buf

    def close(self) -> None:
        """Shut down first: that wakes a thread still blocked sending on this socket."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected any more
        self.sock.close()


def listen(endpoint: Endpoint, backlog: int) -> socket.socket:
    """A listening socket on the endpoint's address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((endpoint.host, endpoint.port))
    except OSError as exc:
        sock.close()
        raise CommError(f"{endpoint.name}: cannot listen on {endpoint.host}:{endpoint.port}: {exc.strerror}") from None
    sock.listen(backlog)
    return sock


def connect(peer: Endpoint, me: str, rank: int, context: str, timeout_s: float) -> Connection:
    """Connect to `peer` (retrying while it starts up) and introduce ourselves."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sock = socket.create_connection((peer.host, peer.port), timeout=max(0.1, deadline - time.monotonic()))
            break
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise CommError(f"{context}: cannot reach peer {peer} within {timeout_s:g} s "
                                f"({exc.strerror or exc})") from None
            time.sleep(CONNECT_RETRY_S)
    conn = Connection(sock, str(peer), context, timeout_s)
    conn.send(f"{rank} {me}".encode(), tag=HELLO_TAG)
    return conn


def accept(server: socket.socket, context: str, timeout_s: float) -> tuple[int, str, Connection]:
    """Accept one peer and read its introduction: (rank, name, connection)."""
    server.settimeout(timeout_s)
    try:
        sock, addr = server.accept()
    except TimeoutError:
        raise CommError(f"{context}: no peer connected within {timeout_s:g} s") from None
    conn = Connection(sock, f"at {addr[0]}:{addr[1]}", context, timeout_s)
    hello = conn.recv(tag=HELLO_TAG).decode(errors="replace").split(" ", 1)
    if len(hello) != 2 or not hello[0].isdigit():
        raise CommError(f"{context}: peer at {addr[0]}:{addr[1]} sent a malformed introduction")
    rank, name = int(hello[0]), hello[1]
    conn.peer = f"{name} ({addr[0]}:{addr[1]})"
    return rank, name, conn

