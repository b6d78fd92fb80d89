"""Host aggregation with stragglers: synchronous sums equal the parameter server's, bounded
staleness lets fast workers run ahead by at most S rounds, and no gradient is lost or doubled."""
import threading
import time

import numpy as np
import pytest
import workers as wk

from hosts.comm import CommError, Endpoint
from hosts.host_agg import HostAggClient, HostAggregator, RoundBook
from hosts.straggler import (
    Straggler,
    StragglerError,
    parse_stragglers,
    pick_aggregators,
)

SIZE = 257


def grad(rank, step):
    """A distinct, exactly representable gradient per (rank, step)."""
    return np.full(SIZE, 1000.0 * rank + step, dtype=np.float32) + np.arange(SIZE, dtype=np.float32)


def start_aggregator(world, steps, staleness, wait_s=0.02, timeout_s=10):
    ep = Endpoint("agg", "127.0.0.1", wk.free_ports(1)[0])
    server = HostAggregator(ep, [f"h{i + 1}" for i in range(world)], RoundBook(world, steps, staleness, wait_s),
                            timeout_s)
    thread, out = wk.serve_in_thread(server)
    return ep, thread, out


def run_workers(ep, world, steps, delays):
    """Each rank sends grad(rank, step) per step after sleeping delays[rank]; returns per-rank (results, times)."""
    def rank_main(rank):
        got, stamps = [], []
        with HostAggClient([ep], f"h{rank + 1}", rank, world, timeout_s=10) as comm:
            for step in range(steps):
                time.sleep(delays[rank])
                got.append((comm.allreduce(grad(rank, step)), comm.last_round))
                stamps.append(time.monotonic())
        return got, stamps

    results, errors = wk.run_ranks(rank_main, world)
    assert errors == [None] * world, errors
    return results


def test_synchronous_rounds_sum_every_step_exactly():
    world, steps = 3, 6
    ep, thread, out = start_aggregator(world, steps, staleness=0)
    results = run_workers(ep, world, steps, [0.0, 0.01, 0.03])
    thread.join(10)
    for step in range(steps):
        want = sum(grad(r, step) for r in range(world))
        for rank in range(world):
            total, (count, staleness) = results[rank][0][step]
            np.testing.assert_array_equal(total, want)
            assert (count, staleness) == (world, 0)
    stats = out["stats"]
    assert (stats.rounds, stats.contributions, stats.max_staleness) == (steps, world * steps, 0)


def test_bounded_staleness_lets_fast_workers_run_ahead():
    """The straggler (rank 2) sends its step t >= 1 only once the fast workers hold round t + bound - 1 (the
    first and last rounds wait for everyone, so step 0 goes at once), so they run ahead by exactly `bound`
    rounds, whatever the machine's speed: the order of events is checked, not the times between them."""
    world, steps, bound = 3, 8, 2
    ep, thread, out = start_aggregator(world, steps, staleness=bound, wait_s=0.02)
    events, done = [], threading.Condition()  # ("round", rank, r): rank holds round r; ("sent", 2, t)
    rounds_held = [0] * world

    def rank_main(rank):
        got = []
        with HostAggClient([ep], f"h{rank + 1}", rank, world, timeout_s=10) as comm:
            for step in range(steps):
                if rank == 2:
                    held = min(step + bound, steps - 1) if step else 0  # rounds they reach without its step
                    with done:
                        done.wait_for(lambda n=held: min(rounds_held[:2]) >= n)
                        events.append(("sent", rank, step))
                got.append(comm.allreduce(grad(rank, step)))
                with done:
                    rounds_held[rank] += 1
                    events.append(("round", rank, step))
                    done.notify_all()
        return got

    results, errors = wk.run_ranks(rank_main, world)
    assert errors == [None] * world, errors
    thread.join(10)
    stats = out["stats"]
    # every gradient summed exactly once: the rounds together hold all of them
    np.testing.assert_array_equal(sum(results[0]), sum(grad(r, s) for r in range(world) for s in range(steps)))
    assert stats.contributions == world * steps and stats.rounds == steps
    assert stats.max_staleness == bound and stats.stale_contributions > 0
    for step in range(steps):  # all ranks saw identical sums for each round
        for rank in (1, 2):
            np.testing.assert_array_equal(results[rank][step], results[0][step])
    # a fast worker held round r only after the straggler sent step r - bound (round r needs it), the first
    # and last rounds only after its step of the same round, and rounds 1..bound before it sent step 1
    at = {e: i for i, e in enumerate(events)}
    for rank in (0, 1):
        for r in range(steps):
            if r in (0, steps - 1):
                assert at[("sent", 2, r)] < at[("round", rank, r)], events
            if r >= bound:
                assert at[("sent", 2, r - bound)] < at[("round", rank, r)], events
            if 0 < r <= bound:
                assert at[("round", rank, r)] < at[("sent", 2, 1)], events


def test_staleness_zero_waits_for_the_straggler():
    world, steps, slow = 2, 4, 0.1
    ep, thread, out = start_aggregator(world, steps, staleness=0)
    t0 = time.monotonic()
    results = run_workers(ep, world, steps, [0.0, slow])
    thread.join(10)
    assert results[0][1][-1] - t0 >= steps * slow
    assert out["stats"].max_staleness == 0


def test_book_rejects_a_step_from_the_future():
    book = RoundBook(2, 5)
    book.offer(0, 0, grad(0, 0), 0.0)
    with pytest.raises(CommError, match="rank 1 sent step 2 before round 0 closed"):
        book.offer(1, 2, grad(1, 2), 0.0)


