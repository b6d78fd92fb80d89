"""A UDP socket that moves many datagrams per system call: Linux sendmmsg/recvmmsg via ctypes.

One `sendto` or `recv_into` per packet costs a system call and a few Python calls each, which
caps a worker near 30-50k packets/s. Here a batch of up to `batch` datagrams goes out or comes
in with one call, and the message headers are numpy views, so filling them for a batch is a
few vectorised assignments.

    io = BatchSocket(sock, ("10.0.255.254", 48864), payload_bytes=144)
    io.send(buffer, offsets)             # len(offsets) datagrams of payload_bytes each, from buffer
    k = io.recv(timeout_s)               # up to `batch` datagrams; io.data[:k], io.lengths[:k]
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os
import select
import socket

import numpy as np

DEFAULT_BATCH = 256
SOCKET_BUFFER_BYTES = 1 << 22  # about 3000 full-size datagrams queued before the kernel drops
_MSG_DONTWAIT = 0x40


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


class _SockaddrIn(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_uint16), ("addr", ctypes.c_uint8 * 4),
                ("zero", ctypes.c_uint8 * 8)]


# numpy views of the C structures: the fields written per batch, at the offsets C uses.
_IOVEC = np.dtype({"names": ["base", "len"], "formats": [np.uintp, np.uintp],
                   "offsets": [_Iovec.base.offset, _Iovec.len.offset], "itemsize": ctypes.sizeof(_Iovec)})
_MMSGHDR = np.dtype({"names": ["name", "namelen", "iov", "iovlen", "len"],
                     "formats": [np.uintp, np.uint32, np.uintp, np.uintp, np.uint32],
                     "offsets": [_Msghdr.name.offset, _Msghdr.namelen.offset, _Msghdr.iov.offset,
                                 _Msghdr.iovlen.offset, _Mmsghdr.len.offset],
                     "itemsize": ctypes.sizeof(_Mmsghdr)})


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    libc.sendmmsg.restype = ctypes.c_int
    libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    libc.recvmmsg.restype = ctypes.c_int
    return libc


class BatchSocket:
    """Batched I/O on a bound IPv4 UDP socket: sends go to `dest`, receives come from anyone.

    `payload_bytes` is the size of every datagram sent; receive buffers hold `recv_bytes`
    (default payload_bytes + 64, so a longer datagram shows up as a wrong length, not as a
    fit). The socket is switched to non-blocking mode; waiting happens in select().
    """

    def __init__(self, sock: socket.socket, dest: tuple[str, int], payload_bytes: int,
                 batch: int = DEFAULT_BATCH, recv_bytes: int | None = None):
        self.sock = sock
        self.batch = batch
        self.payload_bytes = payload_bytes
        sock.setblocking(False)
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER_BYTES)
        self._fd = sock.fileno()
        self._dest = _SockaddrIn(socket.AF_INET, socket.htons(dest[1]),
                                 (ctypes.c_uint8 * 4)(*socket.inet_aton(dest[0])))
        self._send_iov = np.zeros(batch, dtype=_IOVEC)
        self._send_msgs = self._headers(self._send_iov, ctypes.addressof(self._dest), ctypes.sizeof(self._dest))
        self._send_iov["len"] = payload_bytes
        stride = recv_bytes or payload_bytes + 64
        self.data = np.zeros((batch, stride), dtype=np.uint8)  # received datagram i is data[i, :lengths[i]]
        recv_iov = np.zeros(batch, dtype=_IOVEC)
        recv_iov["base"] = self.data.ctypes.data + stride * np.arange(batch, dtype=np.uintp)
        recv_iov["len"] = stride
        self._recv_iov = recv_iov
        self._recv_msgs = self._headers(recv_iov, 0, 0)
        self._send_msgs_at = self._send_msgs.ctypes.data
        self._recv_msgs_at = self._recv_msgs.ctypes.data

    @property
    def lengths(self) -> np.ndarray:
        """The length of each datagram the last recv() returned (the first k entries)."""
        return self._recv_msgs["len"]

    def send(self, buffer: np.ndarray, offsets: np.ndarray) -> None:
        """Send one datagram of payload_bytes from buffer[offset:] per offset, in order.

        `buffer` is a C-contiguous uint8 array that must stay alive and unchanged until this returns.
        """
        base = np.uintp(buffer.ctypes.data)
        offsets = np.asarray(offsets, dtype=np.uintp)
        for start in range(0, offsets.size, self.batch):
            part = offsets[start:start + self.batch]
            self._send_iov["base"][:part.size] = base + part
            self._send_all(part.size)

    def recv(self, timeout_s: float) -> int:
        """Take up to `batch` datagrams, waiting up to timeout_s for the first: how many."""
        got = self._take()  # a busy socket has some queued already: no select() needed
        if got or timeout_s <= 0 or not select.select([self._fd], [], [], timeout_s)[0]:
            return got
        return self._take()

    def _take(self) -> int:
        got = _libc().recvmmsg(self._fd, self._recv_msgs_at, self.batch, _MSG_DONTWAIT, None)
        if got >= 0:
            return got
        err = ctypes.get_errno()
        if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
            return 0
        raise OSError(err, f"recvmmsg: {os.strerror(err)}")

    def _send_all(self, count: int) -> None:
        sent = 0
        while sent < count:
            msgs = self._send_msgs_at + sent * _MMSGHDR.itemsize
            n = _libc().sendmmsg(self._fd, msgs, count - sent, 0)
            if n >= 0:
                sent += n
                continue
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS):
                select.select([], [self._fd], [], 0.01)  # the socket's send buffer is full: wait for room
            elif err != errno.EINTR:
                raise OSError(err, f"sendmmsg to {socket.inet_ntoa(bytes(self._dest.addr))}:"
                                   f"{socket.ntohs(self._dest.port)}: {os.strerror(err)}")

    @staticmethod
    def _headers(iov: np.ndarray, name: int, namelen: int) -> np.ndarray:
        msgs = np.zeros(iov.size, dtype=_MMSGHDR)
        msgs["name"] = name
        msgs["namelen"] = namelen
        msgs["iov"] = iov.ctypes.data + _IOVEC.itemsize * np.arange(iov.size, dtype=np.uintp)
        msgs["iovlen"] = 1
        return msgs
