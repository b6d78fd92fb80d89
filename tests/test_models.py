"""Real models as workloads (hosts.models): the architectures have the published parameter counts,
DDP's buckets are the ones torch.distributed's own assignment makes, the analytic model gives a
hand-worked iteration, profiles load (or fail with one line naming file and field), and
`aggnet profile` measures one that a plan can use."""
from __future__ import annotations

import contextlib
import json
import subprocess

import e2e
import numpy as np
import pytest
import torch
import torch.distributed as dist

from hosts.agent_config import AgentConfig, TrainConfig
from hosts.comm import AllReduce, Endpoint
from hosts.models import MODEL_NAMES, analytic, ddp, profile, workload
from hosts.models.arch import MODELS, build, layers
from hosts.models.ddp import Bucket, Plan
from hosts.straggler import Straggler

COUNTS = {"resnet50": 25_557_032, "vgg16": 138_357_544, "bert-base": 109_482_240, "gpt2": 124_439_808,
          "ncf": 31_832_577, "lstm": 1_776_946_046}


def test_names_without_torch_are_the_registry():
    assert MODEL_NAMES == tuple(MODELS) == tuple(COUNTS)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_parameter_counts_are_the_published_ones(name):
    model = build(name)
    assert all(p.is_meta for p in model.parameters())  # no memory for weights
    assert sum(p.numel() for p in model.parameters()) == COUNTS[name]


def _torch_buckets(params: list[torch.Tensor], caps: list[int]) -> list[list[int]]:
    """torch.distributed's own assignment, with the parameters in gradient-ready order (reversed),
    as DDP's Reducer rebuilds its buckets after the first iteration."""
    order = list(reversed(range(len(params))))
    buckets, _ = dist._compute_bucket_assignment_by_size([params[i] for i in order], caps,
                                                         [False] * len(params), order)
    return [list(b) for b in buckets]


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("bucket_mb", [None, 10.0])
def test_buckets_are_torch_ddps(name, bucket_mb):
    params = list(build(name).parameters())  # on the meta device: torch sizes them without memory
    sizes = [p.numel() * 4 for p in params]
    cap = int((bucket_mb or 25) * (1 << 20))
    caps = [dist._DEFAULT_FIRST_BUCKET_BYTES, cap] if bucket_mb is None else [cap]
    ours = ddp.assign_buckets(sizes, bucket_mb)
    assert ours == _torch_buckets(params, caps)
    assert sorted(i for b in ours for i in b) == list(range(len(params)))
    if bucket_mb is None:  # the small first bucket, then buckets of at least 25 MiB but the last
        assert sum(sizes[i] for i in ours[0]) >= 1 << 20
        assert all(sum(sizes[i] for i in b) >= 25 << 20 for b in ours[1:-1])


def test_plan_readies_buckets_in_order_and_covers_every_gradient():
    model = build("gpt2")
    plan = ddp.plan("gpt2", model, profile.load("gpt2", "cpu"))
    assert plan.elements == COUNTS["gpt2"]
    ready = [b.ready_s for b in plan.buckets]
    assert ready == sorted(ready) and 0 < ready[0] and ready[-1] == pytest.approx(plan.backward_s)
    assert plan.buckets[-1].elements >= 50257 * 768  # the tied embedding, ready last, in the last bucket