def test_book_sums_rounds_of_different_lengths_and_refuses_a_mix():
    """A model job's rounds are its buckets, each its own length; a round's gradients must agree, and
    a late gradient of another length cannot join a round (a book that takes every round for an
    iteration of its own, as training's, sees a misbehaving worker)."""
    book = RoundBook(2, 3, staleness=1)
    for step, size in enumerate((5, 3)):
        for rank in (0, 1):
            book.offer(rank, step, np.full(size, rank + 1.0, dtype=np.float32), 0.0)
        assert book.ready(0.0)
        np.testing.assert_array_equal(book.close(0.0).total, np.full(size, 3.0))
    with pytest.raises(CommError, match="rank 1 sent 4 values for step 2, its gradients have 2"):
        book.offer(0, 2, np.ones(2, dtype=np.float32), 0.0)
        book.offer(1, 2, np.ones(4, dtype=np.float32), 0.0)
    mixed = RoundBook(2, 5, staleness=2)
    for rank in (0, 1):
        mixed.offer(rank, 0, np.ones(5, dtype=np.float32), 0.0)
    mixed.close(0.0)
    mixed.offer(0, 1, np.ones(3, dtype=np.float32), 0.0)
    mixed.close(0.0)  # round 1 without rank 1 (staleness 2)
    mixed.offer(1, 1, np.ones(3, dtype=np.float32), 0.0)  # late, and round 2's buckets are 4 long
    mixed.offer(0, 2, np.ones(4, dtype=np.float32), 0.0)
    with pytest.raises(CommError, match=r"round 2 has 4 values, a late gradient \(rank 1, step 1\) 3: the same bucket"):
        mixed.close(0.0)


def test_straggler_config_and_aggregator_choice():
    s = parse_stragglers({"h2": {"delay_s": 0.2}, "h3": {"slowdown": 3}}, ["h1", "h2", "h3"], "job.json")
    assert s == {"h2": Straggler(0.2, 1.0), "h3": Straggler(0.0, 3.0)}
    assert s["h3"].pause_s(0.01) == pytest.approx(0.02) and s["h2"].pause_s(0.01) == pytest.approx(0.2)
    with pytest.raises(StragglerError, match=r"^job.json: field 'stragglers.h9': 'h9' is not a worker$"):
        parse_stragglers({"h9": {"delay_s": 1}}, ["h1"], "job.json")
    with pytest.raises(StragglerError, match=r"field 'stragglers.h1.slowdown': expected a number >= 1"):
        parse_stragglers({"h1": {"slowdown": 0.5}}, ["h1"], "job.json")
    # idle hosts first, then the fastest workers
    assert pick_aggregators(["h1", "h2", "h3", "h4"], ["h1", "h2", "h3"], s) == ["h4", "h1"]
    assert pick_aggregators(["h1", "h2", "h3"], ["h1", "h2", "h3"], {"h1": Straggler(0.5)}) == ["h2", "h3"]


def test_a_model_job_on_a_host_aggregator_counts_staleness_in_iterations(tmp_path):
    """hosts.models.workload's DDP loop, two ranks on a host aggregator over loopback, staleness 2 iterations,
    h2 0.15 s slow: whatever the timing, each of h2's buckets is summed once, in the same bucket's round at most
    2 iterations late, it pulls whole iterations, and both ranks' sums are the ones the aggregator's record of
    each round gives."""
    from hosts.agent_config import AgentConfig, TrainConfig
    from hosts.models import workload

    iterations = 6
    rounds, lead, buckets = workload.round_plan("ncf", "a100", None, iterations)
    ep = Endpoint("agg", "127.0.0.1", wk.free_ports(1)[0])
    server = HostAggregator(ep, ["h1", "h2"], RoundBook(2, rounds, 2, 0.02, lead=lead, per_iteration=buckets), 10)
    thread, out = wk.serve_in_thread(server)
    config = AgentConfig("hostagg", TrainConfig(steps=rounds), (Endpoint("h1", "127.0.0.1", 1),
                         Endpoint("h2", "127.0.0.1", 1)), aggregator=ep, staleness=2,
                         stragglers={"h2": Straggler(0.15)}, lead_rounds=lead, iteration_rounds=buckets)
    reports, errors = wk.run_ranks(lambda rank: workload.run_model(
        config, f"h{rank + 1}", "ncf", "a100", None, iterations, 1e-4, None, 1.0, tmp_path), 2)
    assert errors == [None, None], errors
    thread.join(10)
    stats = out["stats"]
    assert len(stats.included) == rounds == len(reports[0]["sums"])
    want = workload.exact_sums(2, [0, 1], stats.included)
    assert all(r["correct"] and r["sums"] == want for r in reports)
    for rank, report in enumerate(reports):
        computed = [it["iteration"] for it in report["iterations"] if not it.get("skipped")]
        sent = list(range(lead)) + [lead + i * buckets + b for i in computed for b in range(buckets)]
        joined = sorted((step, index) for index, held in enumerate(stats.included) for k, step in held if k == rank)
        assert [step for step, _ in joined] == sent  # every gradient it computed, once
        assert all((index - step) % buckets == 0 and index - step <= 2 * buckets for step, index in joined)
    assert stats.pulled == buckets * sum(r["skipped_iterations"] for r in reports) and stats.max_staleness <= 2
