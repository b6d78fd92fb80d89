"""The all-reduce client over real UDP sockets, through aggnet.p4 Pipelines (tests/data/aggnet/fabric.py)."""
import socket
import struct
import threading
import time

import fabric as fb
import numpy as np
import pytest

from hosts import quantize
from hosts.allreduce import AggOverflowError, AllReduceClient, AllReduceError
from protocol import wire
from protocol.job import JobSpec, WorkerSpec


def make_job(fabric, socks, slot_count=8, timeout_s=0.05, lanes=32):
    workers = tuple(WorkerSpec(f"h{i + 1}", "127.0.0.1", s.getsockname()[1]) for i, s in enumerate(socks))
    return JobSpec(job_id=1, workers=workers, slot_base=0, slot_count=slot_count, agg_ip=fabric.addr[0],
                   agg_port=fabric.addr[1], lanes=lanes, timeout_s=timeout_s)


def sockets(n):
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        out.append(s)
    return out


def star_fabric(n, loss=0.0, slot_count=8, lanes=32):
    sw = fb.star(n, slot_count=slot_count, lanes=lanes)
    fabric = fb.Fabric({"s1": sw}, loss=loss, seed=7)
    socks = sockets(n)
    for i, s in enumerate(socks):
        fabric.attach("s1", i + 1, i + 1, s.getsockname())
    return fabric, socks


def in_threads(fabric, work, n, timeout_s=60):
    """work(rank) for ranks 0..n-1, each in its own thread, while the fabric runs; closed after."""
    threads = [threading.Thread(target=work, args=(r,)) for r in range(n)]
    fabric.start()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s)
    finally:
        fabric.close()


def run_workers(job, socks, inputs, calls=1, delays=None):
    """Every worker runs `calls` all-reduces of its input in its own thread; returns results per worker."""
    results, errors = [None] * len(socks), []

    def work(rank):
        try:
            time.sleep((delays or [0] * len(socks))[rank])
            client = AllReduceClient(job, rank, socks[rank], stall_timeout_s=20)
            results[rank] = [client.allreduce(inputs[rank]) for _ in range(calls)]
            results[rank].append(client.stats)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in range(len(socks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results, errors


def test_int_allreduce_exact_4_workers_with_staggered_start():
    fabric, socks = star_fabric(4)
    job = make_job(fabric, socks)
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-2**28, 2**28, size=1000, dtype=np.int32) for _ in range(4)]
    fabric.start()
    try:
        results, errors = run_workers(job, socks, inputs, calls=2, delays=[0, 0, 0.1, 0.3])
    finally:
        fabric.close()
    assert errors == [] and fabric.errors == []
    expected = np.sum(inputs, axis=0, dtype=np.int32)
    for res in results:
        *sums, stats = res
        for s in sums:
            np.testing.assert_array_equal(s, expected)
        assert stats.chunks == 2 * 32  # 1000 elements = 32 chunks of 32 lanes, twice
        assert stats.fast_retransmits == 0  # results came back in order: nothing looked lost
    assert results[0][-1].retransmissions > 0  # early workers resent while h4 was still asleep
    sw = fabric.switches["s1"]
    assert fb.counter(sw, "completed") == 64 and fb.counter(sw, "aggregated") == 4 * 64


def test_int_allreduce_survives_loss():
    fabric, socks = star_fabric(3, loss=0.05, slot_count=4)
    job = make_job(fabric, socks, slot_count=4, timeout_s=0.03)
    rng = np.random.default_rng(2)
    inputs = [rng.integers(-2**20, 2**20, size=(20, 50), dtype=np.int32) for _ in range(3)]
    fabric.start()
    try:
        results, errors = run_workers(job, socks, inputs)
    finally:
        fabric.close()
    assert errors == [] and fabric.errors == [] and fabric.dropped > 0
    for res in results:
        assert res[0].shape == (20, 50)
        np.testing.assert_array_equal(res[0], np.sum(inputs, axis=0, dtype=np.int32))
    sw = fabric.switches["s1"]
    assert fb.counter(sw, "duplicates") > 0 or fb.counter(sw, "retx_answered") > 0


