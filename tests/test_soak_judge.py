"""The soak's judges without a network: the growth judge flags a leaking series and passes a flat
noisy one; a seed gives one fault schedule; a lost step or a grown series is one line naming it."""
from __future__ import annotations

import os
import random

from controller.topology import load_topology
from testbed import growth
from testbed.soak import REPO, draw_schedule, failure_lines

MINUTE = 60.0


def series_over(minutes: float, value, every_s: float = 5.0) -> list[tuple[float, float]]:
    n = int(minutes * MINUTE / every_s)
    return [(i * every_s, value(i * every_s)) for i in range(n + 1)]


def test_growth_judge_flags_a_leak_and_passes_flat_noise():
    rng = random.Random(1)
    series = {
        ("s1[10]", "rss_kb"): series_over(60, lambda t: 100_000 + 10 * t),  # 10 KiB/s: 18 MiB per half hour
        ("s2[11]", "rss_kb"): series_over(60, lambda t: 100_000 + rng.uniform(-4000, 4000)),
        ("s1[10]", "fds"): series_over(60, lambda t: 20 + t // 300),  # one more descriptor every 5 minutes
        ("s2[11]", "fds"): series_over(60, lambda t: 20 + rng.choice((0, 1, 2))),
        ("system", "interfaces"): series_over(60, lambda t: 13),
    }
    verdicts = {(v["series"], v["metric"]): v for v in growth.judge(series)}
    assert verdicts[("s1[10]", "rss_kb")]["verdict"] == "growth"
    assert verdicts[("s1[10]", "rss_kb")]["growth"] > 17_000
    assert verdicts[("s1[10]", "fds")]["verdict"] == "growth"
    assert verdicts[("s2[11]", "rss_kb")]["verdict"] == "ok"
    assert verdicts[("s2[11]", "fds")]["verdict"] == "ok"
    assert verdicts[("system", "interfaces")]["verdict"] == "ok" and verdicts[("system", "interfaces")]["growth"] == 0
    lines = growth.failures(verdicts.values())
    assert len(lines) == 2 and lines[0].startswith("s1[10]: fds grew by") and lines[1].startswith("s1[10]: rss_kb")


def test_warm_up_ended_and_short_series_are_not_leaks():
    series = {
        # first half ramps (start-up), second half flat: not growth
        ("soak[1]", "rss_kb"): series_over(60, lambda t: min(t, 1800) * 100 + 50_000),
        # a worker that ramped all its short life and exited before the end
        ("a.h1.r0s0[2]", "rss_kb"): series_over(2, lambda t: 1000 * t),
        # a switch restarted near the end: a new series covering little of the run
        ("s1[3]", "rss_kb"): [(3500.0 + i, 100_000.0 + 1000 * i) for i in range(101)],
    }
    verdicts = {v["series"]: v["verdict"] for v in growth.judge(series)}
    assert verdicts == {"soak[1]": "ok", "a.h1.r0s0[2]": "ended", "s1[3]": "short"}


def test_sampler_writes_what_load_series_reads(tmp_path):
    path = tmp_path / "samples.jsonl"
    sampler = growth.Sampler(path, lambda: {"me": os.getpid()})
    for t in (0.0, 1.0, 2.0):
        sampler.sample(t)
    series = growth.load_series(path)
    key = f"me[{os.getpid()}]"
    assert {m for (name, m) in series if name == key} == set(growth.PROCESS_METRICS)
    assert {m for (name, m) in series if name == growth.SYSTEM} == set(growth.SYSTEM_METRICS)
    assert [t for t, _ in series[(key, "rss_kb")]] == [0.0, 1.0, 2.0]
    assert all(v > 1000 for _, v in series[(key, "rss_kb")]) and all(v >= 1 for _, v in series[(key, "threads")])
    assert all(v >= 1 for _, v in series[(growth.SYSTEM, "interfaces")])  # lo at least
    assert sampler.count == 3


def test_same_seed_same_schedule_one_fault_at_a_time():
    topo = load_topology(str(REPO / "topologies" / "tree2.yaml"))
    jobs = {"a": ["h1", "h5"], "b": ["h2", "h6"]}
    first = draw_schedule(5, topo, jobs, 3600, 20)
    assert first == draw_schedule(5, topo, jobs, 3600, 20)
    assert first != draw_schedule(6, topo, jobs, 3600, 20)
    assert {a.kind for a in first} == {"kill_switch", "restart_controller", "kill_worker", "link_down", "link_up",
                                       "loss", "delay"}
    assert all(0 < a.at_s < 3600 + 60 for a in first)
    by_fault: dict[int, list] = {}
    for a in first:
        by_fault.setdefault(a.fault, []).append(a)
    faults = [by_fault[n] for n in sorted(by_fault)]
    for before, after in zip(faults, faults[1:]):
        assert before[-1].at_s < after[0].at_s  # the next fault starts after the last one ended
    for steps in faults:
        kinds = [a.kind for a in steps]
        if "link_down" in kinds:  # a flap: down, up, down, up ... on one fabric link, ending up
            assert kinds == ["link_down", "link_up"] * (len(kinds) // 2)
            assert len({a.target for a in steps}) == 1 and steps[0].target in ("s2-s1", "s3-s1")
        elif kinds[0] in ("loss", "delay"):  # set, then back to the link's own
            assert len(steps) == 2 and steps[0].value > 0 and steps[1].value == 0
        else:
            assert len(steps) == 1


def test_failure_lines_name_the_lost_step_and_the_growth():
    ok_job = {"lineage_ok": True, "weights_equal_round_0": True, "steps_applied": {"h1": 20}}
    report = {"verdicts": {"rounds_with_faults": 1},
              "rounds": [{"round": 0, "jobs": {"a": {**ok_job, "weights_equal_round_0": None}}},
                         {"round": 1, "jobs": {"a": {**ok_job, "lineage_ok": False, "steps_applied": {"h1": 19},
                                                     "weights_equal_round_0": False}}}],
              "growth": [{"series": "s1[7]", "metric": "fds", "verdict": "growth", "growth": 9.0, "tolerance": 3.0}]}
    assert failure_lines(report) == [
        "round 1: job a: a step was lost or applied twice (steps applied {'h1': 19})",
        "round 1: job a: final weights differ from round 0's",
        "s1[7]: fds grew by 9 over the second half of its samples (tolerance 3)"]
    report["rounds"][1]["jobs"]["a"] = ok_job
    report["growth"][0]["verdict"] = "ok"
    assert failure_lines(report) == []
