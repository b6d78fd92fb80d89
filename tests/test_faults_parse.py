"""Fault specs: parsing, checks against the topology (one-line errors), and the CPU throttle
that makes a running worker straggle."""
import dataclasses
import subprocess
import sys
import time

import pytest

from config import ConfigError, load
from controller.topology import load_topology
from hosts.agent_config import TrainConfig, load_config
from testbed.cli import build_parser
from testbed.config import Fault, RunConfig, parse_fault, resolve_topology
from testbed.faults import DEFAULTS, THROTTLE_PERIOD_S, CpuThrottle, FaultError, FaultRun, check_fault
from testbed.run import REPO
from testbed.run_cli import config_from_args

TOPO = load_topology(resolve_topology("leafspine", str(REPO)))
WORKERS = ["h1", "h3"]


@pytest.mark.parametrize("text, fault", [
    ("kill_switch:s1@10", Fault("kill_switch", "s1", 10)),
    ("link_down:s3-s1@4", Fault("link_down", "s3-s1", 4)),
    ("slow_worker:h3@0=0.25", Fault("slow_worker", "h3", 0, 0.25)),
    ("kill_aggregator:h8@7", Fault("kill_aggregator", "h8", 7)),
])
def test_faults_parse_and_print_back(text, fault):
    assert parse_fault(text) == fault
    assert str(fault) == text


@pytest.mark.parametrize("text, message", [
    ("explode:s1@3", "expected KIND:TARGET@STEP"),
    ("kill_switch:s1", "expected KIND:TARGET@STEP"),
    ("slow_worker:h1@3", "slow_worker needs =SHARE"),
    ("slow_worker:h1@3=1.5", "slow_worker needs =SHARE"),
])
def test_malformed_faults_are_one_line_errors(text, message):
    with pytest.raises(ConfigError) as info:
        load(RunConfig, {"faults": {"faults": [text]}}, "run.yaml")
    assert str(info.value).startswith(f"run.yaml: field 'faults.faults[0]': {text!r}: ")
    assert message in str(info.value) and "\n" not in str(info.value) and info.value.exit_code == 2


@pytest.mark.parametrize("text, scheme, message", [
    ("kill_switch:s9@3", "innet", "no switch 's9' in"),
    ("link_down:s3-s4@3", "innet", "no link 's3-s4' in"),
    ("slow_worker:h2@3=0.5", "innet", "'h2' is not a worker (h1, h3)"),
    ("kill_aggregator:h8@3", "innet", "there is no host aggregator in scheme innet"),
    ("kill_switch:s1@3", "hostagg", "for scheme innet only"),
])
def test_faults_the_topology_or_scheme_cannot_have_are_one_line_errors(text, scheme, message):
    with pytest.raises(FaultError) as info:
        check_fault(parse_fault(text), TOPO, WORKERS, scheme)
    assert str(info.value).startswith(f"--fault {text}: ") and message in str(info.value)
    check_fault(parse_fault("kill_switch:s1@3"), TOPO, WORKERS, "innet")  # a good one passes


def test_a_fault_run_checks_its_scheme_and_faults_before_anything_starts(tmp_path):
    ring = dataclasses.replace(DEFAULTS, job=dataclasses.replace(DEFAULTS.job, scheme="ring"), out=str(tmp_path))
    with pytest.raises(FaultError, match="--scheme: 'ring' is not one of innet, hostagg"):
        FaultRun(ring)
    assert list(tmp_path.iterdir()) == []


def test_cli_defaults_are_the_fault_run_defaults():
    assert config_from_args(build_parser().parse_args(["faults"]), DEFAULTS) == DEFAULTS
    assert (DEFAULTS.train.steps, DEFAULTS.train.eval_every, DEFAULTS.network.topo) == (40, 0, "leafspine")


def test_every_run_option_works_for_faults_and_reaches_the_train_config():
    args = build_parser().parse_args(["faults", "--steps", "12", "--seed", "3", "--k", "2", "--worker-hosts", "h1,h3",
                                      "--lanes", "64", "--target", "embedded", "--pacing", "aimd"])
    cfg = config_from_args(args, DEFAULTS)
    assert cfg.train == TrainConfig(steps=12, seed=3, eval_every=0)
    assert (cfg.job.k, cfg.job.worker_hosts, cfg.network.lanes, cfg.job.pacing) == (2, ("h1", "h3"), 64, "aimd")


def test_agent_config_carries_every_training_field(tmp_path):
    train = TrainConfig(model="cnn", dataset="synthetic", hidden=16, batch_size=8, lr=0.05, momentum=0.5,
                        steps=7, seed=5, eval_every=3)
    cfg = dataclasses.replace(DEFAULTS, job=dataclasses.replace(DEFAULTS.job, worker_hosts=tuple(WORKERS),
                                                                scheme="hostagg"), train=train, out=str(tmp_path))
    run = FaultRun(cfg)
    run.run_dir.mkdir(parents=True)
    assert load_config(run.write_agent_config(run.jobs[0], "agent-0.json")).train == train


SPINNER = """
import signal, sys, time
gap, last = 0.0, time.monotonic()
def report(*_):
    print(gap, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, report)
print("spinning", flush=True)
while True:
    now = time.monotonic()
    gap, last = max(gap, now - last), now
"""


def process_state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_cpu_throttle_stops_a_busy_process_for_its_share_and_lets_it_go():
    """Counted, not timed: the throttle stops the spinning process (state T) and continues it, again
    and again; a stop lasts at least (1 - share) of the period (the process itself sees that gap:
    a lower bound that follows from the settings); stopping the throttle leaves it running."""
    share = 0.2
    proc = subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "spinning\n"
        throttle = CpuThrottle(proc.pid, share)
        try:
            transitions, previous = 0, process_state(proc.pid) == "T"
            while transitions < 4:  # stopped, continued, stopped, continued
                time.sleep(0.001)
                stopped = process_state(proc.pid) == "T"
                transitions += stopped != previous
                previous = stopped
        finally:
            throttle.stop()
        time.sleep(0.2)
        assert process_state(proc.pid) in "RS"  # stopped throttling leaves it running (SIGCONT)
        proc.terminate()
        longest_gap = float(proc.communicate(timeout=30)[0])
        assert longest_gap >= (1 - share) * THROTTLE_PERIOD_S, longest_gap
    finally:
        proc.kill()
        proc.wait()
