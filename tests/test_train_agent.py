"""The worker agent and PS host as real processes: results, metrics, config errors, crashes."""
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import fabric as fb
import pytest
import workers as wk

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def write_config(tmp_path, scheme, steps, n=2, **extra):
    ports = wk.free_ports(n + 1)
    # timeout_s: servers and peers wait that long for agents, which import torch first (slow on a busy machine)
    config = {"scheme": scheme, "timeout_s": 60,
              "train": {"steps": steps, "batch_size": 16, "hidden": 16, "eval_every": 10, "seed": 5},
              "workers": [{"name": f"h{i + 1}", "ip": "127.0.0.1", "port": ports[i]} for i in range(n)],
              "ps": {"name": "h9", "ip": "127.0.0.1", "port": ports[n]}, **extra}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    return path


def start(module, *args):
    return subprocess.Popen([PY, "-m", module, *map(str, args)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=180):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, err.strip()


def test_bad_config_is_one_line_naming_file_and_field(tmp_path):
    path = write_config(tmp_path, "ring", 5)
    data = json.loads(path.read_text())
    data["train"]["lr"] = "fast"
    path.write_text(json.dumps(data))
    code, err = finish(start("hosts", "worker", "--config", path, "--worker", "h1", "--out", tmp_path))
    assert code == 2
    assert err == f"agent h1: {path}: field 'train.lr': expected float, got 'fast'"


def test_unknown_worker_and_broken_json(tmp_path):
    path = write_config(tmp_path, "ring", 5)
    code, err = finish(start("hosts", "worker", "--config", path, "--worker", "h7", "--out", tmp_path))
    assert (code, err) == (2, f"agent h7: {path}: field 'workers': no worker named 'h7' (have h1, h2)")
    path.write_text('{"scheme": "ring",\n  "workers": [}')
    code, err = finish(start("hosts", "ps", "--config", path, "--out", tmp_path))
    assert code == 2 and err.startswith(f"ps: {path}:2:15: invalid JSON: Expecting value")


@pytest.mark.slow
def test_ps_job_of_two_agents_trains_and_writes_results(tmp_path):
    path = write_config(tmp_path, "ps", 30)
    server = start("hosts", "ps", "--config", path, "--out", tmp_path)
    agents = [start("hosts", "worker", "--config", path, "--worker", f"h{i}", "--out", tmp_path) for i in (1, 2)]
    assert [finish(a) for a in agents] == [(0, ""), (0, "")]
    assert finish(server) == (0, "")
    results = [json.loads((tmp_path / f"h{i}.result.json").read_text()) for i in (1, 2)]
    assert results[0]["final_accuracy"] == results[1]["final_accuracy"] > 0.3  # chance is 0.1
    assert results[0]["seeds"] == {"model": 5, "data": 5} and results[0]["steps"] == 30
    assert [r["rank"] for r in results] == [0, 1] and results[0]["bytes_sent"] > 0
    lines = [json.loads(x) for x in (tmp_path / "h1.metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == list(range(30))
    assert [r["step"] for r in lines if "test_accuracy" in r] == [9, 19, 29]
    assert "done after 30 rounds" in (tmp_path / "h9.log").read_text()
    assert "final accuracy" in (tmp_path / "h2.log").read_text()


@pytest.mark.slow
def test_crashed_worker_is_named_by_its_peer(tmp_path):
    path = write_config(tmp_path, "ring", 100000)
    agents = {name: start("hosts", "worker", "--config", path, "--worker", name, "--out", tmp_path) for name in ("h1", "h2")}
    metrics = tmp_path / "h2.metrics.jsonl"
    while not (metrics.exists() and metrics.stat().st_size > 0):
        assert agents["h2"].poll() is None, "h2 never started training"
        time.sleep(0.2)
    agents["h2"].kill()
    agents["h2"].wait()
    code, err = finish(agents["h1"], timeout=60)
    assert code == 1
    assert err.startswith("agent h1: ring h1: peer h2 (127.0.0.1:") and "closed the connection" in err
    assert "\n" not in err and "Traceback" in (tmp_path / "h1.log").read_text()


@pytest.mark.slow
def test_innet_job_of_two_agents_through_the_p4_switch(tmp_path):
    ports = wk.free_ports(2, kind=socket.SOCK_DGRAM)
    fabric = fb.Fabric({"s1": fb.star(2, slot_count=16)})
    for i, port in enumerate(ports):
        fabric.attach("s1", i + 1, i + 1, ("127.0.0.1", port))
    job = {"job_id": 1, "slot_base": 0, "slot_count": 16, "agg_ip": fabric.addr[0], "agg_port": fabric.addr[1],
           "timeout_s": 0.2, "workers": [{"name": f"h{i + 1}", "ip": "127.0.0.1", "port": p} for i, p in enumerate(ports)]}
    path = write_config(tmp_path, "innet", 20, job=job)
    fabric.start()
    try:
        agents = [start("hosts", "worker", "--config", path, "--worker", f"h{i}", "--out", tmp_path) for i in (1, 2)]
        assert [finish(a) for a in agents] == [(0, ""), (0, "")]
    finally:
        fabric.close()
    assert fabric.errors == [] and fabric.delivered > 0
    results = [json.loads((tmp_path / f"h{i}.result.json").read_text()) for i in (1, 2)]
    assert results[0]["final_accuracy"] == results[1]["final_accuracy"] > 0.3
    assert results[0]["scheme"] == "innet" and results[0]["bytes_sent"] > 0
    assert fb.counter(fabric.switches["s1"], "completed") > 0
