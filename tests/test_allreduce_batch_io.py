"""hosts.batch_socket: many UDP datagrams per system call (sendmmsg/recvmmsg), over real loopback sockets."""
import socket

import numpy as np
import pytest

from hosts.batch_socket import BatchSocket


@pytest.fixture
def pair():
    a, b = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
    for s in (a, b):
        s.bind(("127.0.0.1", 0))
    yield a, b
    a.close()
    b.close()


def test_send_takes_each_datagram_from_its_offset_in_order(pair):
    a, b = pair
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)  # room for all 1000 at once
    io = BatchSocket(a, b.getsockname(), payload_bytes=100, batch=64)
    buffer = np.random.default_rng(1).integers(0, 256, size=1000 * 100, dtype=np.uint8)
    order = np.random.default_rng(2).permutation(1000)
    io.send(buffer, order * 100)  # 1000 datagrams: 16 system calls of up to 64
    b.settimeout(2)
    for k in order:
        data, src = b.recvfrom(2048)
        assert data == buffer[k * 100:(k + 1) * 100].tobytes() and src == a.getsockname()


def test_recv_takes_up_to_a_batch_and_reports_lengths(pair):
    a, b = pair
    io = BatchSocket(a, b.getsockname(), payload_bytes=100, batch=32)
    sizes = [100] * 40 + [7, 164, 500]  # the last: longer than a receive buffer (100 + 64)
    for i, size in enumerate(sizes):
        b.sendto(bytes([i]) * size, a.getsockname())
    got = []
    while len(got) < len(sizes):
        k = io.recv(1.0)
        assert 0 < k <= 32
        got += [(int(io.lengths[i]), bytes(io.data[i, :io.lengths[i]])) for i in range(k)]
    assert [n for n, _ in got] == sizes[:-1] + [164]  # truncated to the buffer, so not a packet's length
    assert all(data == bytes([i]) * n for i, (n, data) in enumerate(got))
    assert io.recv(0.05) == 0  # nothing more: returns after the timeout
