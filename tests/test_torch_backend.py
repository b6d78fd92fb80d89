"""The torch.distributed backend "aggnet" (hosts.torch_backend): on loopback, real processes
started with torchrun's environment, their in-network sums relayed through aggnet.p4
Pipelines (tests/fabric.py), their other collectives over gloo on 127.0.0.1; on Mininet,
`aggnet run --script` of the unmodified DDP example with "aggnet" and with "gloo"."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import e2e
import fabric as fb
import numpy as np
import pytest
import torch
import workers as wk

from hosts import quantize
from hosts.agent_config import RING_PORT
from hosts.comm import Endpoint
from hosts.ps import ParameterServer
from protocol.job import JobSpec, WorkerSpec

ROOT = Path(__file__).resolve().parent.parent
DDP_EXAMPLE = ROOT / "docs" / "examples" / "ddp_digits.py"
TUTORIAL = ROOT / "docs" / "examples" / "ddp_torchrun.py"  # PyTorch's DDP tutorial shape, "nccl" -> "aggnet"
NO_JOB = ("aggnet backend: no job (set $AGGNET_CONFIG to the agent config; `aggnet run --script` does; outside "
          "Mininet, a config naming your fabric or a host scheme: docs/training.md)")
COLLECTIVES = ROOT / "tests" / "data" / "torch_backend" / "collectives.py"
WORLD = 2
SHAPE = (20, 50)  # collectives.py's 1000 elements, as a 2-D tensor
sys.path.insert(0, str(COLLECTIVES.parent))
from collectives import DTYPES, seeded  # noqa: E402


@pytest.fixture
def innet_job(tmp_path):
    """A star of WORLD workers on one switch, and the agent config of scheme innet that joins it."""
    ports = wk.free_ports(WORLD, kind=fb.socket.SOCK_DGRAM)
    fabric = fb.Fabric({"s1": fb.star(WORLD, slot_count=64)})
    for rank, port in enumerate(ports):
        fabric.attach("s1", rank + 1, rank + 1, ("127.0.0.1", port))
    job = JobSpec(job_id=1, workers=tuple(WorkerSpec(f"h{r + 1}", "127.0.0.1", p) for r, p in enumerate(ports)),
                  slot_base=0, slot_count=64, agg_ip=fabric.addr[0], agg_port=fabric.addr[1], timeout_s=0.2)
    config = {"scheme": "innet", "timeout_s": 5, "job": job.to_dict(),
              "workers": [{"name": w.name, "ip": w.ip, "port": RING_PORT} for w in job.workers]}
    path = tmp_path / "innet.json"
    path.write_text(json.dumps(config))
    fabric.start()
    yield path
    fabric.close()
    assert not fabric.errors, fabric.errors


def run_ranks(argv: list[str], config: Path | None, out: Path) -> list[subprocess.CompletedProcess]:
    """`python ARGV` once per rank with torchrun's variables (and $AGGNET_CONFIG, $AGGNET_OUT); killed on
    the way out. Output goes to files (OUT/rankR.out, .err), so no rank blocks on a pipe nobody reads."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(wk.free_ports(1)[0]),
               AGGNET_OUT=str(out), GLOO_SOCKET_IFNAME="lo", PYTHONPATH=str(ROOT))
    if config is not None:
        env["AGGNET_CONFIG"] = str(config)
    procs = []
    try:
        for r in range(WORLD):
            with open(out / f"rank{r}.out", "w") as stdout, open(out / f"rank{r}.err", "w") as stderr:
                procs.append(subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=stdout, stderr=stderr,
                                              env=dict(env, RANK=str(r), LOCAL_RANK="0")))
        for p in procs:
            p.wait(600)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return [subprocess.CompletedProcess(p.args, p.returncode, (out / f"rank{r}.out").read_text(),
                                        (out / f"rank{r}.err").read_text()) for r, p in enumerate(procs)]


def ok(runs: list[subprocess.CompletedProcess]) -> None:
    assert [r.returncode for r in runs] == [0] * WORLD, "\n".join(r.stderr[-3000:] for r in runs)


def weights(out: Path, world: int = WORLD) -> list[torch.Tensor]:
    states = [torch.load(out / f"rank{r}.pt") for r in range(world)]
    return [torch.cat([t.reshape(-1) for t in s.values()]) for s in states]


def ddp(backend: str, config: Path | None, out: Path, steps: int = 20, lr: float = 0.1) -> list[torch.Tensor]:
    ok(run_ranks([str(DDP_EXAMPLE), "--backend", backend, "--out", str(out), "--steps", str(steps),
                  "--lr", str(lr)], config, out))
    return weights(out)