@pytest.mark.parametrize("allreduce_s", [1e-4, 10.0])
def test_a_worker_reports_when_its_all_reduces_were_in_flight(tmp_path, monkeypatch, allreduce_s):
    """On a clock of the test's: all-reduces quicker than the gaps between buckets are one interval
    each, from its issue to its end; all-reduces so slow that every next bucket waits are one interval
    an iteration, from the first bucket's issue to the last one's end; the untimed warm-up pass before them is one
    interval. Each bucket's time is reported too."""
    clock = [1000.0]
    monkeypatch.setattr(workload.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(workload, "_sleep_until", lambda t: clock.__setitem__(0, max(clock[0], t)))

    class Comm(AllReduce):
        def allreduce(self, vec: np.ndarray) -> np.ndarray:
            clock[0] += allreduce_s
            return np.full_like(vec, 3.0)  # the sum of ranks + 1 of two workers

        def close(self) -> None:
            pass

    monkeypatch.setattr(workload, "make_allreduce", lambda config, rank: contextlib.nullcontext(Comm()))
    config = AgentConfig("ring", TrainConfig(), (Endpoint("h1", "10.0.0.1", 1), Endpoint("h2", "10.0.0.2", 1)))
    report = workload.run_model(config, "h1", "resnet50", "cpu", None, 2, 0.001, None, 1.0, tmp_path)
    plan = ddp.plan("resnet50", build("resnet50"), profile.load("resnet50", "cpu"))
    starts = [r["window"][0] + plan.forward_s for r in report["iterations"]]  # each backward pass's start
    if allreduce_s < 1e-3:
        expected = [[t + b.ready_s, t + b.ready_s + allreduce_s] for t in starts for b in plan.buckets]
    else:
        expected = [[t + plan.buckets[0].ready_s, t + plan.buckets[0].ready_s + len(plan.buckets) * allreduce_s]
                    for t in starts]
    warm_up, *timed = report["comm_intervals"]  # every bucket once, back to back, before the first iteration
    assert warm_up[1] - warm_up[0] == pytest.approx(len(plan.buckets) * allreduce_s) and warm_up[1] <= starts[0]
    assert len(timed) == len(expected)
    for got, want in zip(timed, expected):
        assert got == pytest.approx(want, abs=1e-9)
    assert json.loads((tmp_path / "h1.model.json").read_text())["comm_intervals"] == report["comm_intervals"]
    for record in report["iterations"]:  # each bucket's all-reduce time
        assert record["bucket_s"] == pytest.approx([allreduce_s] * len(plan.buckets), abs=1e-9)


def test_a_straggler_period_stretches_the_iterations_it_covers(tmp_path, monkeypatch):
    """On a clock of the test's: h1 is slowed 3 times in a period that covers its second iteration's start
    only: that iteration's forward pass, bucket issues and backward end are 3 times as late, the others not."""
    clock = [1000.0]
    monkeypatch.setattr(workload.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(workload, "_sleep_until", lambda t: clock.__setitem__(0, max(clock[0], t)))
    issued: list[float] = []

    class Comm(AllReduce):
        def allreduce(self, vec: np.ndarray) -> np.ndarray:
            issued.append(clock[0])
            return np.full_like(vec, 3.0)

        def close(self) -> None:
            pass

    monkeypatch.setattr(workload, "make_allreduce", lambda config, rank: contextlib.nullcontext(Comm()))
    plan = ddp.plan("ncf", build("ncf"), profile.load("ncf", "a100"))
    period = (1000.0 + plan.compute_s * 0.5, 1000.0 + plan.compute_s * 1.5, 3.0)  # the second iteration starts in it
    config = AgentConfig("ring", TrainConfig(), (Endpoint("h1", "10.0.0.1", 1), Endpoint("h2", "10.0.0.2", 1)),
                         stragglers={"h1": Straggler(periods=(period,))})
    report = workload.run_model(config, "h1", "ncf", "a100", None, 3, 0.001, None, 1.0, tmp_path)
    slow = [it["compute_s"] / plan.compute_s for it in report["iterations"]]
    assert slow == pytest.approx([1.0, 3.0, 1.0])
    timed = issued[len(plan.buckets) + 2:]  # after the barrier, the warm-up pass and the barrier again
    for i, (it, factor) in enumerate(zip(report["iterations"], slow)):
        start, end = it["window"]
        assert end - start == pytest.approx(plan.compute_s * factor)
        assert [t - start for t in timed[i * len(plan.buckets):(i + 1) * len(plan.buckets)]] == pytest.approx(
            [(plan.forward_s + b.ready_s) * factor for b in plan.buckets])


def test_analytic_iteration_by_hand():
    # host aggregation, 2 workers: the aggregator's link carries 2 x 724,000 bytes in 1448-byte
    # segments of 1514-byte frames, and a 66-byte ACK for every two of the 1,000 segments coming the
    # other way: 1,547,000 bytes a bucket, 1.0 s at 12.376 Mb/s (2.0 s for the double bucket). Forward
    # 1 s, backward 2 s. Bucket 1 ready at 1.1, on the link until 3.1; bucket 2 ready at 3.0 but waits
    # for it: 3.1 to 4.1. Compute 3 s, so 1.1 s exposed.
    plan = Plan("hand", forward_s=1.0, backward_s=2.0,
                buckets=(Bucket(2 * 181_000, ready_s=0.1), Bucket(181_000, ready_s=2.0)))
    got = analytic.iteration(plan, "hostagg", workers=2, link_bps=12.376e6, lanes=32)
    assert got["iteration_s"] == pytest.approx(4.1)
    assert got["compute_s"] == 3.0 and got["exposed_comm_s"] == pytest.approx(1.1)
    assert got["comm_s"] == pytest.approx(3.0)
    # the ring moves 2 (W-1)/W of a bucket per worker: with 2 workers one bucket's worth, half the PS's
    assert analytic.link_bytes("ring", 724_000, 2, 32) == pytest.approx(757_000 + 250 * 66)
    # in-network: 364 values a 1514-byte frame; 1,000 values are 3 frames
    assert analytic.link_bytes("innet", 4_000, 8, 364) == 3 * 1514
    # the parameter server's sums trail its 2 workers' buckets by one 8,192-byte piece of what is sent:
    # 10,000 values at grad scale 0.5 send 20,000 bytes, pieces of 8,192, 8,192 and 3,616 bytes; the
    # last piece is 7,232 bytes in the emulated link's time. A bucket of one piece: in, then out.
    tcp = (1514 + 33) / 1448
    assert analytic.link_bytes("ps", 40_000, 2, 32, grad_scale=0.5) == pytest.approx(2 * (40_000 + 7_232) * tcp)
    assert analytic.link_bytes("ps", 4_000, 2, 32) == pytest.approx(2 * 2 * 4_000 * tcp)
    # a real 100 Mb/s link carrying 1% of every bucket emulates 10 Gb/s
    assert analytic.emulated_link_bps(100, grad_scale=0.01) == pytest.approx(10e9)


def test_profile_errors_name_file_and_field(tmp_path):
    good = json.loads(profile.profile_path("resnet50", "cpu").read_text())
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**good, "batch": "two"}))
    with pytest.raises(profile.ProfileError, match=rf"^{path}: field batch: "):
        profile.load("resnet50", str(path))
    path.write_text(json.dumps({**good, "layers": {**good["layers"], "fc": {"forward_s": 1}}}))
    with pytest.raises(profile.ProfileError, match=r"field layers\.fc: needs forward_s and backward_s"):
        profile.load("resnet50", str(path))
    with pytest.raises(profile.ProfileError, match="field model: 'resnet50', the run's model is 'vgg16'"):
        profile.load("vgg16", str(path))
    with pytest.raises(profile.ProfileError, match="no such profile .*shipped for vgg16: a100, cpu, h100"):
        profile.load("vgg16", "tpu")
    layers = dict(good["layers"])
    layers.pop("fc")
    path.write_text(json.dumps({**good, "layers": layers}))
    with pytest.raises(profile.ProfileError, match="not the layers of model resnet50"):
        ddp.plan("resnet50", build("resnet50"), profile.load("resnet50", str(path)))


