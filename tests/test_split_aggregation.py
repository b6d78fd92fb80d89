"""Split aggregation's rounds (hosts.split_agg): the aggregator's book decides when the stragglers' seat
contributes, on a controlled clock; then the aggregator and a straggler over loopback TCP, the tree
stood in for by an all-reduce that adds the on-time workers' part."""
import threading
import time

import numpy as np
import pytest
import workers as wk

from hosts.comm import AllReduce, CommError, Endpoint
from hosts.host_agg import GRAD, HostAggClient, RoundBook
from hosts.split_agg import SplitAggregator

SIZE = 8


def grad(step: float) -> np.ndarray:
    return np.full(SIZE, step + 1, dtype=np.float32)


def test_the_seat_waits_for_a_straggler_on_fresh_weights_and_not_for_one_on_old_ones():
    book = RoundBook(1, steps=10, staleness=2, wait_s=0.5, in_tree=True)
    assert not book.ready(100.0)  # round 0 waits for everyone
    book.offer(0, 0, grad(0), 0.0)
    assert book.ready(0.0)
    book.apply(book.take(), 0.0)
    book.answered(0, 0)  # the straggler now computes step 1 on round 0's result
    assert book.maybe_on_time() == [0] and not book.ready(0.4) and book.deadline() == 0.5
    assert book.ready(0.5)  # it was given wait_s: round 1 goes on without it
    r1 = book.take()
    assert r1.included == () and not r1.total.any()
    book.apply(r1, 0.5)
    assert book.maybe_on_time() == [] and book.ready(0.5)  # it computes on round 0's weights: no wait
    book.apply(book.take(), 0.5)
    assert not book.ready(1e9)  # round 3 would leave its step 1 three rounds late: wait for it
    assert book.offer(0, 1, grad(1), 2.0).index == 1  # its round is closed: answered at once
    assert book.ready(2.0)
    r3 = book.take()
    assert r3.included == ((0, 1),) and book.lag(r3) == 2
    book.apply(r3, 2.0)
    assert book.pull(0, 2).index == 2 and book.stats.pulled == 1
    with pytest.raises(CommError, match="rank 0 pulled round 4, which is not closed"):
        book.pull(0, 4)
    assert book.stats.staleness_counts == {0: 1, 2: 1}


def test_the_last_round_waits_for_every_straggler():
    book = RoundBook(1, steps=3, staleness=5, wait_s=0.0, in_tree=True)
    book.offer(0, 0, grad(0), 0.0)
    book.apply(book.take(), 0.0)
    assert book.ready(0.0)  # round 1 may go without it ...
    book.apply(book.take(), 0.0)
    assert not book.ready(1e9)  # ... round 2, the last, may not: it waits for the step of its own
    book.offer(0, 1, grad(1), 1.0)
    assert not book.ready(1e9)
    book.offer(0, 2, grad(2), 2.0)
    assert book.ready(2.0) and book.take().included == ((0, 1), (0, 2))


def bucket(step: int) -> np.ndarray:
    """A model job's gradient for round `step`: two lead rounds 4 long, then buckets 5 and 3 long."""
    return np.full(4 if step < 2 else (5, 3)[step % 2], step + 1, dtype=np.float32)