def ddp_weight_bound(out: Path, lr: float, weights: torch.Tensor, world: int = WORLD) -> float:
    """How far SGD's weights may drift from gloo's, step by step (the drift's feedback through
    later gradients is not modelled): a step moves a weight by lr times the all-reduced bucket S,
    whose W summands lie below 2**e_max (e_max recovered from the call's fractional bits f).
    S errs by quantize.error_bound(W, f) in the switches, gloo's W - 1 float32 additions and
    aggnet's conversion back to float32 by eps/2 * |S| <= eps/2 * W * 2**e_max each; the two
    weight updates round by eps/2 * |w| each."""
    scales = json.loads((out / "h1.backend.json").read_text())["scales"]
    assert scales, "no quantized call recorded"
    eps = float(np.finfo(np.float32).eps)
    bound = 0.0
    for f in scales:
        e_max = quantize.HEADROOM_BITS - f - int(np.ceil(np.log2(world)))
        bound += lr * (quantize.error_bound(world, f) + world * eps / 2 * world * 2.0 ** e_max)
        bound += eps * weights.abs().max().item()
    return bound


@pytest.mark.slow
def test_ddp_innet_gives_gloos_weights_within_the_quantization_bound(innet_job, tmp_path):
    lr = 0.1
    aggnet = ddp("aggnet", innet_job, tmp_path / "aggnet", lr=lr)
    gloo = ddp("gloo", None, tmp_path / "gloo", lr=lr)
    assert torch.equal(aggnet[0], aggnet[1]), "the aggnet ranks' weights diverged"
    bound = ddp_weight_bound(tmp_path / "aggnet", lr, gloo[0])
    diff = (aggnet[0] - gloo[0]).abs().max().item()
    assert 0 < diff <= bound, f"max weight difference {diff} against the bound {bound}"


@pytest.mark.slow
def test_ddp_on_the_parameter_server_matches_gloo_exactly(tmp_path):
    """Scheme ps sums float32 on one host as gloo does for 2 ranks (one rounding): same bits;
    the server counts one round per step (DDP's one bucket), nothing else reaches it."""
    steps = 10
    port = wk.free_ports(1)[0]
    names = [f"h{r + 1}" for r in range(WORLD)]
    config = tmp_path / "ps.json"
    config.write_text(json.dumps({"scheme": "ps", "timeout_s": 60, "ps": {"name": "ps", "ip": "127.0.0.1",
                                                                          "port": port},
                                  "workers": [{"name": n, "ip": "127.0.0.1"} for n in names]}))
    server = ParameterServer(Endpoint("ps", "127.0.0.1", port), names, timeout_s=60)
    rounds: list[int] = []
    thread = threading.Thread(target=lambda: rounds.append(server.serve()), daemon=True)
    thread.start()
    try:
        aggnet = ddp("aggnet", config, tmp_path / "aggnet", steps=steps)
        thread.join(30)
    finally:
        server.close()
    gloo = ddp("gloo", None, tmp_path / "gloo", steps=steps)
    assert rounds == [steps]
    assert torch.equal(aggnet[0], gloo[0]) and torch.equal(aggnet[1], gloo[1])


@pytest.fixture
def ring_job(tmp_path):
    """The agent config of scheme ring between WORLD workers on 127.0.0.1."""
    path = tmp_path / "ring.json"
    path.write_text(json.dumps({"scheme": "ring", "timeout_s": 5, "workers": [
        {"name": f"h{r + 1}", "ip": "127.0.0.1", "port": port} for r, port in enumerate(wk.free_ports(WORLD))]}))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("scheme, reinit", [("innet", False), ("ring", False), ("innet", True)])
