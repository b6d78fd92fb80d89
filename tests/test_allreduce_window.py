"""The worker's window as a state machine (hosts.transfer.Transfer), without sockets: feed it
results and clock ticks, check what it says to send."""
import numpy as np
import pytest

from hosts.pacing import Aimd, Window
from hosts.transfer import FAST_RETX_RESULTS, RetransmitTimer, Transfer, TransferStats


def make(chunks, slots=4, rto=0.1, pacing=None):
    timer = RetransmitTimer(rto)
    return Transfer(chunks, slots, timer, pacing or Window(slots), TransferStats(), now=0.0)


def sends(t, now):
    chunks, retx = t.due(now)
    return chunks.tolist(), retx.tolist()


def test_first_sends_fill_the_slot_window_in_order_and_nothing_more():
    t = make(10, slots=4)
    assert sends(t, 0.0) == ([0, 1, 2, 3], [False] * 4)
    assert sends(t, 0.01) == ([], [])  # all four slots busy
    assert t.in_flight == 4 and t.stats.packets_sent == 4


def test_a_chunk_reuses_its_slot_only_after_the_previous_result():
    t = make(10, slots=4)
    t.due(0.0)
    t.on_results(np.array([1]), 0.01)  # chunk 5 could reuse slot 1, but chunks go in order and 4 waits for 0
    assert sends(t, 0.01) == ([], [])
    t.on_results(np.array([0]), 0.02)
    assert sends(t, 0.02) == ([4, 5], [False, False])


def test_timeout_resends_the_whole_burst_and_backs_off_once():
    t = make(4, slots=4, rto=0.1)
    t.due(0.0)
    assert t.next_deadline() == pytest.approx(0.1)
    assert sends(t, 0.099) == ([], [])
    assert sends(t, 0.1) == ([0, 1, 2, 3], [True] * 4)
    assert t.timer.rto == pytest.approx(0.2)  # one loss event for the four expiries
    assert t.next_deadline() == pytest.approx(0.3)
    assert sends(t, 0.31) == ([0, 1, 2, 3], [True] * 4)
    assert t.timer.rto == pytest.approx(0.4)
    assert t.stats.retransmissions == 8 and t.stats.packets_sent == 12


def test_three_later_results_trigger_one_fast_retransmit():
    t = make(8, slots=8, rto=5.0)
    t.due(0.0)
    for k, c in enumerate((1, 2), start=1):
        t.on_results(np.array([c]), 0.01 * k)
        assert sends(t, 0.01 * k) == ([], [])  # passed once, twice: not yet
    t.on_results(np.array([3]), 0.03)  # the third result after chunk 0
    assert sends(t, 0.03) == ([0], [True])
    assert t.stats.fast_retransmits == 1 and t.stats.retransmissions == 1
    t.on_results(np.array([4, 5, 6, 7]), 0.04)
    assert sends(t, 0.04) == ([], [])  # at most one fast retransmit per chunk; now only its timeout resends it
    assert t.remaining == 1
    t.on_results(np.array([0]), 0.05)
    assert t.remaining == 0 and t.next_deadline() == float("inf")


def test_results_in_one_batch_count_as_passes_like_one_at_a_time():
    t = make(8, slots=8, rto=5.0)
    t.due(0.0)
    t.on_results(np.array([3, 1, 2]), 0.01)  # chunk 0 passed by three results in one batch
    assert sends(t, 0.01) == ([0], [True])
    assert FAST_RETX_RESULTS == 3


def test_only_chunks_sent_once_give_round_trip_samples():
    t = make(4, slots=4, rto=0.1)
    t.due(0.0)
    t.due(0.1)  # everything resent at 0.1
    t.on_results(np.array([0, 1, 2, 3]), 0.15)
    assert t.timer.srtt is None  # Karn: ambiguous round trips give no samples
    t2 = make(4, slots=4, rto=0.1)
    t2.due(0.0)
    t2.on_results(np.array([0, 1]), 0.02)
    assert t2.timer.srtt == pytest.approx(0.875 * 0.02 + 0.125 * 0.02)


def test_batched_samples_equal_one_at_a_time():
    one, many = RetransmitTimer(0.01), RetransmitTimer(0.01)
    samples = [0.02, 0.05, 0.01, 0.3, 0.04]
    for s in samples:
        one.sample(s)
    many.sample(np.array(samples))
    assert many.srtt == pytest.approx(one.srtt, rel=1e-12) and many.rto == pytest.approx(one.rto, rel=1e-12)


def test_duplicates_and_done_chunks_are_stale():
    t = make(4, slots=4)
    t.due(0.0)
    fresh = t.on_results(np.array([2, 2, 0]), 0.01)
    assert fresh.tolist() == [0, 2]  # positions of the first result of chunks 2 and 0
    assert t.on_results(np.array([0]), 0.02).tolist() == []
    assert (t.stats.results, t.stats.stale_results) == (2, 2)
    assert t.last_progress == 0.01


def test_aimd_halves_once_per_loss_burst_and_limits_what_goes_out():
    pacing = Aimd(8)
    t = make(32, slots=8, rto=0.1, pacing=pacing)
    assert len(sends(t, 0.0)[0]) == 8
    chunks, retx = t.due(0.1)  # all 8 time out together: one loss event
    assert pacing.cwnd == 4 and retx.all() and chunks.size == 8
    t.on_results(np.arange(4), 0.15)  # cwnd 4 + 4 small steps < 5, and chunks 4..7 are still out
    assert sends(t, 0.15) == ([], [])
    t.on_results(np.arange(4, 8), 0.16)  # 8 results grew the window past 5
    assert 5 < pacing.cwnd < 6 and sends(t, 0.16) == ([8, 9, 10, 11, 12], [False] * 5)


def test_a_fast_retransmit_shrinks_the_aimd_window():
    pacing = Aimd(8)
    t = make(16, slots=8, rto=5.0, pacing=pacing)
    t.due(0.0)
    t.on_results(np.array([1, 2, 3]), 0.01)
    chunks, retx = t.due(0.01)
    assert chunks[0] == 0 and retx[0] and pacing.cwnd < 8


def test_marked_results_halve_the_aimd_window_once_per_window_of_chunks():
    pacing = Aimd(8)
    t = make(32, slots=8, rto=5.0, pacing=pacing)
    t.due(0.0)
    t.on_results(np.array([0, 1]), 0.01, marked=np.array([False, True]))  # a deep queue on the way
    assert pacing.cwnd == 4 and t.stats.marked_results == 1
    t.on_results(np.array([2, 3]), 0.02, marked=np.array([True, True]))  # sent before the cut: same event
    assert 4 < pacing.cwnd < 5 and t.stats.marked_results == 3
    t.on_results(np.array([3]), 0.03, marked=np.array([True]))  # a stale result's mark does not count
    assert t.stats.marked_results == 3
    t.on_results(np.arange(4, 8), 0.04, marked=np.zeros(4, dtype=bool))
    sent, _ = sends(t, 0.04)  # sent after the cut: their marks are a new event
    assert sent[0] == 8
    t.on_results(np.array(sent[:1]), 0.05, marked=np.array([True]))
    assert pacing.cwnd < 3 and pacing.smallest == 2
    assert t.stats.retransmissions == 0  # a mark is no loss: nothing is resent


def test_marks_leave_a_fixed_window_as_it_is():
    t = make(16, slots=8, rto=5.0)
    t.due(0.0)
    t.on_results(np.arange(4), 0.01, marked=np.ones(4, dtype=bool))
    assert t.pacing.capacity() == 8 and t.stats.marked_results == 4
