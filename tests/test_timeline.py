"""A scenario's timeline (testbed.timeline): seeded and reproducible, heavy-tailed flows as drawn,
trace files replayed with one-line errors, and scaled to this machine's time and bytes."""
import statistics

import pytest

from testbed import timeline
from testbed.scenario import parse_scenario

JOBS = [{"name": "a", "workers": ["h1", "h3"]}, {"name": "b", "workers": ["h5", "h7"], "start_s": 0.5}]


def scenario(**fields):
    return parse_scenario({"network": {"topo": "leafspine"}, "modes": ["unaware"], "jobs": JOBS, **fields}, "x.yaml")


def test_the_same_seed_draws_the_same_timeline_and_entries_draw_apart():
    traffic = [{"name": "bg", "src": ["h2", "h4"], "dst": ["h6", "h8"], "mean_gap_s": 0.1, "until_s": 5}]
    slow = [{"factor": 2, "duration_s": 0.3, "mean_gap_s": 1, "until_s": 5}]
    one = timeline.build(scenario(random_traffic=traffic), seed=7)
    assert one == timeline.build(scenario(random_traffic=traffic), seed=7)
    assert one.flows != timeline.build(scenario(random_traffic=traffic), seed=8).flows
    both = timeline.build(scenario(random_traffic=traffic, random_stragglers=slow), seed=7)
    assert both.flows == one.flows and both.slowdowns and not one.slowdowns  # an entry of its own stream
    assert set(both.slowdowns) <= {"h1", "h3", "h5", "h7"} and one.arrivals == {"a": 0.0, "b": 0.5}
    for periods in both.slowdowns.values():
        assert all(e - s == pytest.approx(0.3) and f == 2 for s, e, f in periods)


def test_random_flows_follow_their_distributions():
    """Poisson arrivals (exponential gaps of the mean asked) and Pareto sizes (median x_m 2**(1/shape),
    x_m giving the mean asked), each sent at its rate, between two different hosts of the lists."""
    r = timeline.RandomTraffic(name="bg", src=("h1", "h2"), dst=("h2", "h3"), rate_mbps=8000, mean_size_mb=10,
                               shape=2.5, mean_gap_s=0.01, until_s=50)
    flows = timeline.draw_flows(r, timeline.random.Random(1))
    starts = [i[0] for _, _, _, i in flows]
    assert len(flows) == pytest.approx(5000, rel=0.05)
    assert statistics.mean(b - a for a, b in zip(starts, starts[1:])) == pytest.approx(0.01, rel=0.05)
    sizes = [(e - s) * rate / 8 for _, _, _, (s, e, rate) in flows if e < r.until_s]
    assert statistics.median(sizes) == pytest.approx(10 * 1.5 / 2.5 * 2 ** (1 / 2.5), rel=0.05)
    assert all(src != dst and dst in r.dst for src, dst, _, _ in flows)


def test_senders_group_flows_by_hosts_and_scale_to_this_machine(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("# start_s, src, dst, size_mb, rate_mbps, proto\n0.5, h2, h6, 100, 40000\n"
                     "0.52, h2, h6, 50, 40000\n2, h4, h8, 10, 20000, tcp\n")
    scn = scenario(trace_traffic=[{"file": str(trace)}],
                   traffic=[{"src": "h2", "dst": "h4", "rate_mbps": 1000, "duration_s": 3, "on_s": 1, "off_s": 1}])
    t = timeline.build(scn, seed=0)
    periodic, h2h6, h4h8 = t.flows
    assert (periodic.name, periodic.port, periodic.intervals) == ("flow1", 5001, ((0, 1, 1000), (2, 3, 1000)))
    assert (h2h6.name, h2h6.port, h4h8.port, h4h8.proto) == ("trace.h2-h6", 5002, 5003, "tcp")
    assert h2h6.intervals == ((0.5, 0.52, 40000), (0.52, 0.53, 40000)) and h2h6.megabytes == pytest.approx(150)
    slow = t.scaled(100, data_scale=0.01)  # 100 times slower, 1% of every byte
    assert [v for i in slow.flows[1].intervals for v in i] == pytest.approx([50, 52, 4, 52, 53, 4])
    assert slow.arrivals == {"a": 0.0, "b": 50.0}


@pytest.mark.parametrize("line, message", [
    ("0.5, h2, h6, 100", "t.csv:2: expected start_s, src, dst, size_mb, rate_mbps[, proto], got 4 fields"),
    ("0.5, h2, h6, lots, 100", "t.csv:2: size_mb 'lots' is not a number"),
    ("-1, h2, h6, 1, 100", "t.csv:2: start_s must be >= 0, got -1"),
    ("1, h2, h6, 1, 0", "t.csv:2: rate_mbps must be > 0, got 0"),
    ("1, h2, h2, 1, 10", "t.csv:2: a flow needs two different hosts, got h2 twice"),
    ("1, h2, h6, 1, 10, sctp", "t.csv:2: proto 'sctp' is not one of udp, tcp"),
])
def test_a_bad_trace_line_is_one_error_naming_file_field_and_line(tmp_path, line, message):
    trace = tmp_path / "t.csv"
    trace.write_text(f"# flows\n{line}\n")
    with pytest.raises(Exception) as err:
        scenario(trace_traffic=[{"file": str(trace)}])
    assert str(err.value) == f"x.yaml: field 'trace_traffic[0].file': {trace.parent}/{message}"
