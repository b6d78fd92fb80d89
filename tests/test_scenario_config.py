"""Scenario files: validation with one-line errors naming the file and field; results helpers."""
import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.report import time_to_accuracy
from testbed.scenario import (
    ModeRun,
    ScenarioError,
    load_scenario,
    parse_scenario,
    summarize,
)

BASE = {"network": {"topo": "leafspine"}, "jobs": [{"name": "a", "workers": ["h1", "h3"], "ps": "h2"},
                                          {"name": "b", "workers": ["h5", "h7"], "ps": "h6"}]}


def with_(**changes):
    data = {**BASE, **changes}
    return data


def test_experiment_file_and_test_data_load():
    scn = load_scenario("experiments/mlfabric.yaml")
    assert scn.modes == ("aware", "unaware", "ps") and len(scn.jobs) == 2 and scn.traffic
    assert (scn.network.lanes, scn.network.link_mbps, scn.train.steps, scn.name) == (128, 10, 300, "mlfabric")
    two = load_scenario("tests/data/scenario/two_jobs.yaml")
    assert [j.root for j in two.jobs] == ["s3", "s5"] and two.workload.workload == "allreduce"
    assert two.network.topo.endswith("topologies/leafspine.yaml")  # resolved


def test_every_shipped_experiment_plans_each_of_its_modes(tmp_path):
    for path in sorted(Path("experiments").glob("*.yaml")):
        scn = load_scenario(str(path))
        for mode in scn.modes:  # placement, admission, split seats, the timeline: all before any network
            assert [j.name for j in ModeRun(scn, mode, tmp_path / path.stem / mode).jobs] == [j.name for j in scn.jobs]


def test_the_scheduled_stragglers_take_split_modes_seats(tmp_path):
    """mlfabric_models.yaml in mode split: the workers of its scheduled `stragglers` take the seats, not
    those random_stragglers slow (they stay in the tree, still slowed); each slowed worker is slowed by
    its periods on the machine's clock (from the timeline's start, x the time scale)."""
    scn = load_scenario("experiments/mlfabric_models.yaml")
    run = ModeRun(scn, "split", tmp_path / "split")
    slowed = run.timeline.slowdowns
    assert {"h4", "h11"} < set(slowed) and {w for j in scn.jobs for w in j.workers} >= set(slowed)
    for job in run.jobs:
        assert job.scheme == "split" and job.split == [w for w in job.workers if w in ("h4", "h11")]
        assert job.aggregators == [next(j.ps for j in scn.jobs if j.name == job.name)]
        assert run.slowed_of(job) == [w for w in job.workers if w in slowed]
    run.t0 = 100.0
    assert run.straggler("h11").periods == ((100.0 + 0.9 * 40, 100.0 + 1.1 * 40, 2.0),)
    assert run.straggler("h1").periods == ()


