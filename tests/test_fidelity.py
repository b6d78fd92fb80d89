"""The fidelity monitor (testbed.fidelity): link utilization per direction from port counters, CPU use of
real processes, and which of them bound the run."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from procs import wait_until

from controller.topology import load_topology
from testbed import fidelity
from testbed.run import REPO

STAR4 = str(REPO / "topologies" / "star4.yaml")  # every link 100 Mb/s; s1 port p leads to host hp


def port(tx_bytes: int = 0, rx_bytes: int = 0) -> dict:
    return {"tx_packets": 0, "tx_bytes": tx_bytes, "rx_packets": 0, "rx_bytes": rx_bytes}


def test_each_direction_of_a_link_from_the_counter_of_the_switch_it_leaves_or_enters():
    topo = load_topology(STAR4)
    counters = {"s1": {"ports": {1: port(tx_bytes=125_000_000, rx_bytes=62_500_000), 2: port(), 3: port(), 4: port()}}}
    util = fidelity.link_utilization(topo, counters, seconds=10.0)
    assert util["s1->h1"] == 1.0 and util["h1->s1"] == 0.5  # 1 Gbit and 0.5 Gbit in 10 s on 100 Mb/s
    assert util["s1->h2"] == util["h2->s1"] == 0.0 and len(util) == 8


def test_each_busy_phase_may_start_with_a_full_token_bucket():
    """Ten 30 ms phases on a 100 Mb/s link: the rate allows 3.75 MB, and each phase may open with
    DEFAULT_BURST_S of it sent at once out of the switch (p4target.tm): 4.4 MB is then 100%, not 117%."""
    topo = load_topology(STAR4)
    burst_bytes = 100e6 / 8 * fidelity.DEFAULT_BURST_S
    counters = {"s1": {"ports": {1: port(tx_bytes=round(3_750_000 + 10 * burst_bytes)), 2: port(), 3: port(),
                                 4: port()}}}
    util = fidelity.link_utilization(topo, counters, seconds=0.3, phases=10)
    assert util["s1->h1"] == 1.0
    assert fidelity.link_utilization(topo, counters, seconds=0.3)["s1->h1"] == pytest.approx(
        (3_750_000 + 10 * burst_bytes) / (3_750_000 + burst_bytes), abs=0.001)
    # a host's tbf holds two frames: each phase may open with those only
    counters["s1"]["ports"][1] = port(rx_bytes=round(3_750_000 + 10 * 2 * 1514))
    assert fidelity.link_utilization(topo, counters, seconds=0.3, phases=10)["h1->s1"] == 1.0


def test_a_link_at_its_rate_is_the_bottleneck_and_no_warning_is_given():
    verdict = fidelity.assess({"s1->h1": 0.97, "h1->s1": 0.4}, {"s1": 0.95}, {"h1": 0.3})
    assert verdict == {"bottleneck": {"kind": "link", "name": "s1->h1", "load": 0.97}, "warning": None,
                       "links_bind_at_scale": None}


def test_a_busy_process_with_links_to_spare_is_named_in_one_warning_line():
    verdict = fidelity.assess({"s1->h1": 0.5}, {"s1": 1.0}, {"h2": 0.2})
    assert verdict["bottleneck"] == {"kind": "switch", "name": "s1", "load": 1.0}
    assert verdict["warning"] == ("fidelity: switch s1 was busy 100% of a core while the busiest link ran at 50% of its "
                                  "rate: this run measured the machine, not the network")
    assert fidelity.assess({"s1->h1": 0.5}, {"s1": 0.5}, {"h2": 0.2}) == {"bottleneck": None, "warning": None,
                                                                           "links_bind_at_scale": None}


def test_busy_cores_bind_a_run_no_single_process_does_but_yield_to_a_busy_link_or_process():
    verdict = fidelity.assess({"s1->h1": 0.6}, {"s1": 0.5}, {"h1": 0.45, "h2": 0.45}, cores=0.97, ncores=2, scale=4)
    assert verdict["bottleneck"] == {"kind": "machine", "name": "2 cores", "load": 0.97}
    # the same work at 4 * 0.97 / (0.6 * 0.9) = 7.2 -> the next step, 8: the cores keep below 90% of the links' time
    assert verdict["links_bind_at_scale"] == 8
    assert verdict["warning"] == ("fidelity: the machine's 2 cores were 97% busy while the busiest link ran at 60% of "
                                  "its rate: this run measured the machine, not the network; at --scale 8 the links "
                                  "would have bound it")
    assert fidelity.assess({"s1->h1": 0.95}, {}, {}, cores=0.99, ncores=2)["bottleneck"]["kind"] == "link"
    assert fidelity.assess({"s1->h1": 0.5}, {"s1": 0.92}, {}, cores=0.99, ncores=2)["bottleneck"]["kind"] == "switch"


def test_cpu_meter_reads_the_cpu_a_process_spent_in_a_window_of_its_samples(monkeypatch):
    clock, cpu = [100.0], {7: 0.0}
    monkeypatch.setattr(fidelity.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(fidelity, "cpu_seconds", lambda pid: cpu.get(pid))
    monkeypatch.setattr(fidelity, "machine_busy_seconds", lambda: 2 * cpu.get(7, 0.0))
    meter = fidelity.CpuMeter(lambda: {"h1": 7})
    for t, used in ((100.0, 0.0), (101.0, 0.0), (102.0, 1.0), (103.0, 1.5)):
        clock[0], cpu[7] = t, used
        meter.sample()
    del cpu[7]  # gone: its last sample stays its total
    clock[0] = 104.0
    meter.sample()
    assert meter.span() == (100.0, 104.0)
    assert meter.used((101.0, 102.0)) == {"h1": 1.0, fidelity.MACHINE: 2.0}
    assert meter.used((101.5, 102.5))["h1"] == 0.5 + 0.25  # linear between samples at both edges
    assert meter.used((90.0, 200.0))["h1"] == 1.5  # flat outside the samples
    assert meter.used((100.0, 101.0), (101.5, 102.0), (102.5, 103.0)) == {"h1": 0.0 + 0.5 + 0.25, fidelity.MACHINE: 1.5}


def test_a_process_restarted_under_its_name_adds_its_lives(monkeypatch):
    clock, pids, cpu = [0.0], {"h1": 1}, {1: 0.0, 2: 0.0}
    monkeypatch.setattr(fidelity.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(fidelity, "cpu_seconds", lambda pid: cpu.get(pid))
    meter = fidelity.CpuMeter(lambda: pids)
    for t, pid, used in ((0.0, 1, 0.0), (1.0, 1, 0.8), (2.0, 2, 0.1), (3.0, 2, 0.6)):
        clock[0], pids["h1"], cpu[pid] = t, pid, used
        meter.sample()
    assert meter.used((0.0, 3.0))["h1"] == pytest.approx(0.8 + 0.6 - 0.1)


def test_cpu_meter_measures_a_busy_and_an_idle_process_on_its_own_thread():
    """Counted, not timed: the meter's own thread keeps sampling until the spinning process has used
    0.2 s of CPU by its samples; in that window the sleeping one (past its start-up) used next to none."""
    ready = "import sys; print('up', flush=True); sys.stdout.close(); "
    busy = subprocess.Popen([sys.executable, "-c", ready + "\nwhile True: pass"], stdout=subprocess.PIPE, text=True)
    idle = subprocess.Popen([sys.executable, "-c", ready + "import time; time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        for proc in (busy, idle):
            assert proc.stdout is not None and proc.stdout.readline() == "up\n"  # past the interpreter's start-up
        meter = fidelity.CpuMeter(lambda: {"busy": busy.pid, "idle": idle.pid}).start()
        while True:
            series = list(meter.series[("busy", busy.pid)])
            if len(series) >= 10 and series[-1][1] - series[0][1] >= 0.2:
                break
            time.sleep(0.05)
        meter.stop()
    finally:
        for proc in (busy, idle):
            proc.kill()
            proc.wait()
    used = meter.used(meter.span())
    assert used["busy"] >= 0.2 and used["idle"] < 0.05  # a spinning process shows, a sleeping one not
    # the cores did at least what the busy process did, within the clock tick (0.01 s) both counts are kept in,
    # read at each end of the window
    assert used[fidelity.MACHINE] >= used["busy"] - 0.02
    assert fidelity.cpu_seconds(busy.pid) is None


def test_the_meter_thread_goes_on_when_the_process_list_changes_under_it():
    calls = []

    def pids() -> dict[str, int]:
        calls.append(1)
        if len(calls) == 2:  # the run replaced a process while the thread read its list
            raise RuntimeError("dictionary changed size during iteration")
        return {"me": os.getpid()}

    meter = fidelity.CpuMeter(pids).start()
    wait_until(lambda: len(calls) >= 5)  # samples went on after the failed one
    meter.stop()
    assert not meter.thread.is_alive()
    assert len(meter.series[("me", os.getpid())]) == len(calls) - 1  # every sample but the failed one


def test_the_workload_window_spans_every_worker_and_is_absent_without_any():
    assert fidelity.workload_window([(5.0, 6.0), (4.5, 5.5), (5.2, 6.4)]) == (4.5, 6.4)
    assert fidelity.workload_window([]) is None


def test_the_union_of_intervals_merges_those_that_overlap_or_touch():
    assert fidelity.union([(5.0, 6.0), (1.0, 2.0), (1.5, 3.0), (3.0, 4.0), (5.5, 5.8), (7.0, 7.5)]) == [
        (1.0, 4.0), (5.0, 6.0), (7.0, 7.5)]
    assert fidelity.union([]) == []


def test_the_intersection_is_when_every_worker_had_an_all_reduce_in_flight():
    """h2 straggles: it starts its first all-reduce at 3, so 0-3 was h1 waiting, not communication."""
    h1, h2, h3 = [(0.0, 5.0), (6.0, 9.0)], [(3.0, 7.0), (8.0, 10.0)], [(2.5, 9.5)]
    assert fidelity.intersection([h1, h2, h3]) == [(3.0, 5.0), (6.0, 7.0), (8.0, 9.0)]
    assert fidelity.intersection([h1]) == h1 and fidelity.intersection([h1, []]) == []


def test_a_link_busy_in_short_communication_phases_binds_them_though_idle_over_the_run():
    """4 s of communication in a 10 s run (the rest compute): 3.8 s worth of s1->h1's rate, counted over the
    whole run, is 38%; over the communication phases 95% (a little less: each may open with a token bucket's
    burst). Processes at a constant load show it either way."""
    topo = load_topology(STAR4)
    counters = {"s1": {"ports": {1: port(tx_bytes=int(3.8 * 100e6 / 8)), 2: port(), 3: port(), 4: port()}}}
    meter = fidelity.CpuMeter(dict)  # samples at the run's ends: a constant load in between
    meter.series = {(name, 1): [(0.0, 0.0), (10.0, 10 * load)] for name, load in
                    (("s1", 0.5), ("h1", 0.2), (fidelity.MACHINE, 0.8))}
    whole = fidelity.report(topo, counters, {}, [(0.0, 10.0)], "workload", meter, {"s1"})
    assert whole["link_utilization"]["s1->h1"] == 0.38 and whole["bottleneck"] is None
    phases = [(1.0, 2.5), (4.0, 5.0), (8.0, 9.5)]
    comm = fidelity.report(topo, counters, {}, phases, "communication", meter, {"s1"})
    assert comm["seconds"] == 4.0 and comm["measured_over"] == "communication" and comm["phases"] == 3
    load = round(3.8 / (4.0 + 3 * fidelity.DEFAULT_BURST_S), 3)
    assert comm["link_utilization"]["s1->h1"] == load > 0.94
    assert comm["bottleneck"] == {"kind": "link", "name": "s1->h1", "load": load} and comm["warning"] is None
    assert comm["switch_busy"] == {"s1": 0.5} and comm["host_cpu"] == {"h1": 0.2}
    assert comm["cores_busy"] == round(0.8 / (os.cpu_count() or 1), 3)


def test_queue_drops_add_tail_and_loss_drops_of_every_port():
    queues = {"s1": {"1": {"tail_drops": 3, "loss_drops": 2}, "2": {"tail_drops": 1, "loss_drops": 0}}, "s2": {}}
    assert fidelity.queue_drops(queues) == {"s1": 6}


def test_a_bottleneck_that_moves_between_links_binds_every_slice_and_no_link_on_average():
    """Background traffic fills s1->h1 for a second, then s1->h2 for a second (as a scenario's elephants
    move between spines): each link is 50% busy over those two seconds, so no link binds on average, but
    one of them binds every slice. In the third second the links idle, switch s1 is busy (a process) and in
    the fourth the cores (nothing else)."""
    topo = load_topology(STAR4)
    rate = 100e6 / 8
    links = fidelity.LinkMeter({})
    times = [i * 0.25 for i in range(17)]  # samples every 0.25 s over 4 s
    links.series = {("s1->h1", 0): [(t, rate * min(t, 1.0)) for t in times],
                    ("s1->h2", 0): [(t, rate * min(max(t - 1.0, 0.0), 1.0)) for t in times]}
    ncores = len(fidelity.usable_cpus())

    def busy(load_by_second: list[float]) -> list[tuple[float, float]]:  # cumulative CPU seconds
        return [(t, sum(load * min(max(t - i, 0.0), 1.0) for i, load in enumerate(load_by_second))) for t in times]

    cpu = fidelity.CpuMeter(dict)
    cpu.series = {(fidelity.MACHINE, 0): busy([0.5 * ncores, 0.5 * ncores, 0.6 * ncores, 0.95 * ncores]),
                  ("s1", 1): busy([0.3, 0.3, 0.97, 0.3]), ("h3", 2): busy([0.95, 0.95, 0.95, 0.95])}
    counters = {"s1": {"ports": {1: port(tx_bytes=int(rate)), 2: port(tx_bytes=int(rate)), 3: port(), 4: port()}}}
    verdict = fidelity.report(topo, counters, {}, [(0.0, 4.0)], "communication", cpu, {"s1"}, link_meter=links,
                              links={"s1->h1", "s1->h2"}, processes={"h1"})
    assert max(verdict["link_utilization"].values()) < fidelity.BUSY  # 25% each over the four seconds
    assert verdict["over_time"] == {"link": 0.5, "process": 0.25, "machine": 0.25, "none": 0.0,
                                    "links": {"s1->h1": 0.25, "s1->h2": 0.25}, "processes": {"s1": 0.25}}
    # only the links the job crosses count (without s1->h2 its second is nobody's), and only its processes (h3 is
    # another job's)
    alone = fidelity.report(topo, counters, {}, [(0.0, 4.0)], "communication", cpu, {"s1"}, link_meter=links,
                            links={"s1->h1"}, processes={"h1"})
    assert alone["over_time"] == {"link": 0.25, "process": 0.25, "machine": 0.25, "none": 0.25,
                                  "links": {"s1->h1": 0.25}, "processes": {"s1": 0.25}}


def test_the_verdict_text_names_what_bound_most_of_the_time():
    from testbed.report import bottleneck_text

    moving = {"bottleneck": {"kind": "machine", "name": "2 cores", "load": 0.93},
              "over_time": {"link": 0.81, "process": 0.0, "machine": 0.05, "none": 0.14,
                            "links": {"s1->s3": 0.45, "s2->s3": 0.36, "s4->s1": 0.0}, "processes": {}}}
    # the cores were busy throughout, but a link ran at its rate 81% of the time: the links bound it then
    assert bottleneck_text(moving) == "links 81% of the time (s1->s3, s2->s3)"
    relay = {"over_time": {"link": 0.3, "process": 0.6, "machine": 0.0, "none": 0.1, "links": {"s1->s3": 0.3},
                           "processes": {"agg@h9": 0.6}}}
    assert bottleneck_text(relay) == "process 60% of the time (agg@h9)"
    cores = {"over_time": {"link": 0.2, "process": 0.0, "machine": 0.6, "none": 0.2, "links": {"s1->s3": 0.2},
                           "processes": {}}}
    assert bottleneck_text(cores) == "cores 60% of the time"
    assert bottleneck_text({"over_time": {"link": 0.4, "process": 0.0, "machine": 0.3, "none": 0.3,
                                          "links": {"s1->s3": 0.4}, "processes": {}}}) == "none"
    assert bottleneck_text({"bottleneck": {"kind": "machine", "name": "2 cores", "load": 0.93}}) == "machine 2 cores 93%"


def test_the_cores_busy_are_those_the_run_may_use(monkeypatch):
    """A run pinned to core 0 (taskset -c 0) has one core: the meter counts cpu0's busy time, not the machine's."""
    def cpu0() -> float:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in next(line for line in f if line.startswith("cpu0 ")).split()[1:9]]
        return (sum(ticks) - ticks[3] - ticks[4]) / fidelity.CLOCK_TICKS

    assert fidelity.usable_cpus() == sorted(os.sched_getaffinity(0))
    monkeypatch.setattr(fidelity, "usable_cpus", lambda: [0])
    before = cpu0()
    measured = fidelity.machine_busy_seconds()
    assert before <= measured <= cpu0()
