"""The DDP communication hook: docs/examples/ddp_digits.py (plain DDP over gloo plus one line)
trained by 2 processes whose gradient buckets go through AggNet's parameter server over TCP
(the server runs in this test, so it can count the rounds the hook sent it)."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import workers as wk

from hosts.agent_config import TrainConfig
from hosts.comm import Endpoint
from hosts.data import load_dataset
from hosts.ddp_hook import HookError, connect
from hosts.model import flat_params
from hosts.ps import ParameterServer
from hosts.train import train_reference

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "ddp_digits.py"


@pytest.mark.slow
def test_ddp_with_aggnet_hook_trains_like_one_process(tmp_path):
    world, steps = 2, 40
    ports = wk.free_ports(2)
    names = [f"h{r + 1}" for r in range(world)]
    config = {"scheme": "ps", "timeout_s": 120, "ps": {"name": "ps", "ip": "127.0.0.1", "port": ports[0]},
              "workers": [{"name": name, "ip": "127.0.0.1"} for name in names]}
    server = ParameterServer(Endpoint("ps", "127.0.0.1", ports[0]), names, timeout_s=120)
    rounds = []
    server_thread = threading.Thread(target=lambda: rounds.append(server.serve()), daemon=True)
    server_thread.start()
    (tmp_path / "job.json").write_text(json.dumps(config))
    env = dict(os.environ, AGGNET_CONFIG=str(tmp_path / "job.json"), GLOO_SOCKET_IFNAME="lo")
    procs = [subprocess.Popen([sys.executable, str(EXAMPLE), "--rank", str(r), "--world", str(world),
                               "--out", str(tmp_path), "--steps", str(steps), "--master", f"127.0.0.1:{ports[-1]}"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    outputs = [p.communicate(timeout=300) for p in procs]
    server_thread.join(30)
    server.close()
    assert [p.returncode for p in procs] == [0] * world, [err[-2000:] for _, err in outputs]

    states = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    params = [torch.cat([t.reshape(-1) for t in s.values()]) for s in states]
    assert torch.equal(params[0], params[1]), "ranks' weights diverged"
    assert rounds == [steps]  # the tiny model is one DDP bucket: one AggNet all-reduce per step
    config = TrainConfig(steps=steps, batch_size=16, lr=0.1, momentum=0.0, seed=0)
    reference = flat_params(train_reference(config, load_dataset("digits", 0), world))
    diff = (params[0] - reference).abs().max().item()
    assert diff <= 1e-5, f"max abs weight difference {diff}"


def test_connect_without_a_config_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("AGGNET_CONFIG", raising=False)
    with pytest.raises(HookError) as info:
        connect(rank=0)
    assert str(info.value) == "aggnet DDP hook: no config (pass config_path or set $AGGNET_CONFIG)"