@pytest.mark.parametrize("change, message", [
    ({"jobs": [{"name": "a", "workers": ["h1", "h9"], "ps": "h2"}]}, "field 'jobs[0].workers[1]': 'h9' is not a host of"),
    ({"jobs": [{"name": "a", "workers": ["h1"]}]}, "field 'jobs[0].workers': a job needs at least 2 workers, got 1"),
    ({"jobs": [{"name": "a", "workers": ["h1", "h2"]}, {"name": "b", "workers": ["h2", "h3"]}], "modes": ["aware"]},
     "field 'jobs[1].workers': host h2 already runs job a"),
    ({"modes": ["aware", "fast"]}, "field 'modes[1]': 'fast' is not one of aware, unaware, split, relocate, atp, hostagg, ps, ring"),
    ({"jobs": [{"workers": ["h1", "h3"]}]}, "field 'jobs[0].name': missing"),
    ({"jobs": [{"name": "a", "workers": ["h1", "h3"]}]}, "field 'jobs[0].ps': missing (mode ps needs"),
    ({"slots": {"s9": 4}}, "field 'slots.s9': not a switch of"),
    ({"shaping": [{"link": "s3-s5", "rate_mbps": 1}]}, "field 'shaping[0].link': "),
    ({"shaping": [{"link": "s3-s1"}]}, "field 'shaping[0]': give at least one of rate_mbps"),
    ({"traffic": [{"src": "h1", "dst": "h1"}]}, "field 'traffic[0].dst': a flow needs two different hosts"),
    ({"traffic": [{"src": "h1", "dst": "h9"}]}, "field 'traffic[0].dst': 'h9' is not a host of"),
    ({"traffic": [{"src": "h1", "dst": "h2", "rate_mbps": "fast"}]},
     "field 'traffic[0].rate_mbps': expected float, got 'fast'"),
    ({"adapt": {"period": 1}}, "field 'adapt.period': unknown"),
    ({"train": {"steps": 0}}, "field 'train.steps': must be >= 1, got 0"),
    ({"network": {"topo": "nowhere"}}, "field 'network.topo': no topology file 'nowhere'"),
    ({"colour": "red"}, "field 'colour': unknown"),
    ({"network": {"lanes": 48}}, "field 'network.lanes': 48 is not one of 32, 64, 128, 256, 364"),
    ({"job": {"pacing": "slow"}}, "field 'job.pacing': 'slow' is not one of fixed, aimd"),
    ({"network": {"link_mbps": 0}}, "field 'network.link_mbps': must be >= 0.001, got 0.0"),
    ({"jobs": [{"name": "a", "workers": ["h1", "h3"], "ps": "h2", "workload": {"workload": "model:vgg16",
                                                                               "profile": "tpu"}}]},
     "field 'jobs[0].workload.profile': "),
    ({"jobs": [{"name": "a", "workers": ["h1", "h3"], "ps": "h2", "start_s": -1}]},
     "field 'jobs[0].start_s': must be >= 0, got -1"),
    ({"jobs": [{"name": "a", "workers": ["h1", "h3"], "ps": "h2", "workload": {"workload": "model:ncf"}},
               {"name": "b", "workers": ["h5", "h7"], "ps": "h6",
                "workload": {"workload": "model:gpt2", "grad_scale": 0.1}}]},
     "field 'jobs[0].workload.grad_scale': every job of a scenario sends the same fraction of its gradients"),
    ({"stragglers": [{"worker": "h2", "factor": 2}]}, "field 'stragglers[0].worker': 'h2' is not a worker of any job"),
    ({"stragglers": [{"worker": "h1", "factor": 0.5}]}, "field 'stragglers[0].factor': must be >= 1, got 0.5"),
    ({"random_stragglers": [{"workers": ["h9"]}]}, "field 'random_stragglers[0].workers': 'h9' is not a worker"),
    ({"random_traffic": [{"name": "bg", "src": ["h2"], "dst": ["h9"]}]},
     "field 'random_traffic[0].dst[0]': 'h9' is not a host of"),
    ({"random_traffic": [{"name": "bg", "src": ["h2"], "dst": ["h4"], "shape": 1}]},
     "field 'random_traffic[0].shape': must be >= 1.01, got 1.0"),
    ({"random_traffic": [{"name": "bg", "src": ["h2"], "dst": ["h2"]}]},
     "field 'random_traffic[0].dst': a flow needs two different hosts"),
    ({"trace_traffic": [{"file": "nowhere.csv"}]}, "field 'trace_traffic[0].file': "),
    ({"scale": 0.5}, "field 'scale': a factor >= 1, or auto, got 0.5"),
    ({"scale": "auto"}, "field 'scale': auto chooses F for one aggnet run; a scenario takes a factor >= 1"),
    ({"job": {"staleness": -1}}, "field 'job.staleness': must be >= 0, got -1"),
])
def test_bad_fields_name_file_and_field(change, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(with_(**change), "x.yaml")
    assert str(err.value).startswith("x.yaml: ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_reports_a_bad_file_in_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("network: {topo: leafspine}\njobs: [{name: a, workers: [h1, h3], k: -1}]\nmodes: [unaware]\n")
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "experiment", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == f"{bad}: field 'jobs[0].k': must be >= 0, got -1"
    broken = tmp_path / "broken.yaml"
    broken.write_text("jobs: [\n")
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "experiment", str(broken)], capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stderr.startswith(f"{broken}:") and "YAML error" in done.stderr


def test_modes_option_is_checked_as_the_files_modes_are(tmp_path, monkeypatch):
    """--modes hostagg on a file whose jobs have no server host: one line before anything starts."""
    import testbed.scenario as scenario

    monkeypatch.setattr(scenario, "run_scenario", lambda *a, **k: pytest.fail("a run started"))
    no_ps = tmp_path / "no_ps.yaml"
    no_ps.write_text("network: {topo: leafspine}\njobs: [{name: a, workers: [h1, h3]}]\nmodes: [unaware]\n")
    with pytest.raises(ScenarioError) as err:
        scenario.run(argparse.Namespace(file=str(no_ps), modes="unaware,hostagg", out=str(tmp_path)))
    assert str(err.value) == (f"--modes unaware,hostagg: {no_ps}: field 'jobs[0].ps': missing (mode hostagg needs "
                              "a server host per job)")


def test_time_to_accuracy_and_summary():
    records = [{"step": 0, "step_time_s": 4.0}, {"step": 1, "step_time_s": 0.5},
               {"step": 2, "step_time_s": 0.5, "test_accuracy": 0.6}, {"step": 3, "step_time_s": 1.0},
               {"step": 4, "step_time_s": 1.0, "test_accuracy": 0.91}]
    assert time_to_accuracy(records, 0.9) == 3.0 and time_to_accuracy(records, 0.95) is None  # step 0: start-up
    scn = parse_scenario(with_(target_accuracy=0.9), "x.yaml")
    by_mode = {"aware": {"jobs": {"a": {"time_to_accuracy_s": 10.0}, "b": {"time_to_accuracy_s": 20.0}},
                         "moves": [{}, {}]},
               "unaware": {"jobs": {"a": {"time_to_accuracy_s": 30.0}, "b": {"time_to_accuracy_s": 30.0}}},
               "ps": {"jobs": {"a": {"time_to_accuracy_s": 45.0}, "b": {"time_to_accuracy_s": None}}}}
    summary = summarize(scn, by_mode)
    assert summary["mean"] == {"aware": 15.0, "unaware": 30.0, "ps": None}
    assert summary["ratio_to_aware"] == {"aware": 1.0, "unaware": 2.0}
    assert summary["moves"] == {"aware": 2, "unaware": 0, "ps": 0}


def test_model_jobs_are_compared_on_their_median_and_p99_iteration():
    from testbed.scenario_results import percentile, summarize

    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 99) == 5.0 and percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    scn = parse_scenario(with_(workload={"workload": "model:ncf"}, modes=["aware", "ring"]), "x.yaml")

    def job(median, p99, bound):
        return {"iteration_median_s": median, "iteration_p99_s": p99, "exposed_comm_median_s": 0.01, "scheme": "x",
                "fidelity": {"bottleneck": bound}}
    link = {"kind": "link", "name": "s3->s1", "load": 0.95}
    by_mode = {"aware": {"jobs": {"a": job(0.05, 0.16, link), "b": job(0.1, 0.2, None)}},
               "ring": {"jobs": {"a": job(0.5, 1.2, link), "b": job(0.1, 0.4, link)}}}
    summary = summarize(scn, by_mode)
    assert summary["metric"] == "iteration_median_s" and summary["ratio_to_aware"] == {"aware": 1.0, "ring": 4.0}
    assert summary["table"].splitlines() == [
        "| job | aware | unaware | split | ring | ps |", "|---|---|---|---|---|---|",
        "| a | 50.0 / 160.0 ms, link s3->s1 95% | not run | not run | 500.0 / 1,200.0 ms, link s3->s1 95% | not run |",
        "| b | 100.0 / 200.0 ms, none | not run | not run | 100.0 / 400.0 ms, link s3->s1 95% | not run |"]


