"""Fault specs: parsing, checks against the topology (one-line errors), and the CPU throttle
that makes a running worker straggle."""
import subprocess
import sys
import time

import pytest

from controller.topology import load_topology
from hosts.agent_config import TrainConfig, load_config
from testbed.cli import build_parser
from testbed.experiment import resolve_topology
from testbed.faults import (CpuThrottle, Fault, FaultError, FaultRunConfig, _Run, _write_agent_config,
                            check_run_config, config_from_args, parse_fault, train_config)

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


def test_cli_defaults_are_the_config_defaults():
    assert config_from_args(build_parser().parse_args(["faults"])) == FaultRunConfig()
    assert (FaultRunConfig().train.steps, FaultRunConfig().train.eval_every) == (40, 0)


def test_cli_training_options_reach_the_train_config():
    args = build_parser().parse_args(["faults", "--steps", "12", "--seed", "3", "--k", "2", "--workers", "h1,h3"])
    cfg = config_from_args(args)
    assert cfg.train == TrainConfig(steps=12, seed=3, eval_every=0)
    assert (cfg.k, cfg.workers) == (2, ("h1", "h3"))


def test_agent_config_carries_every_training_field(tmp_path):
    train = train_config(model="cnn", dataset="synthetic", hidden=16, batch_size=8, lr=0.05, momentum=0.5,
                         steps=7, seed=5, eval_every=3)
    cfg = FaultRunConfig(workers=WORKERS, scheme="hostagg", train=train)
    path = _write_agent_config(_Run(cfg, TOPO, tmp_path, aggregators=["h8"]), None)
    assert load_config(path).train == train


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
