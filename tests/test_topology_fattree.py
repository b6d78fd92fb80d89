"""`aggnet topo fat-tree K`: the generated fat-trees have the k-ary shape (k=8: 80 switches, 128 hosts),
the shipped fattree4/fattree8 files are its output, and bad arguments get one line and exit 2."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
import yaml

from controller.topo_cli import fat_tree_yaml
from controller.topology import load_topology, parse_topology

ROOT = Path(__file__).resolve().parents[1]


def aggnet_topo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed.cli", "topo", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("k", [4, 8])
def test_shipped_fat_tree_is_the_generators_output(k):
    assert (ROOT / "topologies" / f"fattree{k}.yaml").read_text() == fat_tree_yaml(k)


@pytest.mark.parametrize("k", [2, 4, 8, 10])
def test_fat_tree_shape(k):
    topo = parse_topology(yaml.safe_load(fat_tree_yaml(k)), f"fattree{k}.yaml")
    half = k // 2
    assert (len(topo.hosts), len(topo.switches), len(topo.links)) == (k ** 3 // 4, 5 * k * k // 4, 3 * k ** 3 // 4)
    g = topo.graph()
    assert all(g.degree(s) == k for s in topo.switches)  # every switch has k ports
    core = [f"s{i}" for i in range(1, half * half + 1)]
    edges = {topo.switch_of(h) for h in topo.hosts}
    assert len(edges) == k * half and all(len(topo.hosts_of(e)) == half for e in edges)
    # pods: removing the core leaves k components, each with k/2 edge and k/2 aggregation switches
    pods = list(nx.connected_components(g.subgraph(set(g) - set(core))))
    assert len(pods) == k and all(len(p & set(topo.switches)) == k for p in pods)
    for c in core:  # each core switch reaches exactly one aggregation switch in each pod
        assert sorted(sum(1 for n in g.neighbors(c) if n in p) for p in pods) == [1] * k
    # any two hosts are at most 6 links apart (host-edge-agg-core-agg-edge-host), with (k/2)^2 shortest
    # paths between pods for the placement's trees to choose from
    assert nx.diameter(g) == 6
    first, last = "h1", f"h{len(topo.hosts)}"
    assert sum(1 for _ in nx.all_shortest_paths(g, first, last)) == half * half
    # an edge switch's ports 1..k/2 face its hosts (the docstring of controller.topo_cli)
    assert [topo.port_of(topo.switch_of("h1"), f"h{i}") for i in range(1, half + 1)] == list(range(1, half + 1))


def test_fat_tree_command_writes_a_loadable_file(tmp_path):
    out = tmp_path / "ft.yaml"
    done = aggnet_topo("fat-tree", "6", "--bw-mbps", "40", "-o", str(out))
    assert done.returncode == 0, done.stderr
    topo = load_topology(str(out))
    assert topo.name == "fattree6" and len(topo.switches) == 45 and len(topo.hosts) == 54
    assert {link.bw_mbps for link in topo.links} == {40.0}
    printed = aggnet_topo("fat-tree", "6", "--bw-mbps", "40")
    assert printed.returncode == 0 and printed.stdout == out.read_text()


@pytest.mark.parametrize("args,message", [
    (("fat-tree", "5"), "aggnet topo fat-tree: K must be an even number >= 2, got 5"),
    (("fat-tree", "0"), "aggnet topo fat-tree: K must be an even number >= 2, got 0"),
    (("fat-tree", "4", "--bw-mbps", "0"), "aggnet topo: --bw-mbps must be positive, got 0"),
    (("fat-tree", "4", "-o", "/nonexistent/dir/ft.yaml"),
     "aggnet topo: --out /nonexistent/dir/ft.yaml: No such file or directory"),
])
def test_bad_arguments_get_one_line(args, message):
    done = aggnet_topo(*args)
    assert done.returncode == 2
    assert done.stderr.strip() == message