@pytest.mark.parametrize("mode, pacing, weights", [
    ("aware", "aimd", {"a": ("aimd", 4.0), "b": ("aimd", 2.67)}),
    ("unaware", "aimd", {"a": ("aimd", 1.0), "b": ("aimd", 1.0)}),
    ("aware", "fixed", {"a": ("fixed", 1.0), "b": ("fixed", 1.0)}),
])
def test_aware_aimd_jobs_are_weighted_by_the_workers_their_update_unblocks(tmp_path, mode, pacing, weights):
    from protocol.job import JobSpec, WorkerSpec
    from testbed.scenario import ModeRun

    data = {"network": {"topo": "leafspine"}, "job": {"pacing": pacing}, "modes": [mode],
            "jobs": [{"name": "a", "workers": ["h1", "h3", "h7"], "root": "s3", "k": 0},
                     {"name": "b", "workers": ["h4", "h6"], "root": "s5", "k": 0}]}
    run = ModeRun(parse_scenario(data, "x.yaml"), mode, tmp_path / mode)
    specs = {job.name: run.job_spec(job, JobSpec(job_id=1, slot_base=0, slot_count=32, agg_ip="10.0.255.254",
                                                 workers=tuple(WorkerSpec(h, f"10.0.0.{k + 1}")
                                                               for k, h in enumerate(job.workers))))
             for job in run.jobs}
    assert {n: (s.pacing, round(s.weight, 2)) for n, s in specs.items()} == weights
