"""Fault specs: parsing, checks against the topology (one-line errors), and the CPU throttle
that makes a running worker straggle."""
import subprocess
import sys
import time

import pytest

from controller.topology import load_topology
from testbed.experiment import resolve_topology
from testbed.faults import CpuThrottle, Fault, FaultError, FaultRunConfig, check_run_config, parse_fault

TOPO = load_topology(resolve_topology("leafspine"))
WORKERS = ("h1", "h3")


@pytest.mark.parametrize("text, fault", [
    ("kill_switch:s1@10", Fault("kill_switch", "s1", 10)),
    ("link_down:s3-s1@4", Fault("link_down", "s3-s1", 4)),
    ("slow_worker:h3@0=0.25", Fault("slow_worker", "h3", 0, 0.25)),
    ("kill_aggregator:h8@7", Fault("kill_aggregator", "h8", 7)),
])
def test_faults_parse_and_print_back(text, fault):
    assert parse_fault(text, TOPO, WORKERS) == fault
    assert str(fault) == text


@pytest.mark.parametrize("text, message", [
    ("explode:s1@3", "expected KIND:TARGET@STEP"),
    ("kill_switch:s1", "expected KIND:TARGET@STEP"),
    ("kill_switch:s9@3", "no switch 's9' in"),
    ("link_down:s3-s4@3", "no link 's3-s4' in"),
    ("slow_worker:h2@3=0.5", "'h2' is not a worker (h1, h3)"),
    ("slow_worker:h1@3", "slow_worker needs =SHARE"),
    ("slow_worker:h1@3=1.5", "slow_worker needs =SHARE"),
])
def test_bad_faults_are_one_line_errors(text, message):
    with pytest.raises(FaultError) as info:
        parse_fault(text, TOPO, WORKERS)
    assert message in str(info.value) and "\n" not in str(info.value) and info.value.exit_code == 2
    assert str(info.value).startswith(f"--fault {text!r}: ")


def test_run_config_checks():
    check_run_config(FaultRunConfig(faults=(parse_fault("kill_switch:s1@3"),)), TOPO)
    cases = [
        (FaultRunConfig(workers=("h1", "h99")), "workers: 'h99' is not a host of"),
        (FaultRunConfig(scheme="ring"), "scheme: 'ring' is not one of innet, hostagg"),
        (FaultRunConfig(faults=(parse_fault("kill_aggregator:h8@3"),)), "there is no host aggregator in scheme innet"),
        (FaultRunConfig(scheme="hostagg", faults=(parse_fault("kill_switch:s1@3"),)), "for scheme innet only"),
        (FaultRunConfig(stragglers=(("h2", 0.1),)), "stragglers: 'h2' must be a worker"),
    ]
    for cfg, message in cases:
        with pytest.raises(FaultError, match=message):
            check_run_config(cfg, TOPO)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime in clock ticks


def test_cpu_throttle_limits_a_busy_process():
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        before = cpu_seconds(proc.pid)
        time.sleep(1.0)
        free = cpu_seconds(proc.pid) - before
        throttle = CpuThrottle(proc.pid, 0.2)
        before = cpu_seconds(proc.pid)
        time.sleep(2.0)
        limited = (cpu_seconds(proc.pid) - before) / 2.0
        throttle.stop()
        assert free > 0.1  # it spins (less than a full core when the machine is busy)
        assert limited < 0.4 * free, (free, limited)
        time.sleep(0.2)
        assert proc.poll() is None  # stopped throttling leaves it running (SIGCONT)
        state = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0]
        assert state in "RS"
    finally:
        proc.kill()
        proc.wait()
