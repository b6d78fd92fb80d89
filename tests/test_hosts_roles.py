"""`python -m hosts ROLE`: one entry point for every host process, with one-line errors."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import workers as wk

from hosts.comm import Endpoint
from hosts.ps import ParameterServerClient

ROOT = Path(__file__).resolve().parent.parent


def run(*argv, timeout=60):
    done = subprocess.run([sys.executable, "-m", *map(str, argv)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stderr.strip()


def write_config(tmp_path, **extra):
    ports = wk.free_ports(3)
    config = {"scheme": "ps", "timeout_s": 20, "workers": [{"name": f"h{i + 1}", "ip": "127.0.0.1", "port": ports[i]}
                                                           for i in range(2)],
              "ps": {"name": "h9", "ip": "127.0.0.1", "port": ports[2]}, **extra}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    return path


def test_every_role_is_listed():
    done = subprocess.run([sys.executable, "-m", "hosts", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0
    for role in ("worker", "bench", "ps", "hostagg", "replica", "traffic"):
        assert f"\n    {role} " in done.stdout


def test_config_errors_are_one_line_naming_the_role_and_field(tmp_path):
    missing = tmp_path / "nothing.json"
    assert run("hosts", "ps", "--config", missing, "--out", tmp_path) == (
        2, f"ps: {missing}: cannot read: No such file or directory")
    path = write_config(tmp_path)
    assert run("hosts", "hostagg", "--config", path, "--out", tmp_path) == (
        2, f"host aggregator: {path}: field 'aggregator': missing (needed to run a host aggregator)")
    assert run("hosts", "replica", "--config", path, "--out", tmp_path) == (
        2, f"replica: {path}: field 'replica': missing (needed to run a replica)")
    assert run("hosts", "bench", "--config", path, "--worker", "h7", "--elements", "5", "--out", tmp_path) == (
        2, f"bench h7: {path}: field 'workers': no worker named 'h7' (have h1, h2)")


def test_ps_role_serves_a_job(tmp_path):
    path = write_config(tmp_path)
    config = json.loads(path.read_text())
    server = subprocess.Popen([sys.executable, "-m", "hosts", "ps", "--config", str(path), "--out", str(tmp_path)],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
    ps = Endpoint("h9", "127.0.0.1", config["ps"]["port"])

    def rank_main(rank):
        with ParameterServerClient(ps, f"h{rank + 1}", rank, 2, timeout_s=20) as client:
            return client.allreduce(np.full(4, rank + 1, dtype=np.float32))

    results, errors = wk.run_ranks(rank_main, 2)
    _, err = server.communicate(timeout=30)
    assert errors == [None, None] and (server.returncode, err) == (0, "")
    for total in results:
        np.testing.assert_array_equal(total, np.full(4, 3, dtype=np.float32))
    assert "done after 1 rounds" in (tmp_path / "h9.log").read_text()