def test_a_lost_contribution_is_resent_once_later_results_pass_it():
    """h2's chunk 0 is lost; the results of chunks 1..7 pass it on every worker, so each resends it once
    (fast retransmit). The fabric holds h2's resend until h1's and h3's have arrived: let through at once,
    it completes chunk 0, and a worker that had not read results 1..7 yet would get [1..7, 0] in one
    batch and rightly resend nothing. With an RTO no run reaches, only a fast retransmit resends."""
    fabric, socks = star_fabric(3, slot_count=8)
    job = make_job(fabric, socks, slot_count=8, timeout_s=3600.0)
    inject, lost, held = fabric._inject, [], []
    h2 = socks[1].getsockname()
    sends_of_chunk_0 = dict.fromkeys((s.getsockname() for s in socks), 0)

    def lose_h2_chunk_0_and_hold_its_resend(payload, src):
        if struct.unpack_from("!I", payload, 4)[0] != 0:
            inject(payload, src)
            return
        sends_of_chunk_0[src] += 1
        if src == h2:
            (held if lost else lost).append(payload)
        else:
            inject(payload, src)
        if held and all(n == 2 for a, n in sends_of_chunk_0.items() if a != h2):  # both others resent it
            inject(held.pop(), h2)

    fabric._inject = lose_h2_chunk_0_and_hold_its_resend
    inputs = [np.full(16 * 32, rank + 1, dtype=np.int32) for rank in range(3)]
    fabric.start()
    try:
        results, errors = run_workers(job, socks, inputs)
    finally:
        fabric.close()
    assert errors == [] and fabric.errors == [] and len(lost) == 1 and held == []
    assert list(sends_of_chunk_0.values()) == [2, 2, 2]
    for *sums, stats in results:
        np.testing.assert_array_equal(sums[0], np.full(16 * 32, 6, dtype=np.int32))
        assert stats.fast_retransmits == 1 and stats.retransmissions == 1


def test_float_allreduce_within_stated_bound():
    fabric, socks = star_fabric(4)
    job = make_job(fabric, socks)
    rng = np.random.default_rng(3)
    inputs = [(rng.standard_normal(700) * 10.0 ** (k - 2)).astype(np.float32) for k in range(4)]
    fabric.start()
    try:
        results, errors = run_workers(job, socks, inputs)
    finally:
        fabric.close()
    assert errors == [] and fabric.errors == []
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    e_max = max(quantize.max_exponent(x) for x in inputs)
    f = quantize.frac_bits(e_max, 4)
    bound = quantize.error_bound(4, f)
    for res in results:
        got = res[0]
        assert got.dtype == np.float32
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)  # float32 output rounding
        assert (np.abs(got.astype(np.float64) - exact) <= bound + ulp).all()
        np.testing.assert_array_equal(got, results[0][0])  # every worker holds the same sum


def test_int_overflow_raises_on_every_worker():
    fabric, socks = star_fabric(2)
    job = make_job(fabric, socks)
    inputs = [np.array([2**31 - 10, 1, 2], dtype=np.int32), np.array([100, 1, 2], dtype=np.int32)]
    fabric.start()
    try:
        results, errors = run_workers(job, socks, inputs)
    finally:
        fabric.close()
    assert len(errors) == 2 and all(isinstance(e, AggOverflowError) for e in errors)
    assert "overflowed in 1 of 1 chunks" in str(errors[0])


def test_two_level_tree_64_lanes():
    s1, s2, s3 = fb.switch(64), fb.switch(64), fb.switch(64)
    for leaf, hosts in ((s1, (1, 2)), (s2, (3, 4))):
        fb.install_job(leaf, 1, 0, 8, [fb.Child(1, 0), fb.Child(2, 1)], is_root=False, parent_port=3)
        for port, h in zip((1, 2), hosts):
            fb.install_host(leaf, port, fb.host_mac(h), fb.host_ip(h))
    fb.install_job(s3, 1, 64, 8, [fb.Child(1, 0), fb.Child(2, 1)])
    fabric = fb.Fabric({"s1": s1, "s2": s2, "s3": s3}, loss=0.02, seed=11)
    fabric.link("s1", 3, "s3", 1)
    fabric.link("s2", 3, "s3", 2)
    socks = sockets(4)
    for i, s in enumerate(socks):
        fabric.attach("s1" if i < 2 else "s2", i % 2 + 1, i + 1, s.getsockname())
    job = make_job(fabric, socks, lanes=64, timeout_s=0.05)
    rng = np.random.default_rng(4)
    inputs = [rng.integers(-2**28, 2**28, size=2000, dtype=np.int32) for _ in range(4)]
    fabric.start()
    try:
        results, errors = run_workers(job, socks, inputs)
    finally:
        fabric.close()
    assert errors == [] and fabric.errors == []
    for res in results:
        np.testing.assert_array_equal(res[0], np.sum(inputs, axis=0, dtype=np.int32))
    chunks = 2000 // 64 + 1
    assert fb.counter(s3, "completed") == chunks and fb.counter(s1, "completed") >= chunks


def test_stalled_fabric_raises_a_clear_error():
    fabric, socks = star_fabric(2)  # never started: nothing answers
    job = make_job(fabric, socks)
    client = AllReduceClient(job, 0, socks[0], stall_timeout_s=0.3)
    with pytest.raises(AllReduceError, match=r"no result for 0.3 s; 1 of 1 chunks outstanding \(first: seq 0\)"):
        client.allreduce(np.ones(5, dtype=np.int32))
    fabric.sock.close()


