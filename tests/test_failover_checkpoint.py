"""Per-step checkpoints: a run resumed from step N ends with the weights of an uninterrupted
run, workers agree on the newest step they all have, and the agent config carries the new
options (scheme hostagg, staleness, stragglers) with one-line errors."""
import dataclasses
import json

import pytest
import torch

from hosts.agent_config import ConfigError, TrainConfig, parse_config
from hosts.checkpoint import Checkpointer, CheckpointError, common_step
from hosts.data import Sharder, load_dataset
from hosts.host_agg import RoundBook
from hosts.model import build_model, flat_params
from hosts.straggler import Straggler
from hosts.train import run_training, train_reference

CONFIG = TrainConfig(steps=12, batch_size=16, hidden=16, eval_every=0, seed=4)


def test_resumed_training_equals_uninterrupted(tmp_path):
    data = load_dataset(CONFIG.dataset, CONFIG.seed)
    whole = train_reference(CONFIG, data, world=2)
    ck = Checkpointer(tmp_path, "h1")
    steps_seen = []
    first = TrainConfig(**{**CONFIG.__dict__, "steps": 7})  # the run "dies" after step 6
    sharder = Sharder(len(data.y_train), 2, CONFIG.batch_size, CONFIG.seed)
    run_training(first, data, sharder.global_batch, lambda g: g, sharder.batches_per_epoch, checkpointer=ck)
    assert ck.steps() == [5, 6]  # only the newest KEEP steps stay
    resumed = run_training(CONFIG, data, sharder.global_batch, lambda g: g, sharder.batches_per_epoch,
                           on_step=lambda r: steps_seen.append(r["step"]), checkpointer=ck, resume_step=5)
    assert steps_seen == list(range(6, 12))  # step 6 is redone, never applied twice
    assert torch.equal(flat_params(resumed), flat_params(whole))


class Killed(Exception):
    """Stands for SIGKILL landing right after a checkpoint was written."""


class DyingCheckpointer(Checkpointer):
    def save(self, step, model, optimizer, comm=None):
        super().save(step, model, optimizer, comm)
        if step == 3:
            raise Killed


def test_every_checkpointed_step_has_its_metrics_record(tmp_path):
    """The fault runs' lineage is read from the metrics records: a worker killed between saving a
    step and recording it would show a hole where its weights went through a step (CI saw it once)."""
    data = load_dataset(CONFIG.dataset, CONFIG.seed)
    sharder = Sharder(len(data.y_train), 1, CONFIG.batch_size, CONFIG.seed)
    ck = DyingCheckpointer(tmp_path, "h1")
    recorded = []
    with pytest.raises(Killed):
        run_training(CONFIG, data, sharder.global_batch, lambda g: g, sharder.batches_per_epoch,
                     on_step=lambda r: recorded.append(r["step"]), checkpointer=ck)
    assert ck.steps() == [2, 3] and recorded == [0, 1, 2, 3]


@dataclasses.dataclass(frozen=True)
class RecordedStraggler(Straggler):
    """A straggler that notes each pause, so the test sees where in the step it falls."""

    events: list[str] = dataclasses.field(default_factory=list)

    def after_compute(self, compute_s: float, elapsed_s: float = 0.0) -> None:
        super().after_compute(compute_s, elapsed_s)
        self.events.append("pause")


def test_straggler_delay_lengthens_steps_not_results():
    """The pause is part of the step and not of its communication: each step pauses once, before it
    communicates, and its step time exceeds its communication time by at least the set delay."""
    data = load_dataset(CONFIG.dataset, CONFIG.seed)
    sharder = Sharder(len(data.y_train), 1, CONFIG.batch_size, CONFIG.seed)
    config = TrainConfig(**{**CONFIG.__dict__, "steps": 3})
    times, events = [], []

    def communicate(g):
        events.append("comm")
        return g

    slow = run_training(config, data, sharder.global_batch, communicate, sharder.batches_per_epoch,
                        on_step=lambda r: times.append((r["step_time_s"], r["comm_time_s"])),
                        straggler=RecordedStraggler(delay_s=0.1, events=events))
    fast = run_training(config, data, sharder.global_batch, lambda g: g, sharder.batches_per_epoch)
    assert events == ["pause", "comm"] * 3
    assert len(times) == 3 and all(step - comm >= 0.1 for step, comm in times)
    assert torch.equal(flat_params(slow), flat_params(fast))