def test_a_models_late_bucket_joins_its_bucket_in_a_later_iteration_within_the_bound():
    """Staleness in iterations (lead 2 rounds, 2 buckets an iteration, 6 iterations, S = 2): the seat waits for
    the straggler's iteration only while it may be on time, a late bucket joins the same bucket's round S
    iterations on (never the other bucket's), the bound forces a wait, the straggler pulls the iterations it
    missed, and the record of what each round holds gives every round's exact sum."""
    from hosts.models.workload import exact_sums

    book = RoundBook(1, steps=14, staleness=2, wait_s=0.5, in_tree=True, lead=2, per_iteration=2)
    for step in range(4):  # the lead rounds and the first iteration wait for it
        assert not book.ready(1e9)
        book.offer(0, step, bucket(step), 0.0)
        assert book.ready(0.0)
        book.apply(book.take(), 0.0)
        book.answered(0, step)
    assert book.maybe_on_time() == [0] and not book.ready(0.4)  # (1, 0): computed on fresh weights, waited for
    assert book.ready(0.5)
    r4 = book.take()
    assert r4.included == () and r4.total.tolist() == [0.0] * 5  # the seat contributes zeros of bucket 0's length
    book.apply(r4, 0.5)
    assert book.maybe_on_time() == [] and book.ready(0.5)  # it missed bucket 0: late for the rest of iteration 1
    for _ in (5, 6):  # (1, 1), (2, 0) go on without it
        book.apply(book.take(), 0.5)
    assert book.offer(0, 4, bucket(4), 1.0).index == 4  # its (1, 0), late: answered with the closed round
    book.answered(0, 4)
    assert book.ready(1.0)
    r7 = book.take()
    assert r7.included == () and r7.total.size == 3  # (2, 1): bucket 1's round takes no bucket 0 gradient
    book.apply(r7, 1.0)
    r8 = book.close(1.0)  # (3, 0): its (1, 0) joins, two iterations late
    assert r8.included == ((0, 4),) and book.lag(r8) == 2 and r8.total.tolist() == [5.0] * 5
    assert not book.ready(1e9)  # (3, 1) would leave its (1, 1) three iterations late: the bound waits for it
    assert book.offer(0, 5, bucket(5), 2.0).index == 5
    book.answered(0, 5)
    r9 = book.close(2.0)
    assert r9.included == ((0, 5),) and book.lag(r9) == 2
    assert [book.pull(0, r).index for r in (6, 7, 8, 9)] == [6, 7, 8, 9]  # it skips iterations 2 and 3
    book.answered(0, 9)
    assert book.maybe_on_time() == [0] and not book.ready(2.4)  # on the newest weights again: waited for,
    assert book.ready(2.5)  # only wait_s: nothing it sends now can be more than S iterations late (pulls count)
    for step in (10, 11):
        book.offer(0, step, bucket(step), 2.1)
        assert book.close(2.1).included == ((0, step),)
        book.answered(0, step)
    assert not book.ready(1e9)  # the last iteration waits for it
    for step in (12, 13):
        book.offer(0, step, bucket(step), 3.0)
        book.apply(book.take(), 3.0)
    stats = book.stats
    assert (stats.rounds, stats.contributions, stats.pulled, stats.max_staleness) == (14, 10, 4, 2)
    assert stats.staleness_counts == {0: 8, 2: 2}  # every gradient it computed, summed once
    assert sorted(step for held in stats.included for _, step in held) == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13]
    # three workers, the straggler rank 1 in the seat: the switches add ranks 0 and 2 (1 + 3) to every round
    sums = exact_sums(3, [1], stats.included)
    assert sums[4:10] == [4.0, 4.0, 4.0, 4.0, 6.0, 6.0] and sums[:4] == [6.0] * 4


class OnTime(AllReduce):
    """The tree, seen from the seat: every round adds the on-time workers' sum, 100 x (round + 1)."""

    def __init__(self):
        self.rank, self.world_size, self.rounds = 0, 1, 0

    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        self.rounds += 1
        return vec + np.float32(100 * self.rounds)

    def close(self) -> None:
        pass


def test_a_slow_straggler_is_folded_in_late_and_catches_up(tmp_path):
    steps, bound, slow_steps, delay = 24, 3, 8, 0.08
    ep = Endpoint("h4", "127.0.0.1", wk.free_ports(1)[0])
    server = SplitAggregator(ep, ["h2"], RoundBook(1, steps, bound, 0.02, in_tree=True), OnTime(), timeout_s=10)
    thread, out = wk.serve_in_thread(server)
    applied, computed = [], []
    with HostAggClient([ep], "h2", rank=1, world_size=3, timeout_s=10, seat=0) as comm:
        for step in range(steps):  # hosts.train's loop: pull a closed round, else compute and send
            pulled = comm.closed_rounds(step, 1)
            total = pulled[0] if pulled else None
            if total is None:
                time.sleep(delay if len(computed) < slow_steps else 0.0)
                computed.append(step)
                total = comm.allreduce(grad(step))
            applied.append(total)
        skipped = comm.skipped
    thread.join(10)
    stats = out["stats"]
    on_time = np.array([np.full(SIZE, 100.0 * (r + 1)) for r in range(steps)])
    late = np.array(applied) - on_time  # what the seat contributed each round
    assert len(applied) == steps and skipped == steps - len(computed) > 0
    np.testing.assert_array_equal(late.sum(axis=0), sum(grad(s) for s in computed))  # each gradient once
    assert stats.contributions == len(computed) and stats.pulled == skipped
    assert 0 < stats.max_staleness <= bound and stats.stale_contributions > 0
    assert computed[-1] == steps - 1  # caught up: the last rounds wait for it and it computes them


