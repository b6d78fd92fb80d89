"""hosts.pacing: the window policies the all-reduce client uses, and the MLfabric-style job weights."""
import pytest

from hosts.pacing import Aimd, Window, make_window, transfer_weights
from protocol.job import JobSpec, JobSpecError


def test_fixed_window_always_allows_the_whole_slot_window():
    w = make_window("fixed", 8)
    w.on_loss()
    assert type(w) is Window and w.allows(7) and not w.allows(8) and w.smallest == 8


def test_aimd_halves_on_loss_and_never_drops_below_one_chunk():
    w = make_window("aimd", 32)
    assert isinstance(w, Aimd) and w.allows(31) and not w.allows(32)
    w.on_loss()
    assert w.cwnd == 16 and w.allows(15) and not w.allows(16)
    for _ in range(10):
        w.on_loss()
    assert w.cwnd == 1 and w.allows(0) and not w.allows(1)
    for _ in range(10_000):
        w.on_results()
    assert w.cwnd == 32 and w.smallest == 1  # grown back; how far it backed off is remembered


def test_aimd_grows_by_weight_chunks_per_window_of_results_up_to_the_slot_window():
    light, heavy = Aimd(64, weight=1.0), Aimd(64, weight=4.0)
    for w in (light, heavy):
        w.cwnd = 8.0
        for _ in range(8):  # one round trip's worth of results
            w.on_results()
    assert 8.9 < light.cwnd < 9.1 and 11.0 < heavy.cwnd < 12.5
    for _ in range(10_000):
        heavy.on_results()
    assert heavy.cwnd == 64


def test_marks_cut_the_aimd_window_by_the_running_marked_fraction_losses_by_half():
    w = Aimd(64)
    w.on_mark()  # no window observed yet: alpha starts at 1, so the first marks halve
    assert w.cwnd == 32
    for _ in range(100):  # 100 windows of results, one in eight marked: alpha settles near 1/8
        w.cwnd = 32.0
        w.on_results(32, 4)
    assert abs(w.alpha - 0.125) < 0.01
    w.cwnd = 32.0
    w.on_mark()
    assert 29.5 < w.cwnd < 30.5  # a 6% cut: the queue stays near its marking depth, the link busy
    w.on_loss()
    assert 14.5 < w.cwnd < 15.5  # a loss still halves
    for _ in range(200):  # every result marked: alpha goes to 1 and a mark halves again
        w.cwnd = 32.0
        w.on_results(32, 32)
    w.cwnd = 32.0
    w.on_mark()
    assert 16 <= w.cwnd < 16.1 and w.smallest == 14


def test_a_fixed_window_ignores_marks():
    w = make_window("fixed", 8)
    w.on_results(8, 8)
    w.on_mark_burst(0.0, 0.01)
    assert w.capacity() == 8 and w.smallest == 8


def test_transfer_weights_favour_the_update_that_unblocks_most_workers_per_byte():
    weights = transfer_weights({"a": 4, "b": 2, "c": 4}, {"a": 1000.0, "b": 1000.0, "c": 8000.0})
    assert weights["a"] == 4.0 and weights["b"] == 2.0
    assert weights["c"] == 1.0  # 8x the bytes for the same workers: the floor, never starved
    assert transfer_weights({1: 3, 2: 3}, {1: 10.0, 2: 10.0}) == {1: 4.0, 2: 4.0}


def test_job_spec_pacing_fields_are_validated():
    base = {"job_id": 1, "slot_base": 0, "slot_count": 8, "agg_ip": "10.0.255.254",
            "workers": [{"name": "h1", "ip": "10.0.0.1"}]}
    spec = JobSpec.from_dict({**base, "pacing": "aimd", "weight": 2}, "job.json")
    assert (spec.pacing, spec.weight) == ("aimd", 2.0)
    assert JobSpec.from_json(spec.to_json()) == spec
    with pytest.raises(JobSpecError, match=r"job.json: field 'pacing': 'slow' is not one of"):
        JobSpec.from_dict({**base, "pacing": "slow"}, "job.json")
    with pytest.raises(JobSpecError, match=r"field 'weight': must be positive"):
        JobSpec.from_dict({**base, "weight": 0}, "job.json")