def test_gpu_profile_says_where_its_figure_comes_from():
    gpu = profile.load("resnet50", "a100")
    assert "A100" in gpu.device and "DeepLearningExamples" in gpu.source and gpu.batch == 256
    assert gpu.forward_s + gpu.backward_s == pytest.approx(256 / 2470, rel=1e-3)


# The published figure behind each GPU profile: (samples, seconds) of one iteration, as its source derives it.
FIGURES = {("vgg16", "a100"): (448, 448 / 1189.76), ("bert-base", "a100"): (320, 320 / 443),
           ("bert-base", "h100"): (320, 320 / 812), ("gpt2", "a100"): (64, 0.300),
           ("ncf", "a100"): (1048576, 1048576 / 34.08e6), ("lstm", "v100"): (256, 4 * 256 * 20 / 33800)}


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_model_has_a_gpu_profile_from_a_published_figure_and_uses_it_by_default(name):
    """A100 and H100 for the four models of the figure and NCF; the LSTM's published figure is a V100's.
    Each profile's layers are the model's, and its iteration the figure's (where the figure is direct)."""
    gpus = ("v100",) if name == "lstm" else ("a100", "h100")
    assert [g for g in profile.shipped(name) if g != "cpu"] == list(gpus)
    assert profile.resolve(name, None) == gpus[0] and profile.resolve(name, "cpu") == "cpu"
    for gpu in gpus:
        prof = profile.load(name, gpu)
        prof.check_layers(list(layers(build(name))))
        assert gpu.upper() in prof.device and "/" in prof.source  # a repository path or a URL
        if (name, gpu) in FIGURES:
            batch, seconds = FIGURES[name, gpu]
            assert prof.batch == batch and prof.forward_s + prof.backward_s == pytest.approx(seconds, rel=1e-4)
    h100 = profile.load(name, gpus[-1])
    assert h100.at_batch(2 * h100.batch).forward_s == pytest.approx(2 * h100.forward_s)


def test_aggnet_profile_measures_a_usable_profile(tmp_path):
    out = tmp_path / "r50.json"
    done = subprocess.run(e2e.aggnet_cmd("profile", "resnet50", "--batch", "1", "--repeats", "1", "--out", str(out)),
                          capture_output=True, text=True, cwd=e2e.REPO)
    assert done.returncode == 0, done.stderr
    measured = profile.load("resnet50", str(out))
    assert measured.forward_s > 0 and measured.backward_s > 0 and measured.batch == 1
    assert "measured by `aggnet profile resnet50 --batch 1`" in measured.source
    plan = ddp.plan("resnet50", build("resnet50"), measured)
    assert plan.compute_s == pytest.approx(measured.forward_s + measured.backward_s)


@pytest.mark.parametrize("argv, message", [
    (["run", "--workload", "model:alexnet"], "--workload"),
    (["run", "--workload", "model:resnet50", "--grad-scale", "2"], "--grad-scale"),
    (["profile", "resnet50", "--rescale-to", "0.1"], "--rescale-to: a time > 0, with --device and --source"),
])
def test_bad_model_options_are_one_line(argv, message):
    done = subprocess.run(e2e.aggnet_cmd(*argv), capture_output=True, text=True, cwd=e2e.REPO)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_speedup_figure_is_drawn(tmp_path):
    from testbed.plots import plot_model_speedups

    case = {"workers": 4, "emulated_gbps": 1.0, "speedup_vs_ring": 1.5, "speedup_vs_ps": 5.9}
    figure = {"profile": "cpu", "models": {"resnet50": [case, {**case, "emulated_gbps": 10.0}], "gpt2": [case]}}
    path = plot_model_speedups(figure, tmp_path / "models.png")
    assert path.read_bytes().startswith(b"\x89PNG")
