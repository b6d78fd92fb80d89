"""The fidelity monitor (testbed.fidelity): link utilization per direction from port counters, CPU use of
real processes, and which of them bound the run."""
from __future__ import annotations

import subprocess
import sys
import time

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


def test_a_link_at_its_rate_is_the_bottleneck_and_no_warning_is_given():
    verdict = fidelity.assess({"s1->h1": 0.97, "h1->s1": 0.4}, {"s1": 0.95}, {"h1": 0.3})
    assert verdict == {"bottleneck": {"kind": "link", "name": "s1->h1", "load": 0.97}, "warning": None}


def test_a_busy_process_with_links_to_spare_is_named_in_one_warning_line():
    verdict = fidelity.assess({"s1->h1": 0.5}, {"s1": 1.0}, {"h2": 0.2})
    assert verdict["bottleneck"] == {"kind": "switch", "name": "s1", "load": 1.0}
    assert verdict["warning"] == ("fidelity: switch s1 was busy 100% of a core while the busiest link ran at 50% of its "
                                  "rate: this run measured the machine, not the network")
    assert fidelity.assess({"s1->h1": 0.5}, {"s1": 0.5}, {"h2": 0.2}) == {"bottleneck": None, "warning": None}


def test_cpu_meter_measures_a_busy_and_an_idle_process():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)  # both past the interpreter's start-up
        meter = fidelity.CpuMeter()
        meter.start({"busy": busy.pid, "idle": idle.pid})
        for _ in range(10):
            time.sleep(0.1)
            meter.sample({"busy": busy.pid, "idle": idle.pid})
        used = meter.fractions()
    finally:
        for proc in (busy, idle):
            proc.kill()
            proc.wait()
    assert used["busy"] > used["idle"] and used["idle"] < 0.05  # a spinning process shows, a sleeping one does not
    assert fidelity.cpu_seconds(busy.pid) is None  # gone: its last sample stays its total


def test_queue_drops_add_tail_and_loss_drops_of_every_port():
    queues = {"s1": {"1": {"tail_drops": 3, "loss_drops": 2}, "2": {"tail_drops": 1, "loss_drops": 0}}, "s2": {}}
    assert fidelity.queue_drops(queues) == {"s1": 6}