def test_a_split_job_puts_its_aggregator_in_the_stragglers_seat(tmp_path):
    from config import load
    from controller.installer import job_spec, plan_job
    from hosts.agent_config import load_config
    from testbed.config import RunConfig
    from testbed.run import Run

    run = Run(load(RunConfig, {"job": {"workers": 3, "scheme": "split", "stragglers": {"h2": 0.2}, "staleness": 2},
                               "out": str(tmp_path)}, "run"))
    (job,) = run.jobs
    assert (job.scheme, job.split, job.aggregators) == ("split", ["h2"], ["h4"])
    assert job.members == ["h1", "h4", "h3"] and job.placement.job.workers == ("h1", "h4", "h3")
    job.spec = job_spec(run.topo, plan_job(job.placement, 1), 32)  # what installing the tree hands out
    run.run_dir.mkdir(parents=True)
    cfg = load_config(str(run.write_agent_config(job, "agent.json")))
    assert cfg.scheme == "split" and cfg.split_workers == ("h2",) and cfg.aggregator.name == "h4"
    assert [w.name for w in cfg.workers] == ["h1", "h2", "h3"] and [w.name for w in cfg.job.workers] == job.members


@pytest.mark.parametrize("job, message", [
    ({"workers": 3, "scheme": "split"}, "field 'job.stragglers': scheme split needs --straggler HOST=DELAY_S"),
    ({"workers": 4, "scheme": "split", "stragglers": {"h2": 0.1}},
     "job job1: split aggregation needs a host that runs no worker for its aggregator"),
    ({"workers": 3, "stragglers": {"h2": 0.1}, "straggle_s": [3, 1]}, "field 'job.straggle_s': give START,END with END > START"),
])
def test_bad_split_input_is_one_line(tmp_path, job, message):
    from config import ConfigError, load
    from testbed.config import RunConfig
    from testbed.run import Run

    with pytest.raises(ConfigError) as err:
        Run(load(RunConfig, {"job": job, "out": str(tmp_path)}, "run"))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_scenario_mode_split_seats_each_straggling_jobs_aggregator(tmp_path):
    from testbed.scenario import ModeRun, parse_scenario

    data = {"network": {"topo": "leafspine"}, "modes": ["split"], "job": {"stragglers": {"h3": 0.1}},
            "jobs": [{"name": "a", "workers": ["h1", "h3", "h4"], "ps": "h2"},
                     {"name": "b", "workers": ["h5", "h7"]}]}
    a, b = ModeRun(parse_scenario(data, "x.yaml"), "split", tmp_path / "split").jobs
    assert (a.scheme, a.split, a.aggregators, a.members) == ("split", ["h3"], ["h2"], ["h1", "h2", "h4"])
    assert a.placement.job.workers == ("h1", "h2", "h4")  # the tree holds the seat, not the straggler
    assert (b.scheme, b.split, b.aggregators) == ("innet", [], [])  # nothing straggles: plain in-network


def test_the_replica_stands_by_in_the_aggregators_seat(tmp_path):
    from config import load
    from controller.installer import desired_state, plan_job
    from testbed.config import RunConfig
    from testbed.run import Run

    run = Run(load(RunConfig, {"network": {"topo": "star8"}, "out": str(tmp_path),
                               "job": {"worker_hosts": ["h1", "h2", "h3"], "scheme": "split", "stragglers": {"h2": 0.1}}},
                   "run"))
    (job,) = run.jobs
    assert job.aggregators == ["h4", "h5"] and job.standby == (("h4", "h5"),)
    s1 = desired_state(run.topo, [plan_job(job.placement, 1)])["s1"]
    bits = {e.match[1][1]: e.param("index") for e in s1.table("AggIngress.agg_child")}  # ingress port -> bit
    port = {h: run.topo.port_of("s1", h) for h in ("h1", "h3", "h4", "h5")}
    assert set(bits) == set(port.values()) and len({bits[port[h]] for h in ("h1", "h3", "h4")}) == 3
    assert bits[port["h5"]] == bits[port["h4"]]  # the replica has the seat's bit
    assert {p for p, _ in s1.groups[0x1001]} == set(port.values())  # results reach the replica too
    assert {e.match[0][1] for e in s1.table("AggEgress.agg_host")} == set(port.values())