def test_every_collective_through_the_backend(scheme, reinit, request, tmp_path):
    """innet: floats within the quantization bound, int32 exact, through the switch; ring: floats
    summed in float32 (for 2 ranks one rounding, so exactly torch's sum), int32 over gloo. With
    reinit a first group is made, used and destroyed before: the second must not get stale sums."""
    argv = [str(COLLECTIVES), str(tmp_path)] + (["--reinit-port", str(wk.free_ports(1)[0])] if reinit else [])
    ok(run_ranks(argv, request.getfixturevalue(f"{scheme}_job"), tmp_path))
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    scales = json.loads((tmp_path / "h1.backend.json").read_text())["scales"]
    assert len(scales) == (6 if scheme == "innet" else 0)  # SUM and AVG of 3 float dtypes
    floats = iter(scales)
    for dtype in DTYPES:
        exact = sum(seeded(r, dtype).to(torch.float64) for r in range(WORLD))
        for op in ("SUM", "AVG"):
            got = [res[f"{op}/{dtype}"] for res in results]
            assert got[0].shape == SHAPE and got[0].dtype == dtype
            assert torch.equal(got[0], got[1]), f"{op} {dtype}: ranks differ"
            value = got[0].reshape(-1).to(torch.float64)
            if dtype == torch.int32:
                want = exact if op == "SUM" else torch.floor(exact / WORLD)
                assert torch.equal(value, want), f"{op} int32 not exact"
                continue
            divisor = 1 if op == "SUM" else WORLD
            if scheme == "ring":
                want32 = sum(seeded(r, dtype).to(torch.float32) for r in range(WORLD)) / divisor
                assert torch.equal(got[0].reshape(-1), want32.to(dtype)), f"{op} {dtype}: not the float32 sum"
                continue
            f = next(floats)
            want = exact / divisor
            # the quantized sum's bound, then rounding the result to the tensor's dtype
            bound = quantize.error_bound(WORLD, f) / divisor + want.abs() * torch.finfo(dtype).eps
            assert ((value - want).abs() <= bound).all(), f"{op} {dtype}: beyond the quantization bound"
    for r, res in enumerate(results):
        assert res["MAX"].item() == WORLD - 1
        assert torch.equal(res["broadcast"], torch.arange(3.0) + WORLD - 1)
        assert torch.equal(res["all_gather"], torch.arange(float(WORLD)).repeat_interleave(2).reshape(WORLD, 2))
        assert res["reduce_scatter"].item() == sum(r + q for q in range(WORLD))
        assert res["send_recv"].item() == (42.0 if r == 1 else 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("wrong, message", [
    ("dtype", "aggnet all_reduce: dtype torch.float64 is not supported (SUM and AVG take torch.float32, "
              "torch.float16, torch.bfloat16, torch.int32)"),
    ("size", "aggnet all_reduce: the ranks disagree on the call (rank {rank}: {n} elements of torch.float32, "
             "op SUM); every rank must all-reduce the same size, dtype and op in the same order"),
    ("subgroup", "aggnet backend: a second group while the first is open; the AggNet job is the whole world "
                 "(make subgroups with new_group(..., backend=\"gloo\"))"),
])
def test_wrong_calls_fail_every_rank_with_one_clear_error(innet_job, tmp_path, wrong, message):
    runs = run_ranks([str(COLLECTIVES), str(tmp_path), "--wrong", wrong], innet_job, tmp_path)
    for rank, run in enumerate(runs):
        assert run.returncode != 0
        assert message.format(rank=rank, n=10 + rank) in run.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_dead_rank_fails_the_others_with_a_timeout(innet_job, tmp_path):
    runs = run_ranks([str(COLLECTIVES), str(tmp_path), "--wrong", "dead-peer"], innet_job, tmp_path)
    assert runs[-1].returncode == 0  # the rank that left
    last = runs[0].stderr.strip().splitlines()[-1]
    assert runs[0].returncode != 0
    assert "job 1: no result for 5.0 s" in last, last


def test_init_without_a_job_is_a_clear_error(tmp_path):
    runs = run_ranks([str(COLLECTIVES), str(tmp_path)], None, tmp_path)
    for run in runs:
        assert run.returncode != 0
        assert run.stderr.strip().splitlines()[-1].endswith(NO_JOB)


def torchrun(tmp_path: Path, config: Path | None, epochs: int) -> subprocess.CompletedProcess:
    """Real torchrun (2 processes on this machine) of the tutorial-shaped script, as a user starts it."""
    env = {k: v for k, v in os.environ.items() if k not in ("AGGNET_CONFIG", "PYTHONPATH")}
    env.update(AGGNET_OUT=str(tmp_path / "out"), **({"AGGNET_CONFIG": str(config)} if config else {}))
    return subprocess.run([str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc-per-node",
                           str(WORLD), str(TUTORIAL), str(epochs), "1", "--snapshot", str(tmp_path / "snapshot.pt")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_torchrun_runs_the_tutorial_script_with_only_the_backend_renamed(ring_job, tmp_path):
    """No AggNet import and no PYTHONPATH: torch registers "aggnet" through its entry point. Each
    epoch's 8 steps are summed by the job's ring; the ranks end with the same weights; a second
    launch resumes from the snapshot; without a job the launch fails with one clear line."""
    text = TUTORIAL.read_text()
    assert "hosts" not in text and 'init_process_group(backend="aggnet")' in text
    done = torchrun(tmp_path, ring_job, 3)
    assert done.returncode == 0, done.stderr[-3000:]
    assert torch.load(tmp_path / "snapshot.pt")["EPOCHS_RUN"] == 3
    ranks = [torch.load(tmp_path / f"snapshot.pt.rank{r}") for r in range(WORLD)]
    assert all(torch.equal(ranks[0][k], ranks[1][k]) for k in ranks[0])
    calls = [json.loads((tmp_path / "out" / f"h{r + 1}.backend.json").read_text())["calls"] for r in range(WORLD)]
    assert calls == [3 * 8] * WORLD  # 512 samples, 2 ranks, batches of 32: 8 all-reduces an epoch
    done = torchrun(tmp_path, ring_job, 4)
    assert done.returncode == 0 and "[rank 0] resuming at epoch 3" in done.stdout, done.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "h1.backend.json").read_text())["calls"] == 8
    done = torchrun(tmp_path, None, 4)
    # the first rank to fail makes torchrun stop the others: each may or may not have said so by then
    assert done.returncode != 0 and 1 <= done.stderr.count(f"BackendError: {NO_JOB}") <= WORLD


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")
@pytest.mark.timeout(2 * 600 + 120)  # two runs of at most 600 s each (pyproject's cap: 420 s)
def test_aggnet_run_script_ddp_gives_gloos_weights_on_mininet(tmp_path):
    """star4, 4 workers: the DDP example through the switch, then over gloo on the same emulated network."""
    world, steps, lr = 4, 20, 0.1
    runs = {}
    for backend in ("aggnet", "gloo"):
        out = tmp_path / backend
        run_out = tmp_path / f"run-{backend}"
        done = e2e.run_command(e2e.aggnet_cmd("run", "--out", str(run_out), "--script", str(DDP_EXAMPLE),
                                              "--backend", backend, "--out", str(out), "--steps", str(steps),
                                              "--lr", str(lr)), timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads((e2e.run_dir(run_out) / "results.json").read_text())
        assert results["script"][1:3] == ["--backend", backend] and "finished on 4 workers" in done.stdout
        runs[backend] = (weights(out, world), results)
        assert e2e.leftovers(tmp_path) == []
    (aggnet, results), (gloo, _) = runs["aggnet"], runs["gloo"]
    assert all(torch.equal(aggnet[0], w) for w in aggnet[1:]), "the aggnet ranks' weights diverged"
    assert [results["per_worker"][h]["calls"] for h in results["config"]["worker_hosts"]] == [steps] * world
    assert results["counters"]["s1"]["jobs"]["1"]["aggregated"] > 0  # the sums went through the switch
    bound = ddp_weight_bound(Path(results["run_dir"]) / "logs", lr, gloo[0], world)
    diff = (aggnet[0] - gloo[0]).abs().max().item()
    assert 0 < diff <= bound, f"max weight difference {diff} against the bound {bound}"
    print(f"\nDDP on star4: aggnet vs gloo max weight difference {diff:.3g}, bound {bound:.3g}")


@pytest.mark.parametrize("args, message", [
    (["--script", "no_such.py"], "--script: no file 'no_such.py'"),
    (["--script"], "--script: name the script to run (aggnet run [OPTIONS] --script train.py [ARGS])"),
    (["--workload", "allreduce", "--script", str(DDP_EXAMPLE)],
     "--script: the script is the workload; drop --workload allreduce"),
])
def test_aggnet_run_script_refuses_bad_input_in_one_line(tmp_path, args, message):
    done = e2e.run_command(e2e.aggnet_cmd("run", "--out", str(tmp_path), *args), timeout=120, cwd=ROOT)
    assert (done.returncode, done.stderr.strip()) == (2, message)
    assert list(tmp_path.iterdir()) == []  # refused before any network or run folder


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")
@pytest.mark.timeout(600 + 120)  # the run's own limit, and its teardown (pyproject's cap: 420 s)
def test_aggnet_run_script_names_the_rank_whose_call_was_wrong(tmp_path):
    done = e2e.run_command(e2e.aggnet_cmd("run", "--workers", "2", "--out", str(tmp_path / "run"), "--script",
                                          str(COLLECTIVES), str(tmp_path), "--wrong", "size"), timeout=600, cwd=ROOT)
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("run failed: h") and "BackendError: aggnet all_reduce: the ranks disagree" in line, line
    results = json.loads((e2e.run_dir(tmp_path / "run") / "results.json").read_text())
    assert results["error"] in line
    assert e2e.leftovers(tmp_path) == []
