"""`aggnet run --scheme hostagg` and the downgrade of an innet job without switch capacity,
checked before any network starts: the decision, the agent config the hosts read, bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hosts.agent_config import load_config
from testbed.experiment import Experiment, RunConfig, RunError, parse_stragglers

REPO = Path(__file__).resolve().parent.parent
SMALL = str(REPO / "tests" / "data" / "run" / "star4_slots8.yaml")


def test_innet_job_larger_than_the_slot_budget_is_downgraded_to_hostagg(tmp_path):
    exp = Experiment(RunConfig(topo=SMALL, workers=3, slots=64, staleness=1, stragglers=(("h2", 0.2),),
                               out=str(tmp_path)))
    assert exp.scheme == "hostagg" and exp.placements == []
    assert exp.admission.status == "host"
    assert exp.admission.message == ("job job1: downgraded to host aggregation: no in-network capacity "
                                     "(root switch 's1' has 8 free slots, the job needs 64)")
    assert exp.aggregators == ["h4", "h1"]  # the idle host, then the fastest worker (h2 straggles)
    exp.run_dir.mkdir(parents=True)  # the testbed makes it when the network starts
    config = load_config(str(exp._write_agent_config({})))
    assert config.scheme == "hostagg" and config.job is None and config.staleness == 1
    assert (config.aggregator.name, config.aggregator.host, config.replica.name) == ("h4", "10.0.0.4", "h1")
    assert config.stragglers["h2"].delay_s == 0.2 and set(config.stragglers) == {"h2"}


def test_innet_job_within_the_slot_budget_stays_in_network(tmp_path):
    exp = Experiment(RunConfig(topo=SMALL, workers=3, slots=8, out=str(tmp_path)))
    assert exp.scheme == "innet" and exp.aggregators == []
    assert exp.admission.status == "in-network" and len(exp.placements) == 1


def test_explicit_hostagg_on_a_big_switch(tmp_path):
    exp = Experiment(RunConfig(topo="star4", workers=4, scheme="hostagg", out=str(tmp_path)))
    assert exp.scheme == "hostagg" and exp.admission is None
    assert exp.aggregators == ["h1", "h2"]  # every host trains: the first workers, none straggles


@pytest.mark.parametrize("cfg, message", [
    (RunConfig(scheme="ring", staleness=2), "--staleness: only host aggregation bounds staleness"),
    (RunConfig(scheme="hostagg", staleness=-1), "--staleness: must be >= 0, got -1"),
    (RunConfig(scheme="hostagg", workload="allreduce"), "--scheme hostagg: the all-reduce benchmark runs"),
    (RunConfig(stragglers=(("h9", 0.1),)), "--straggler h9: not a worker (workers: h1, h2, h3, h4)"),
    (RunConfig(stragglers=(("h2", -0.1),)), "--straggler h2=-0.1: the delay must be >= 0 seconds"),
    (RunConfig(topo=SMALL, workload="allreduce", slots=64),
     "--slots 64: no in-network capacity (root switch 's1' has 8 free slots, the job needs 64), and the all-reduce"),
])
def test_bad_input_is_one_line_before_anything_starts(tmp_path, cfg, message):
    import dataclasses

    with pytest.raises(RunError) as err:
        Experiment(dataclasses.replace(cfg, out=str(tmp_path)))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no run folder for a run that never started


def test_parse_stragglers():
    assert parse_stragglers(["h2=0.2", "h3=1"]) == (("h2", 0.2), ("h3", 1.0))
    with pytest.raises(RunError, match=r"^--straggler 'h2': expected HOST=DELAY_S, e.g. h2=0.2$"):
        parse_stragglers(["h2"])


def test_cli_bad_straggler_exits_2_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "run", "--scheme", "hostagg", "--straggler", "h2=x",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["--straggler 'h2=x': expected HOST=DELAY_S, e.g. h2=0.2"]
