"""`aggnet run` input checks and the pure helpers of the runner (no network, no root)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from controller.topology import load_topology
from testbed.experiment import (REPO, RunConfig, RunError, check_config, choose_workers, program_path, ps_host,
                                resolve_topology, shape_links)

STAR4 = str(REPO / "topologies" / "star4.yaml")


def test_topology_by_name_or_path():
    assert resolve_topology("star4") == str(REPO / "topologies" / "star4.yaml")
    assert resolve_topology("tree2.yaml") == str(REPO / "topologies" / "tree2.yaml")
    assert resolve_topology(STAR4) == STAR4
    with pytest.raises(RunError, match=r"--topo: no topology file 'nope'.*star4"):
        resolve_topology("nope")


def test_workers_first_n_or_named_in_rank_order():
    topo = load_topology(str(REPO / "topologies" / "tree2.yaml"))
    assert choose_workers(topo, RunConfig()) == [f"h{i}" for i in range(1, 9)]
    assert choose_workers(topo, RunConfig(workers=3)) == ["h1", "h2", "h3"]
    assert choose_workers(topo, RunConfig(worker_hosts=("h5", "h1"))) == ["h5", "h1"]


@pytest.mark.parametrize("cfg, message", [
    (RunConfig(worker_hosts=("h1", "h9")), r"--worker-hosts: 'h9' is not a host of .*star4.yaml"),
    (RunConfig(worker_hosts=("h1", "h1")), r"listed twice"),
    (RunConfig(workers=5), r"has 4 hosts, asked for 5"),
    (RunConfig(workers=1), r"at least 2 workers"),
    (RunConfig(workers=3, worker_hosts=("h1", "h2")), r"disagrees"),
])
def test_bad_workers(cfg, message):
    with pytest.raises(RunError, match=message):
        choose_workers(load_topology(STAR4), cfg)


@pytest.mark.parametrize("cfg, message", [
    (RunConfig(k=-1), r"--k: must be >= 0, got -1"),
    (RunConfig(scheme="tree"), r"--scheme: 'tree' is not one of innet, ps, ring"),
    (RunConfig(lanes=48), r"--lanes: 48"),
    (RunConfig(steps=0), r"--steps: must be positive"),
    (RunConfig(loss=100), r"--loss: a percentage"),
    (RunConfig(link_mbps=0), r"--link-mbps: must be positive"),
    (RunConfig(workload="allreduce", scheme="ring"), r"runs innet and ps"),
])
def test_bad_options(cfg, message):
    with pytest.raises(RunError, match=message):
        check_config(cfg)


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
    assert done.stderr.strip().splitlines() == ["--schemes: 'innet,magic': give distinct schemes from innet, ps, ring, hostagg"]
