"""The all-reduce client's retransmission timeout: TCP estimate, Karn's algorithm, exponential backoff."""

import time

import fabric as fb
import numpy as np
from test_allreduce_loopback import make_job, run_workers, star_fabric

from hosts.allreduce import AllReduceClient
from hosts.transfer import RetransmitTimer
from protocol.job import MAX_TIMEOUT_S


def test_samples_set_twice_the_smoothed_round_trip_above_the_minimum():
    t = RetransmitTimer(0.05)
    assert t.rto == 0.05
    t.sample(0.01)
    assert t.rto == 0.05  # 2 * 0.01 is below the minimum
    t.sample(0.2)  # srtt = 0.875 * 0.01 + 0.125 * 0.2
    assert abs(t.srtt - 0.03375) < 1e-12 and abs(t.rto - 0.0675) < 1e-12
    for _ in range(100):
        t.sample(5.0)
    assert t.rto == MAX_TIMEOUT_S


def test_each_timeout_doubles_up_to_the_cap_and_a_fresh_sample_resets():
    t = RetransmitTimer(0.05, max_rto=0.5)
    now = 0.0
    for expected in (0.1, 0.2, 0.4, 0.5, 0.5):
        sent = now
        now += t.rto
        t.timeout(sent, now)  # the resent chunk was sent after the previous doubling
        assert abs(t.rto - expected) < 1e-12
    t.sample(0.02)
    assert t.rto == 0.05


def test_a_burst_of_expiries_doubles_once():
    t = RetransmitTimer(0.05)
    # a whole window sent at t=0..0.01 expires around t=0.05: one loss event
    for c in range(64):
        t.timeout(sent_at=c * 0.0001, now=0.05 + c * 0.0001)
    assert abs(t.rto - 0.1) < 1e-12
    # the resends (sent after the doubling) expire too: the next event doubles again
    t.timeout(sent_at=0.051, now=0.151)
    t.timeout(sent_at=0.052, now=0.152)
    assert abs(t.rto - 0.2) < 1e-12


def timeouts_within(seconds: float, min_rto: float) -> int:
    """How many times a chunk can time out in `seconds` at most: each wait is the backed-off RTO
    (0.05, 0.1, 0.2, 0.4, 0.8 s, then every 1 s), and a timer fires late, never early."""
    timer, elapsed, count = RetransmitTimer(min_rto), 0.0, 0
    while elapsed + timer.rto <= seconds:
        sent, elapsed = elapsed, elapsed + timer.rto
        timer.timeout(sent, elapsed)  # the resend goes out now
        count += 1
    return count


def test_late_peer_costs_few_resends():
    """One worker starts 1.5 s late: with backoff the early worker resends its window at most as
    often as the backed-off timeouts fit in the time it waited (5 or 6 times, however busy the machine
    makes that wait), not every 50 ms (30 times); and it does resend (the peer is 30 RTOs late)."""
    fabric, socks = star_fabric(2, slot_count=8)
    job = make_job(fabric, socks, slot_count=8, timeout_s=0.05)
    inputs = [np.arange(8 * 32, dtype=np.int32), np.ones(8 * 32, dtype=np.int32)]
    fabric.start()
    try:
        started = time.monotonic()
        results, errors = run_workers(job, socks, inputs, delays=[0, 1.5])
        waited = time.monotonic() - started  # the early worker waited no longer than this
    finally:
        fabric.close()
    assert errors == [] and fabric.errors == []
    np.testing.assert_array_equal(results[0][0], inputs[0] + 1)
    early = results[0][-1]
    assert timeouts_within(1.5, 0.05) == 4 and timeouts_within(30, 0.05) < 35  # the schedule above
    assert 8 <= early.retransmissions - early.fast_retransmits <= 8 * timeouts_within(waited, job.timeout_s)
    assert fb.counter(fabric.switches["s1"], "completed") == 8


def test_client_keeps_one_timer_across_calls():
    fabric, socks = star_fabric(2)
    job = make_job(fabric, socks)
    client = AllReduceClient(job, 0, socks[0])
    assert isinstance(client.timer, RetransmitTimer) and client.timer.min_rto == job.timeout_s
    fabric.sock.close()