def test_result_from_a_misconfigured_tree_is_rejected():
    fabric, socks = star_fabric(2)  # the switch expects 2 children ...
    job = make_job(fabric, socks + sockets(1))  # ... but the job has 3 workers
    fabric.start()
    try:
        results, errors = run_workers(job, socks, [np.ones(10, np.int32)] * 2)
    finally:
        fabric.close()
    assert len(errors) == 2
    assert "sums 2 contributions at scale 0, expected 3 at scale 0" in str(errors[0])
    with pytest.raises(AllReduceError, match="dtype int64 is not supported"):
        AllReduceClient(job, 0, sockets(1)[0]).allreduce(np.ones(3, dtype=np.int64))


@pytest.mark.parametrize("lanes", wire.LANE_COUNTS)
def test_every_lane_count_sums_exactly(lanes):
    """Up to 364 lanes: a 1514-byte frame, the largest a 1500-byte MTU carries."""
    fabric, socks = star_fabric(2, slot_count=8, lanes=lanes)
    job = make_job(fabric, socks, lanes=lanes)
    rng = np.random.default_rng(lanes)
    inputs = [rng.integers(-2**28, 2**28, size=20 * lanes + 5, dtype=np.int32) for _ in range(2)]
    fabric.start()
    try:
        results, errors = run_workers(job, socks, inputs)
    finally:
        fabric.close()
    assert errors == [] and fabric.errors == []
    for res in results:
        np.testing.assert_array_equal(res[0], inputs[0] + inputs[1])
        assert res[-1].chunks == 21


def test_later_float_calls_carry_their_exponent_vote_in_the_same_stream():
    """Call 1 agrees on the scale first (vote, then data); call 2 sends data and vote together at
    call 1's scale; call 3's values are 2^10 larger, so its vote shows they did not fit and
    every worker repeats it at the scale that vote agrees on."""
    fabric, socks = star_fabric(2, slot_count=8)
    job = make_job(fabric, socks)
    rng = np.random.default_rng(5)
    base = [rng.standard_normal(700).astype(np.float32) for _ in range(2)]
    calls = [base, base, [x * 1024 for x in base]]
    out, errors = [[] for _ in socks], []

    def work(rank):
        try:
            client = AllReduceClient(job, rank, socks[rank], stall_timeout_s=20)
            for inputs in calls:
                out[rank].append((client.allreduce(inputs[rank]), client.scale, client.stats.chunks))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    in_threads(fabric, work, 2)
    assert errors == [] and fabric.errors == []
    data, votes = 22, quantize.E_BUCKETS // 32  # chunks of 700 values, of one vote vector
    assert [chunks for _, _, chunks in out[0]] == [votes + data, 2 * (votes + data), 3 * (votes + data) + data]
    for k, inputs in enumerate(calls):
        e_max = max(quantize.max_exponent(x) for x in inputs)
        got, f, _ = out[0][k]
        assert f == quantize.frac_bits(e_max, 2)  # the same magnitude twice, then the repeat
        exact = inputs[0].astype(np.float64) + inputs[1]
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        assert (np.abs(got - exact) <= quantize.error_bound(2, f) + ulp).all()
        np.testing.assert_array_equal(got, out[1][k][0])


def test_a_client_restored_from_state_quantizes_as_the_one_that_went_on():
    """The bits of a call come from the previous call (no extra round trip), so a worker resumed
    from a checkpoint must get them back (state_dict, saved with the model) to sum the same."""
    rng = np.random.default_rng(5)
    first = [rng.standard_normal(500).astype(np.float32) * 8 for _ in range(2)]
    second = [x / 64 for x in first]  # smaller: the previous bits still fit, fresh ones are finer

    def calls(inputs_per_call, state=None):
        fabric, socks = star_fabric(2)
        job = make_job(fabric, socks)
        clients = [AllReduceClient(job, r, socks[r], stall_timeout_s=20) for r in range(2)]
        if state is not None:
            for c in clients:
                c.load_state_dict(state)
        out = [[None, None] for _ in inputs_per_call]

        def work(rank):
            for i, inputs in enumerate(inputs_per_call):
                out[i][rank] = clients[rank].allreduce(inputs[rank])
        in_threads(fabric, work, 2)
        return out, clients[0].state_dict()

    (_, went_on), _ = calls([first, second])
    _, state = calls([first])  # what a checkpoint after the first step holds
    (restored,), _ = calls([second], state=state)
    (fresh,), _ = calls([second])
    assert state["next_scale"][500] > 0
    np.testing.assert_array_equal(restored[0], went_on[0])
    assert not np.array_equal(fresh[0], went_on[0])
