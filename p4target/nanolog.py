"""BMv2's event logger (`--nanolog ADDR`): a nanomsg PUB socket carrying one binary message per event.

Mininet P4 frameworks (BMv2's p4_mininet.py, the tutorials' p4runtime_switch.py, p4-utils, p4app) start every
switch with `--nanolog ipc:///tmp/bm-N-log.ipc`, and BMv2's `nanomsg_client.py` reads it. A message is BMv2's
packed header, then the event's ints (little-endian, as BMv2 writes its packed structs on x86):

    int type; u64 switch_id; u32 cxt_id; u64 sig; u64 packet_id; u64 copy_id;  then  int fields...

libnanomsg (Debian's libnanomsg5, scripts/setup.sh) is loaded with ctypes when a switch is given --nanolog.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import enum
import struct
import threading

HEADER = struct.Struct("<iQIQQQ")
FIELD = struct.Struct("<i")
_AF_SP, _NN_PUB, _NN_SUB = 1, 32, 33  # nanomsg's domain and its pub/sub protocols (nn.h, pubsub.h)
_NN_SUB_SUBSCRIBE, _NN_SOL_SOCKET, _NN_RCVTIMEO, _NN_LINGER = 1, 0, 5, 1
_NN_DONTWAIT = 1
_NN_STAT_ESTABLISHED_CONNECTIONS = 101
_LIBRARY = "libnanomsg.so.5"


class Event(enum.IntEnum):
    """BMv2's event kinds (its EventType), with their numbers on the wire."""

    PACKET_IN = 0
    PACKET_OUT = 1
    PARSER_START = 2
    PARSER_DONE = 3
    PARSER_EXTRACT = 4
    DEPARSER_START = 5
    DEPARSER_DONE = 6
    DEPARSER_EMIT = 7
    CHECKSUM_UPDATE = 8
    PIPELINE_START = 9
    PIPELINE_DONE = 10
    CONDITION_EVAL = 11
    TABLE_HIT = 12
    TABLE_MISS = 13
    ACTION_EXECUTE = 14
    CONFIG_CHANGE = 999


class NanomsgError(Exception):
    """libnanomsg is missing, or a socket could not be opened/bound (one line)."""


_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """libnanomsg, loaded once, with the prototypes used here."""
    global _lib
    with _lib_lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("nanomsg") or _LIBRARY, use_errno=True)
            except OSError:
                raise NanomsgError("libnanomsg is not installed (Debian package libnanomsg5; "
                                   "scripts/setup.sh installs it)") from None
            lib.nn_socket.argtypes = [ctypes.c_int, ctypes.c_int]
            lib.nn_bind.argtypes = lib.nn_connect.argtypes = [ctypes.c_int, ctypes.c_char_p]
            lib.nn_send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            lib.nn_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            lib.nn_setsockopt.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
            lib.nn_get_statistic.restype = ctypes.c_uint64
            lib.nn_get_statistic.argtypes = [ctypes.c_int, ctypes.c_int]
            lib.nn_strerror.restype = ctypes.c_char_p
            lib.nn_strerror.argtypes = [ctypes.c_int]
            _lib = lib
        return _lib


def _check(lib: ctypes.CDLL, result: int, what: str) -> int:
    if result < 0:
        raise NanomsgError(f"{what}: {lib.nn_strerror(lib.nn_errno()).decode()}")
    return result


def _int_option(lib: ctypes.CDLL, sock: int, option: int, value: int) -> None:
    v = ctypes.c_int(value)
    _check(lib, lib.nn_setsockopt(sock, _NN_SOL_SOCKET, option, ctypes.byref(v), ctypes.sizeof(v)), "nn_setsockopt")


class EventLogger:
    """The PUB socket bound at ADDR; `send` publishes one event (never blocks: PUB drops for slow readers)."""

    def __init__(self, addr: str, device_id: int = 0):
        lib = self._lib = library()
        self.addr = addr
        self.device_id = device_id
        self.sock = _check(lib, lib.nn_socket(_AF_SP, _NN_PUB), "--nanolog: nn_socket")
        _int_option(lib, self.sock, _NN_LINGER, 0)
        try:
            _check(lib, lib.nn_bind(self.sock, addr.encode()), f"--nanolog {addr}")
        except NanomsgError:
            lib.nn_close(self.sock)
            raise

    def send(self, kind: Event, packet_id: int, copy_id: int, *fields: int) -> None:
        """One event of a packet: BMv2's header (context 0, signature 0), then `fields` as ints."""
        msg = HEADER.pack(kind, self.device_id, 0, 0, packet_id, copy_id) + b"".join(FIELD.pack(f) for f in fields)
        self._lib.nn_send(self.sock, msg, len(msg), _NN_DONTWAIT)

    def send_function(self) -> int:
        """The address of nn_send, for the native engine to publish from its loop (same socket, same format)."""
        address = ctypes.cast(self._lib.nn_send, ctypes.c_void_p).value
        assert address is not None
        return address

    def close(self) -> None:
        if self.sock >= 0:
            self._lib.nn_close(self.sock)
            self.sock = -1


def decode(msg: bytes) -> tuple[Event, int, int, int, tuple[int, ...]]:
    """(kind, switch_id, packet_id, copy_id, fields) of one message."""
    kind, switch_id, _cxt, _sig, packet_id, copy_id = HEADER.unpack_from(msg)
    body = msg[HEADER.size:]
    return Event(kind), switch_id, packet_id, copy_id, struct.unpack(f"<{len(body) // 4}i", body)


class Subscriber:
    """A SUB socket connected to ADDR (a reader, for tests and tools): `recv` returns one message or None."""

    def __init__(self, addr: str, timeout_ms: int):
        lib = self._lib = library()
        self.sock = _check(lib, lib.nn_socket(_AF_SP, _NN_SUB), "nn_socket")
        _check(lib, lib.nn_setsockopt(self.sock, _NN_SUB, _NN_SUB_SUBSCRIBE, b"", 0), "nn_setsockopt")
        _int_option(lib, self.sock, _NN_RCVTIMEO, timeout_ms)
        _check(lib, lib.nn_connect(self.sock, addr.encode()), f"nn_connect {addr}")

    def connected(self) -> bool:
        """Whether the connection to the publisher is up (nothing published before it arrives here)."""
        return self._lib.nn_get_statistic(self.sock, _NN_STAT_ESTABLISHED_CONNECTIONS) > 0

    def recv(self) -> bytes | None:
        buf = ctypes.create_string_buffer(65536)
        n = self._lib.nn_recv(self.sock, buf, len(buf), 0)
        return None if n < 0 else buf.raw[:n]

    def close(self) -> None:
        self._lib.nn_close(self.sock)
