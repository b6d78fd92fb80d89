"""Ring all-reduce and parameter server over real loopback TCP train exactly like one process.

4 workers (threads), 50 steps of the MLP on digits: every worker ends with bit-identical
weights, and they equal a single-process run fed the same global batches within 1e-5.
"""
import threading

import numpy as np
import pytest
import torch
import workers as wk

from hosts.agent_config import TrainConfig
from hosts.comm import Endpoint, connect
from hosts.data import load_dataset
from hosts.model import build_model, flat_params
from hosts.ps import CHUNK_BYTES, ParameterServer, ParameterServerClient
from hosts.ring import SLICE_BYTES, RingAllReduce, slices
from hosts.train import train_reference, train_worker

W = 4
CONFIG = TrainConfig(steps=50, batch_size=16, hidden=32, eval_every=0, seed=3)
TOL = 1e-5


@pytest.fixture(scope="module")
def data():
    torch.set_num_threads(1)
    return load_dataset("digits", CONFIG.seed)


@pytest.fixture(scope="module")
def reference(data):
    params = flat_params(train_reference(CONFIG, data, W))
    initial = flat_params(build_model(CONFIG.model, data.features, data.classes, CONFIG.seed, CONFIG.hidden))
    assert (params - initial).abs().max().item() > 1e-2  # the 50 steps really moved the weights
    return params


def assert_matches_reference(models, reference):
    params = [flat_params(m) for m in models]
    for p in params[1:]:
        assert torch.equal(p, params[0]), "workers' weights diverged"
    diff = (params[0] - reference).abs().max().item()
    assert diff <= TOL, f"max abs weight difference {diff} > {TOL}"


def test_ring_training_equals_single_process(data, reference):
    peers = wk.endpoints(W)

    def rank_main(rank):
        with RingAllReduce(peers, rank, timeout_s=30) as comm:
            model = train_worker(CONFIG, data, comm)
            return model, comm.bytes_sent

    results, errors = wk.run_ranks(rank_main, W)
    assert errors == [None] * W
    assert_matches_reference([m for m, _ in results], reference)
    n = reference.numel()
    # ring: each step every rank sends 2 (W-1) chunks of ~n/W floats (plus 16-byte frame headers)
    for _, sent in results:
        assert 50 * 2 * (W - 1) * (n // W) * 4 <= sent <= 50 * 2 * (W - 1) * ((n // W + 1) * 4 + 16)


def test_parameter_server_training_equals_single_process(data, reference):
    server_ep = Endpoint("ps", "127.0.0.1", wk.free_ports(1)[0])
    names = [f"h{i + 1}" for i in range(W)]
    server = ParameterServer(server_ep, names, timeout_s=30)
    rounds = []
    server_thread = threading.Thread(target=lambda: rounds.append(server.serve()))
    server_thread.start()

    def rank_main(rank):
        with ParameterServerClient(server_ep, names[rank], rank, W, timeout_s=30) as comm:
            return train_worker(CONFIG, data, comm)

    try:
        models, errors = wk.run_ranks(rank_main, W)
    finally:
        server_thread.join(30)
        server.close()
    assert errors == [None] * W
    assert rounds == [CONFIG.steps]
    assert_matches_reference(models, reference)


def test_ring_sums_uneven_vectors_exactly():
    """Chunks of unequal length (n not divisible by W) and n < W still sum correctly."""
    peers = wk.endpoints(3)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(10).astype(np.float32) for _ in range(3)]

    def rank_main(rank):
        with RingAllReduce(peers, rank, timeout_s=10) as comm:
            return comm.allreduce(inputs[rank]), comm.allreduce(inputs[rank][:2])

    results, errors = wk.run_ranks(rank_main, 3)
    assert errors == [None] * 3
    for full, tiny in results:
        np.testing.assert_allclose(full, np.sum(inputs, axis=0), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(tiny, np.sum([x[:2] for x in inputs], axis=0), rtol=1e-6, atol=1e-6)
        assert full.tobytes() == results[0][0].tobytes()


def test_ring_sends_chunks_larger_than_a_slice_in_slices_and_sums_exactly():
    """Chunks of several slices (uneven, so slice lengths differ between chunks) go one frame per
    slice, and the sum is still exact and the same on every rank."""
    w = 3
    n = w * (5 * SLICE_BYTES // 4 + SLICE_BYTES // 2) + 2  # 7 slices a chunk, 8 in the two a value longer
    peers = wk.endpoints(w)
    inputs = [np.arange(n, dtype=np.float32) * (rank + 1) for rank in range(w)]

    def rank_main(rank):
        with RingAllReduce(peers, rank, timeout_s=10) as comm:
            hello = comm.bytes_sent
            return comm.allreduce(inputs[rank]), comm.bytes_sent - hello

    results, errors = wk.run_ranks(rank_main, w)
    assert errors == [None] * w
    chunks = np.array_split(np.zeros(n, dtype=np.float32), w)
    for rank, (out, sent) in enumerate(results):
        np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32) * 6)
        # rank r sends chunk r, then what it received at each step but the last: 2 (w-1) chunks
        sent_chunks = [(rank - t) % w for t in range(w - 1)] + [(rank + 1 - t) % w for t in range(w - 1)]
        frames = sum(len(slices(chunks[c])) for c in sent_chunks)
        assert frames >= 2 * (w - 1) * 7
        assert sent == sum(chunks[c].nbytes for c in sent_chunks) + 16 * frames


