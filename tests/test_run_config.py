"""`aggnet run` input checks and the pure helpers of the runner (no network, no root): the run
configuration is read by the field-driven loader (config.fields) from the command line and from
mappings alike, and every problem is one line naming the option or the file and field."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from config import ConfigError, add_options, flat_dict, from_options, load
from controller.topology import load_topology
from hosts.agent_config import TrainConfig
from testbed.config import (
    JobConfig,
    NetworkConfig,
    RunConfig,
    WorkloadConfig,
    resolve_topology,
)
from testbed.run import (
    REPO,
    Run,
    RunError,
    choose_workers,
    program_path,
    ps_host,
    shape_links,
)

STAR4 = str(REPO / "topologies" / "star4.yaml")


def test_topology_by_name_or_path(tmp_path):
    assert resolve_topology("star4", str(REPO)) == str(REPO / "topologies" / "star4.yaml")
    assert resolve_topology("tree2.yaml", str(REPO)) == str(REPO / "topologies" / "tree2.yaml")
    assert resolve_topology(STAR4, str(REPO)) == STAR4
    assert resolve_topology("nope", str(REPO)) is None
    with pytest.raises(RunError, match=r"--topo: no topology file 'nope'.*star4"):
        Run(RunConfig(network=NetworkConfig(topo="nope"), out=str(tmp_path)))


def test_workers_first_n_or_named_in_rank_order():
    topo = load_topology(str(REPO / "topologies" / "tree2.yaml"))
    assert choose_workers(topo, RunConfig()) == [f"h{i}" for i in range(1, 9)]
    assert choose_workers(topo, RunConfig(job=JobConfig(workers=3))) == ["h1", "h2", "h3"]
    assert choose_workers(topo, RunConfig(job=JobConfig(worker_hosts=("h5", "h1")))) == ["h5", "h1"]


@pytest.mark.parametrize("job, message", [
    ({"worker_hosts": ["h1", "h9"]}, r"--worker-hosts: 'h9' is not a host of .*star4.yaml"),
    ({"workers": 5}, r"has 4 hosts, asked for 5"),
])
def test_bad_workers_for_the_topology(job, message):
    with pytest.raises(RunError, match=message):
        choose_workers(load_topology(STAR4), load(RunConfig, {"job": job}, "run"))


@pytest.mark.parametrize("data, message", [
    ({"job": {"worker_hosts": ["h1", "h1"]}}, "run.yaml: field 'job.worker_hosts': a host is listed twice"),
    ({"job": {"workers": 1}}, "run.yaml: field 'job.workers': must be >= 2, got 1"),
    ({"job": {"workers": 3, "worker_hosts": ["h1", "h2"]}}, "field 'job.workers': 3 disagrees with the 2 worker"),
    ({"job": {"k": -1}}, "run.yaml: field 'job.k': must be >= 0, got -1"),
    ({"job": {"scheme": "tree"}}, "run.yaml: field 'job.scheme': 'tree' is not one of innet, ps, ring, hostagg"),
    ({"network": {"lanes": 48}}, "run.yaml: field 'network.lanes': 48 is not one of 32, 64, 128, 256, 364"),
    ({"train": {"steps": 0}}, "run.yaml: field 'train.steps': must be >= 1, got 0"),
    ({"network": {"loss": 100}}, "run.yaml: field 'network.loss': a percentage in [0, 100), got 100.0"),
    ({"network": {"link_mbps": 0}}, "run.yaml: field 'network.link_mbps': must be >= 0.001, got 0.0"),
    ({"workload": {"workload": "allreduce"}, "job": {"scheme": "hostagg"}}, "field 'job.scheme': the all-reduce "
                                                                            "benchmark runs innet, ps and ring"),
    ({"job": {"scheme": "ring", "staleness": 2}}, "field 'job.staleness': only host and split aggregation bound staleness"),
    ({"job": {"stragglers": {"h2": -0.1}}}, "run.yaml: field 'job.stragglers.h2': must be >= 0, got -0.1"),
    ({"train": {"lr": "fast"}}, "run.yaml: field 'train.lr': expected float, got 'fast'"),
    ({"train": {"colour": 1}}, "run.yaml: field 'train.colour': unknown (known: model, dataset"),
    ({"faults": {"faults": ["kill_switch:s1"]}}, "run.yaml: field 'faults.faults[0]': 'kill_switch:s1': expected KIND"),
])
def test_bad_options_are_one_line_naming_file_and_field(data, message):
    with pytest.raises(ConfigError) as err:
        load(RunConfig, data, "run.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_command_line_and_a_mapping_give_the_same_config():
    parser = argparse.ArgumentParser()
    add_options(parser, RunConfig)
    args = parser.parse_args(["--topo", "tree2", "--worker-hosts", "h5,h1", "--k", "2", "--steps", "7", "--lr", "0.5",
                              "--straggler", "h5=0.25", "--elements", "99", "--no-replica",
                              "--fault", "kill_switch:s1@3", "--timeout", "30"])
    from_cli = from_options(RunConfig, args)
    from_map = load(RunConfig, {"network": {"topo": "tree2"}, "job": {"worker_hosts": ["h5", "h1"], "k": 2,
                                                                     "stragglers": {"h5": 0.25}, "replica": False},
                                "train": {"steps": 7, "lr": 0.5}, "workload": {"elements": 99},
                                "faults": {"faults": ["kill_switch:s1@3"]}, "timeout_s": 30}, "run.yaml")
    assert from_cli == from_map
    assert from_cli.job == JobConfig(worker_hosts=("h5", "h1"), k=2, stragglers={"h5": 0.25}, replica=False)
    assert from_cli.train == TrainConfig(steps=7, lr=0.5) and from_cli.workload == WorkloadConfig(elements=99)
    assert str(from_cli.faults.faults[0]) == "kill_switch:s1@3"
    assert from_options(RunConfig, parser.parse_args([])) == RunConfig()  # no option: every default


def test_results_config_is_flat_like_the_command_line():
    flat = flat_dict(RunConfig())
    assert flat["topo"] == "star4" and flat["scheme"] == "innet" and flat["steps"] == 200
    assert flat["stragglers"] == {} and flat["faults"] == [] and "network" not in flat


def test_shape_links_sets_rate_and_loss_on_every_link_only_when_given():
    topo = load_topology(STAR4)
    assert shape_links(topo, None, None) is topo
    shaped = shape_links(topo, 20, 1.5)
    assert {(link.bw_mbps, link.loss) for link in shaped.links} == {(20, 1.5)}
    assert [(link.a, link.b, link.a_port, link.b_port) for link in shaped.links] == \
        [(link.a, link.b, link.a_port, link.b_port) for link in topo.links]
    assert {link.bw_mbps for link in shape_links(topo, None, 1).links} == {100}


def test_parameter_server_on_a_spare_host_else_the_first_worker():
    topo = load_topology(STAR4)
    assert ps_host(topo, ["h1", "h2", "h3"]) == "h4"
    assert ps_host(topo, ["h2", "h1", "h3", "h4"]) == "h2"


def test_program_per_lane_count():
    assert Path(program_path(32)).name == "aggnet.p4"
    assert Path(program_path(64)).name == "aggnet_l64.p4"
    assert all(Path(program_path(n)).is_file() for n in (32, 64))


@pytest.mark.parametrize("argv, message", [
    (["--topo", "nope.yaml"], "--topo: no topology file 'nope.yaml'"),
    (["--worker-hosts", "h1,hx"], "--worker-hosts: 'hx' is not a host"),
    (["--k", "-2"], "--k: must be >= 0, got -2"),
    (["--steps", "many"], "--steps: expected int, got 'many'"),
])
def test_cli_bad_input_is_one_line_and_exit_2_before_any_network(argv, message, tmp_path):
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "run", *argv, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, no run folder


def test_cli_compare_rejects_unknown_scheme(tmp_path):
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "compare", "--schemes", "innet,magic",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["--schemes: 'innet,magic': give distinct schemes from innet, ps, ring, hostagg, split"]


@pytest.mark.parametrize("entry", ["ps=0.5", "magic=4", "ring", "innet=fast"])
def test_cli_compare_rejects_a_bad_scheme_scale(tmp_path, entry):
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "compare", "--schemes", "innet,ring",
                           "--scheme-scale", f"innet=4,{entry}", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"--scheme-scale: {entry!r}: give SCHEME=F with a compared scheme "
                                                "(innet, ring) and F >= 1"]
    assert list(tmp_path.iterdir()) == []


class _ControllerLostRun(Run):
    """A run whose phases touch no network, and whose watch loses the controller's connection."""

    def network(self):
        import contextlib

        return contextlib.nullcontext()

    def connect(self) -> None:
        self.conns = {}

    def push_pipeline(self) -> None: ...
    def install_trees(self) -> None: ...
    def start_hosts(self) -> None: ...
    def start_meter(self) -> None: ...
    def stop_hosts(self) -> None: ...
    def collect(self) -> None: ...

    def watch(self) -> None:
        from controller.p4rt import P4RuntimeError

        raise P4RuntimeError("s1: stream: UNAVAILABLE: the switch went away")

    def results(self, seconds: float, error: Exception | None) -> dict:
        return {"error": str(error)} if error is not None else {}

    def write_results(self, results: dict) -> None:
        self.written = results


def test_any_failure_while_running_is_written_to_the_results_then_raised(tmp_path):
    from controller.p4rt import P4RuntimeError

    run = _ControllerLostRun(RunConfig(out=str(tmp_path)))
    with pytest.raises(P4RuntimeError, match="the switch went away"):
        run.execute()
    assert run.written["error"] == "s1: stream: UNAVAILABLE: the switch went away"
    assert run.written["phases_s"].keys() >= {"run", "collect", "teardown"}  # every phase after it still ran
