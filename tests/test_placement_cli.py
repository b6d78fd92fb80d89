"""`aggnet place` run as a user runs it: JSON on success, a one-line error and exit 2 on bad input."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGGNET = os.path.join(ROOT, ".venv", "bin", "aggnet")


def aggnet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AGGNET, "place", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_place_soar_on_tree2_prints_json():
    proc = aggnet("--topo", "topologies/tree2.yaml", "--k", "1", "--algo", "soar",
                  "--root", "h8", "--workers", "h1,h2,h3,h5")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    # h1..h3 on s2, h5 on s3, PS h8 on s3: aggregating at s2 turns 3 messages into 1 on s2-s1 and s1-s3.
    assert out["aggregators"] == ["s2"]
    assert out["links"] == {"h1-s2": 1, "h2-s2": 1, "h3-s2": 1, "h5-s3": 1, "s2-s1": 1, "s1-s3": 1, "s3-h8": 2}
    assert out["utilization"] == 8 and out["max_link_load"] == 2
    assert (out["root"], out["sink"], out["k"]) == ("s3", "h8", 1)


@pytest.mark.parametrize("algo", ["soar", "congestion", "none", "all", "topk", "random"])
def test_every_algorithm_runs_on_the_fat_tree(algo):
    proc = aggnet("--topo", "topologies/fattree4.yaml", "--k", "2", "--algo", algo, "--seed", "3",
                  "--root", "h16", "--workers", "h1,h2,h3,h5,h9,h13")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["algo"] == algo
    assert out["utilization"] == sum(out["links"].values())
    assert out["max_link_load"] == max(out["links"].values())
    assert all(name.startswith("s") for name in out["aggregators"])
    if algo != "all":
        assert len(out["aggregators"]) <= 2


def test_default_workers_and_root_on_a_star():
    proc = aggnet("--topo", "topologies/star4.yaml", "--k", "0")
    out = json.loads(proc.stdout)
    assert out["workers"] == ["h1", "h2", "h3", "h4"] and out["root"] == "s1" and out["sink"] is None
    assert out["aggregators"] == ["s1"] and out["utilization"] == 4


@pytest.mark.parametrize("args,message", [
    (["--topo", "topologies/tree2.yaml", "--k", "1", "--workers", "h1,h99"], "--workers: 'h99' is unknown host"),
    (["--topo", "topologies/tree2.yaml", "--k", "1", "--root", "s42"], "--root: unknown node 's42'"),
    (["--topo", "topologies/tree2.yaml", "--k", "-1"], "k: must be an integer >= 0, got -1"),
    (["--topo", "topologies/tree2.yaml", "--k", "1", "--algo", "magic"], "--algo: unknown algorithm 'magic'"),
    (["--topo", "topologies/leafspine.yaml", "--k", "1", "--require-tree"], "topology has a loop"),
    (["--topo", "topologies/nope.yaml", "--k", "1"], "topologies/nope.yaml: cannot read topology"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    proc = aggnet(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert message in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_malformed_topology_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [{name: h1}]\nswitches: [{name: s1}]\nlinks: [{a: h1, b: s9}]\n")
    proc = aggnet("--topo", str(bad), "--k", "1")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"{bad}: links[0].b: unknown node 's9'"
