"""`aggnet run --scheme hostagg` and the downgrade of an innet job without switch capacity,
checked before any network starts: the decision, the agent config the hosts read, bad input."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config import load
from hosts.agent_config import load_config
from testbed.config import RunConfig
from testbed.run import Run, RunError

REPO = Path(__file__).resolve().parent.parent
SMALL = str(REPO / "tests" / "data" / "run" / "star4_slots8.yaml")


def config(tmp_path, **sections) -> RunConfig:
    return load(RunConfig, {**sections, "out": str(tmp_path)}, "run")


def test_innet_job_larger_than_the_slot_budget_is_downgraded_to_hostagg(tmp_path):
    run = Run(config(tmp_path, network={"topo": SMALL}, job={"workers": 3, "slots": 64, "staleness": 1,
                                                             "stragglers": {"h2": 0.2}}))
    (job,) = run.jobs
    assert job.scheme == "hostagg" and job.placement is None
    assert job.admission.status == "host"
    assert job.admission.message == ("job job1: downgraded to host aggregation: no in-network capacity "
                                     "(root switch 's1' has 8 free slots, the job needs 64)")
    assert job.aggregators == ["h4", "h1"]  # the idle host, then the fastest worker (h2 straggles)
    run.run_dir.mkdir(parents=True)  # the testbed makes it when the network starts
    cfg = load_config(str(run.write_agent_config(job, "agent.json")))
    assert cfg.scheme == "hostagg" and cfg.job is None and cfg.staleness == 1
    assert (cfg.aggregator.name, cfg.aggregator.host, cfg.replica.name) == ("h4", "10.0.0.4", "h1")
    assert cfg.stragglers["h2"].delay_s == 0.2 and set(cfg.stragglers) == {"h2"}


def test_innet_job_within_the_slot_budget_stays_in_network(tmp_path):
    (job,) = Run(config(tmp_path, network={"topo": SMALL}, job={"workers": 3, "slots": 8})).jobs
    assert job.scheme == "innet" and job.aggregators == []
    assert job.admission.status == "in-network" and job.placement is not None


def test_explicit_hostagg_on_a_big_switch(tmp_path):
    (job,) = Run(config(tmp_path, job={"workers": 4, "scheme": "hostagg"})).jobs
    assert job.scheme == "hostagg" and job.admission is None
    assert job.aggregators == ["h1", "h2"]  # every host trains: the first workers, none straggles


@pytest.mark.parametrize("sections, message", [
    ({"job": {"stragglers": {"h9": 0.1}}}, "--straggler h9: not a worker (workers: h1, h2, h3, h4)"),
    ({"network": {"topo": SMALL}, "workload": {"workload": "allreduce"}, "job": {"slots": 64}},
     "--slots 64: no in-network capacity (root switch 's1' has 8 free slots, the job needs 64), and the all-reduce"),
])
def test_bad_input_is_one_line_before_anything_starts(tmp_path, sections, message):
    with pytest.raises(RunError) as err:
        Run(config(tmp_path, **sections))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no run folder for a run that never started


def test_cli_bad_straggler_exits_2_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "run", "--scheme", "hostagg", "--straggler", "h2=x",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["--straggler: expected float, got 'x'"]
