"""Traffic manager: rate, depth, delay, loss and queue depths, on a fake clock."""
from __future__ import annotations

import pytest

from p4target.tm import PortQueue, TrafficManager


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drain(q: PortQueue) -> list:
    return list(q.dequeue())


def test_unlimited_queue_passes_everything_in_order_with_qdepths():
    clock = FakeClock()
    q = PortQueue(clock)
    for i in range(5):
        q.enqueue(i, 100)
    out = drain(q)
    assert [item for item, _, _ in out] == [0, 1, 2, 3, 4]
    assert [enq for _, enq, _ in out] == [0, 1, 2, 3, 4]
    assert [deq for _, _, deq in out] == [4, 3, 2, 1, 0]
    assert q.next_event() is None


def test_tail_drop_at_depth_is_counted():
    q = PortQueue(FakeClock(), depth=3)
    for i in range(10):
        q.enqueue(i, 64)
    assert len(q) == 3
    assert q.tail_drops == 7
    assert [item for item, _, _ in drain(q)] == [0, 1, 2]
    q.set_depth(5)
    for i in range(6):
        q.enqueue(i, 64)
    assert q.tail_drops == 8 and q.enqueued == 8


def test_rate_pps_spaces_departures():
    clock = FakeClock()
    q = PortQueue(clock, depth=100, burst_s=0.0)
    q.set_rate_pps(10)  # one packet per 100 ms, bucket of one packet
    for i in range(5):
        q.enqueue(i, 1000)
    assert [i for i, _, _ in drain(q)] == [0]
    assert q.next_event() == pytest.approx(100.1)
    clock.now += 0.05
    assert drain(q) == []
    clock.now += 0.05
    assert [i for i, _, _ in drain(q)] == [1]
    clock.now += 0.35  # late wake-up: only what the (one-packet) bucket allows
    assert [i for i, _, _ in drain(q)] == [2]


def test_rate_pps_long_run_matches_configured_rate():
    clock = FakeClock()
    q = PortQueue(clock, depth=10_000)
    q.set_rate_pps(1000)
    for i in range(5000):
        q.enqueue(i, 100)
    sent = 0
    start = clock.now
    while clock.now - start < 2.0:
        clock.now += 0.0013  # a loop that wakes late and irregularly
        sent += len(drain(q))
    assert 1950 <= sent <= 2010


def test_rate_bps_counts_bits_of_the_frame():
    clock = FakeClock()
    q = PortQueue(clock, depth=1000, burst_s=0.0)
    q.set_rate_bps(8000)  # 1000 bytes per second
    for i in range(3):
        q.enqueue(i, 500)  # 0.5 s each
    assert len(drain(q)) == 1
    clock.now += 0.49
    assert drain(q) == []
    clock.now += 0.01
    assert len(drain(q)) == 1
    assert q.next_event() == pytest.approx(clock.now + 0.5)


def test_big_packet_is_not_stuck_behind_small_bucket():
    clock = FakeClock()
    q = PortQueue(clock, burst_s=0.001)
    q.set_rate_bps(1000)  # bucket of 1 bit, packet of 12000 bits
    q.enqueue("big", 1500)
    clock.now += 12.0
    assert [i for i, _, _ in drain(q)] == ["big"]


def test_delay_holds_packets_then_releases_them():
    clock = FakeClock()
    q = PortQueue(clock)
    q.set_delay_ms(20)
    q.enqueue("a", 60)
    clock.now += 0.005
    q.enqueue("b", 60)
    assert drain(q) == []
    assert q.next_event() == pytest.approx(100.02)
    clock.now = 100.02
    assert [i for i, _, _ in drain(q)] == ["a"]
    clock.now = 100.025
    assert [i for i, _, _ in drain(q)] == ["b"]


def test_delay_removed_meanwhile_lets_nothing_overtake():
    clock = FakeClock()
    q = PortQueue(clock)
    q.set_delay_ms(20)
    q.enqueue("a", 60)
    q.set_delay_ms(0)
    q.enqueue("b", 60)  # waits behind "a"
    assert drain(q) == []
    clock.now = 100.02
    assert [i for i, _, _ in drain(q)] == ["a", "b"]
    q.enqueue("c", 60)  # nothing held: straight to the queue
    assert [i for i, _, _ in drain(q)] == ["c"]


def test_loss_is_seeded_and_roughly_the_probability():
    def run(seed: int) -> list:
        q = PortQueue(FakeClock(), depth=10_000)
        q.set_loss(0.25, seed)
        for i in range(4000):
            q.enqueue(i, 60)
        return [i for i, _, _ in drain(q)]
    a, b, c = run(7), run(7), run(8)
    assert a == b and a != c
    assert 0.72 < len(a) / 4000 < 0.78


def test_bad_settings_are_rejected():
    q = PortQueue(FakeClock())
    with pytest.raises(ValueError):
        q.set_depth(0)
    with pytest.raises(ValueError):
        q.set_loss(1.5)
    with pytest.raises(ValueError):
        q.set_delay_ms(-1)
    with pytest.raises(ValueError, match="must not be negative"):
        q.set_ingress_delay_ms(-0.5)


def test_traffic_manager_keeps_ports_apart():
    clock = FakeClock()
    tm = TrafficManager(clock, burst_s=0.0)
    tm.queue(2).set_rate_pps(1)
    for i in range(3):
        tm.enqueue(1, ("p1", i), 60)
        tm.enqueue(2, ("p2", i), 60)
    out = list(tm.dequeue())
    assert sorted((p, item) for p, item, _, _ in out) == [(1, ("p1", 0)), (1, ("p1", 1)), (1, ("p1", 2)), (2, ("p2", 0))]
    assert tm.next_event() == pytest.approx(101.0)
    assert tm.queue(2).stats()["qdepth"] == 2


def test_ingress_delay_holds_frames_of_its_port_in_order_until_due():
    clock = FakeClock()
    tm = TrafficManager(clock)
    tm.queue(1).set_ingress_delay_ms(20)
    tm.queue(3)  # a port with settings but no ingress delay
    assert tm.hold(1, b"a")
    clock.now += 0.005
    assert tm.hold(1, b"b")
    assert not tm.hold(2, b"x") and not tm.hold(3, b"y")  # other ports: ingress now
    assert list(tm.arrivals()) == []
    assert tm.next_event() == pytest.approx(100.02)
    assert tm.queue(1).stats()["ingress_delay_ms"] == pytest.approx(20)
    clock.now = 100.0199
    assert list(tm.arrivals()) == []
    clock.now = 100.02
    assert list(tm.arrivals()) == [(1, b"a")]
    clock.now = 100.03
    assert list(tm.arrivals()) == [(1, b"b")]
    assert tm.next_event() is None


def test_ingress_delay_set_to_zero_keeps_order_then_costs_nothing():
    clock = FakeClock()
    tm = TrafficManager(clock)
    tm.queue(1).set_ingress_delay_ms(20)
    assert tm.hold(1, b"a")
    tm.queue(1).set_ingress_delay_ms(0)
    assert tm.hold(1, b"b")  # behind "a", which is still held
    assert list(tm.arrivals()) == []
    clock.now = 100.02
    assert list(tm.arrivals()) == [(1, b"a"), (1, b"b")]
    assert not tm.hold(1, b"c")