def test_common_step_is_the_newest_step_everyone_has(tmp_path):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for worker, steps in (("h1", [3, 4, 5]), ("h2", [3, 4])):
        ck = Checkpointer(tmp_path, worker)
        for s in steps:
            ck.save(s, model, opt)
    assert common_step(tmp_path, ["h1", "h2"]) == 4
    assert common_step(tmp_path, ["h1", "h3"]) == -1  # h3 never completed a step: start over
    with pytest.raises(CheckpointError, match=r"worker h2 has no checkpoint of step 5 \(has \[3, 4\]\)"):
        Checkpointer(tmp_path, "h2").load(5, model, opt)
    for s in (6, 7):
        Checkpointer(tmp_path, "h1").save(s, model, opt)
    with pytest.raises(CheckpointError, match="workers share no checkpointed step"):
        common_step(tmp_path, ["h1", "h2"])


def base_config():
    return {"scheme": "hostagg", "workers": [{"name": "h1", "ip": "10.0.0.1"}, {"name": "h2", "ip": "10.0.0.2"}],
            "aggregator": {"name": "h3", "ip": "10.0.0.3"}, "replica": {"name": "h4", "ip": "10.0.0.4"},
            "staleness": 2, "stragglers": {"h2": {"delay_s": 0.1}}}


def test_hostagg_config_round_trips():
    config = parse_config(base_config(), "job.json")
    assert (config.aggregator.port, config.replica.port, config.staleness) == (47200, 47300, 2)
    assert config.stragglers == {"h2": Straggler(0.1)}
    again = parse_config(json.loads(json.dumps(config.to_dict())), "again.json")
    assert again == config
    book = RoundBook.from_config(config)
    assert (book.world, book.steps, book.staleness) == (2, config.train.steps, 2)


@pytest.mark.parametrize("change, message", [
    ({"aggregator": None}, "job.json: field 'aggregator': missing (scheme hostagg needs"),
    ({"staleness": -1}, "job.json: field 'staleness': expected an integer >= 0, got -1"),
    ({"staleness": 1.5}, "job.json: field 'staleness': expected an integer >= 0, got 1.5"),
    ({"wait_s": "soon"}, "job.json: field 'wait_s': expected a number >= 0"),
    ({"stragglers": {"h7": {"delay_s": 1}}}, "job.json: field 'stragglers.h7': 'h7' is not a worker"),
    ({"replica": {"name": "h4", "ip": "nowhere"}}, "job.json: field 'replica.ip': 'nowhere' is not an IPv4"),
])
def test_hostagg_config_errors(change, message):
    data = base_config()
    for key, value in change.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    with pytest.raises(ConfigError) as info:
        parse_config(data, "job.json")
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_agent_refuses_to_resume_past_the_end(tmp_path):
    from hosts.agent import run_agent

    config = parse_config({**base_config(), "train": {"steps": 5}}, "job.json")
    with pytest.raises(CheckpointError, match=r"^agent h1: --resume-step 4: nothing left to train \(the job has 5"):
        run_agent(config, "h1", tmp_path, checkpoint_dir=tmp_path, resume_step=4)
    with pytest.raises(CheckpointError, match="--resume-step needs --checkpoint"):
        run_agent(config, "h1", tmp_path, resume_step=1)


def test_the_in_network_all_reduce_state_goes_into_the_checkpoint(tmp_path):
    """What a training worker holds is an InNetworkAllReduce: its client's carried-over bits must
    reach the checkpoint and come back from it."""
    import socket

    from hosts.allreduce import InNetworkAllReduce
    from protocol.job import JobSpec, WorkerSpec

    def comm():
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        job = JobSpec(job_id=1, workers=(WorkerSpec("h1", "127.0.0.1", sock.getsockname()[1]),), slot_base=0,
                      slot_count=8, agg_ip="127.0.0.1", agg_port=1, lanes=32, timeout_s=0.05)
        return InNetworkAllReduce(job, 0, sock=sock)

    data = load_dataset(CONFIG.dataset, CONFIG.seed)
    model = build_model(CONFIG.model, data.features, data.classes, CONFIG.seed, CONFIG.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG.lr)
    saved, restored = comm(), comm()
    try:
        saved.client.load_state_dict({"next_scale": {4874: 17}})
        ck = Checkpointer(tmp_path, "h1")
        ck.save(3, model, optimizer, saved)
        ck.load(3, model, optimizer, restored)
        assert restored.state_dict() == {"next_scale": {4874: 17}}
    finally:
        saved.close()
        restored.close()