def test_scenario_split_seats_only_the_planned_stragglers(tmp_path):
    """Mode split seats a scheduled straggler, never a worker only random_stragglers slow: those are
    unpredictable, slow whatever scheme, and stay in the tree; they are still slowed (agent config)."""
    from testbed.scenario import ModeRun, parse_scenario

    data = {"network": {"topo": "leafspine"}, "modes": ["split"],
            "stragglers": [{"worker": "h4", "factor": 2, "start_s": 1, "duration_s": 1}],
            "random_stragglers": [{"factor": 3, "duration_s": 5, "mean_gap_s": 0.1, "until_s": 20}],
            "jobs": [{"name": "a", "workers": ["h1", "h3", "h4"], "ps": "h2"},
                     {"name": "b", "workers": ["h5", "h7"]}]}
    run = ModeRun(parse_scenario(data, "x.yaml"), "split", tmp_path / "split")
    a, b = run.jobs
    assert set(run.timeline.slowdowns) >= {"h1", "h3", "h5", "h7"}  # the random periods touch every worker
    assert (a.scheme, a.split, a.members) == ("split", ["h4"], ["h1", "h3", "h2"])  # h4 only: it was planned
    assert (b.scheme, b.split) == ("innet", [])  # only random stragglers: plain in-network
    assert run.slowed_of(a) == ["h1", "h3", "h4"] and run.slowed_of(b) == ["h5", "h7"]


class GatedTree(OnTime):
    """OnTime, but each round waits in the tree until the test lets one through (`release`)."""

    def __init__(self):
        super().__init__()
        self.entered = 0
        self.changed = threading.Condition()
        self.gate = threading.Semaphore(0)

    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        with self.changed:
            self.entered += 1
            self.changed.notify_all()
        self.gate.acquire()
        return super().allreduce(vec)

    def wait_in(self, rounds: int) -> None:
        """Until the seat went into the tree for its `rounds`-th round (and waits there)."""
        with self.changed:
            self.changed.wait_for(lambda: self.entered >= rounds)

    def release(self, rounds: int = 1) -> None:
        for _ in range(rounds):
            self.gate.release()


def test_a_laggard_is_answered_between_rounds_not_after_every_ready_one():
    """The seat goes into the tree one round at a time and reads what came in between: a lagging straggler's
    late gradient is answered after the round in flight (newest: that round), not once every round the bound
    allows has gone through the tree, so it pulls and computes on the newest weights at once."""
    steps = 10
    tree = GatedTree()
    ep = Endpoint("h4", "127.0.0.1", wk.free_ports(1)[0])
    server = SplitAggregator(ep, ["h2"], RoundBook(1, steps, staleness=5, wait_s=0.0, in_tree=True), tree,
                             timeout_s=30)
    serving = threading.Thread(target=server.serve, daemon=True)
    serving.start()
    with HostAggClient([ep], "h2", rank=1, world_size=3, timeout_s=30, seat=0) as comm:
        tree.release()  # round 0 (everyone) with its gradient
        comm.allreduce(grad(0))
        tree.release(3)  # rounds 1-3 go on without it; the seat waits in the tree with round 4
        tree.wait_in(5)
        late, before = {}, comm.bytes_sent
        sender = threading.Thread(target=lambda: late.update(total=comm.allreduce(grad(1))), daemon=True)
        sender.start()  # its step 1, late: round 1 closed
        while comm.bytes_sent < before + GRAD.size + grad(1).nbytes:  # on the aggregator's socket
            time.sleep(0.001)
        tree.release()  # round 4 only
        sender.join()
        assert comm.newest == 4 and late["total"].tolist() == [200.0] * SIZE  # round 1: the tree's part alone
        tree.release(steps)  # the rest goes through as it comes
        assert [t.tolist()[0] for t in comm.closed_rounds(2, 3)] == [300.0, 400.0, 500.0]  # in one request
        for step in range(5, steps):
            pulled = comm.closed_rounds(step, 1)
            if pulled is None:
                comm.allreduce(grad(step))
    serving.join()
    server.close()
    held = server.book.stats.included
    assert held[5] == [[0, 1]]  # its late step, in the round after the one in flight when it came
    summed = [step for pairs in held for _, step in pairs]
    assert len(summed) == len(set(summed)) and summed[-1] == steps - 1  # each once; the last round waits for it
