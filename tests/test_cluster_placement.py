"""Where `aggnet run --servers` puts each node, and the options it refuses before anything starts."""
from __future__ import annotations

import argparse

import pytest

from config import ConfigError
from controller.topology import load_topology
from testbed.cluster import ClusterError, place_nodes, server_named
from testbed.run_cli import add_arguments, config_from_args

TREE2 = load_topology("topologies/tree2.yaml")


def config(*argv: str):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_switches_fill_even_bins_and_hosts_follow_their_switch():
    placed = place_nodes(TREE2, ["a", "b"], {})
    assert {s: placed[s] for s in ("s1", "s2", "s3")} == {"s1": "a", "s2": "a", "s3": "b"}
    assert [placed[f"h{i}"] for i in range(1, 9)] == ["a"] * 4 + ["b"] * 4


def test_given_nodes_move_and_their_hosts_with_them():
    placed = place_nodes(TREE2, ["a", "b"], {"s2": "b", "h8": "a"})
    assert placed["s2"] == "b" and [placed[f"h{i}"] for i in range(1, 5)] == ["b"] * 4
    assert placed["h8"] == "a" and placed["h7"] == "b"


def test_a_placement_naming_no_node_is_refused():
    with pytest.raises(ClusterError, match="--placement h9=b: h9 is not a node of .*tree2.yaml"):
        place_nodes(TREE2, ["a", "b"], {"h9": "b"})


def test_localhost_is_this_machine():
    server = server_named("localhost")
    assert server.local and server.address == "127.0.0.1"


@pytest.mark.parametrize(("argv", "problem"), [
    (["--placement", "s1=b"], "places nodes on --servers, and none are given"),
    (["--servers", "a,b", "--placement", "s1=c"], "s1=c: c is not one of --servers (a, b)"),
    (["--servers", "a,b", "--target", "bmv2"], "runs the embedded target on several servers, not bmv2"),
])
def test_options_that_cannot_work_are_refused_with_one_line(argv, problem):
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        config(*argv)


def test_servers_and_placement_are_read_from_the_command_line():
    cfg = config("--servers", "localhost,srv2", "--placement", "s2=srv2", "--placement", "h1=srv2")
    assert cfg.network.servers == ("localhost", "srv2")
    assert cfg.network.placement == {"s2": "srv2", "h1": "srv2"}