def test_a_small_chunk_still_goes_in_slices_and_a_tiny_one_whole():
    assert [len(slices(np.zeros(n, dtype=np.float32))) for n in (100, 1024, 2048, 4096, 8192, 65536)] == \
        [1, 1, 2, 4, 4, 16]


def test_ring_of_one_returns_its_input_without_sockets():
    with RingAllReduce([Endpoint("h1", "127.0.0.1", 1)], 0) as comm:  # port 1: never bound for W=1
        vec = np.arange(5, dtype=np.float32)
        out = comm.allreduce(vec)
    np.testing.assert_array_equal(out, vec)
    assert out is not vec and comm.bytes_sent == 0


def _serve(names):
    """A parameter server for `names` on a free loopback port, serving on a thread: (endpoint, thread, server)."""
    ep = Endpoint("ps", "127.0.0.1", wk.free_ports(1)[0])
    server = ParameterServer(ep, names, timeout_s=30)
    thread = threading.Thread(target=server.serve)
    thread.start()
    return ep, thread, server


def test_parameter_server_sends_each_piece_of_the_sum_once_it_has_it():
    """The sum's first piece comes back while the workers still hold the rest of their frames: the
    server's link carries contributions in and sums out at once (hosts.models.analytic)."""
    names = ["h1", "h2"]
    ep, thread, server = _serve(names)
    n = 3 * CHUNK_BYTES // 4 + 5  # three whole pieces and a partial one
    vecs = [np.arange(n, dtype=np.float32) * (r + 1) for r in range(2)]
    conns = [connect(ep, name, r, "test", 10) for r, name in enumerate(names)]
    try:
        for conn, vec in zip(conns, vecs):
            conn.send_header(4 * n)
            conn.send_part(vec[:CHUNK_BYTES // 4].tobytes())
        for conn in conns:
            assert conn.recv_header() == 4 * n
            first = np.frombuffer(conn.recv_part(CHUNK_BYTES), dtype=np.float32)
            np.testing.assert_array_equal(first, (vecs[0] + vecs[1])[:CHUNK_BYTES // 4])
        for conn, vec in zip(conns, vecs):
            conn.send_part(vec[CHUNK_BYTES // 4:].tobytes())
        for conn in conns:
            rest = np.frombuffer(conn.recv_part(4 * n - CHUNK_BYTES), dtype=np.float32)
            np.testing.assert_array_equal(rest, (vecs[0] + vecs[1])[CHUNK_BYTES // 4:])
            conn.send(b"")
    finally:
        thread.join(30)
        server.close()
        for conn in conns:
            conn.close()
    assert server.rounds == 1


def test_parameter_server_sums_frames_larger_than_the_socket_buffers():
    """Workers send while they receive: 32 MB frames cannot deadlock against sums coming back."""
    names = ["h1", "h2", "h3"]
    ep, thread, server = _serve(names)
    n = 8_000_003

    def rank_main(rank):
        with ParameterServerClient(ep, names[rank], rank, 3, timeout_s=30) as comm:
            return comm.allreduce(np.full(n, rank + 1, dtype=np.float32))

    try:
        results, errors = wk.run_ranks(rank_main, 3)
    finally:
        thread.join(30)
        server.close()
    assert errors == [None] * 3
    assert all(out.shape == (n,) and np.all(out == 6) for out in results)
