"""The data-parallel training loop.

Every step, on every worker: forward and backward on the local batch, flatten the
gradients into one vector, all-reduce (sum) it, divide by the number of workers, step the
optimizer. All workers start from the same seeded weights and receive bit-identical sums,
so their weights stay identical. `train_reference` runs the same loop in one process on
the global batches; data-parallel training must match it up to float rounding (and, for
the in-network scheme, the quantization bound).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from .agent_config import TrainConfig
from .checkpoint import Checkpointer, Stateful
from .comm import AllReduce
from .data import Dataset, Sharder
from .model import build_model, flat_grad, set_flat_grad
from .straggler import Straggler

StepCallback = Callable[[dict], None]
Ahead = Callable[[int], "torch.Tensor | None"]


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(mean cross-entropy loss, accuracy in 0..1) on the given samples."""
    with torch.no_grad():
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(dim=1) == y).float().mean().item()
    return loss, accuracy


def run_training(config: TrainConfig, data: Dataset, batch_of_step: Callable[[int], np.ndarray],
                 average: Callable[[torch.Tensor], torch.Tensor], batches_per_epoch: int,
                 on_step: StepCallback | None = None, checkpointer: Checkpointer | None = None,
                 resume_step: int = -1, straggler: Straggler | None = None,
                 comm: Stateful | None = None, closed: Ahead | None = None) -> nn.Module:
    """The loop shared by workers and the reference; `average` turns a local gradient into the step's.

    With a checkpointer the state after every step is saved (with `comm`'s, the all-reduce
    behind `average`), and resume_step >= 0 restores the state after that step and continues
    with the next (batches depend on the step only, so a resumed run computes what an
    uninterrupted one would). A straggler sleeps after each step's compute.

    `closed(step)`: the step's averaged gradient when its round already closed without this
    worker (a laggard under bounded staleness, hosts.host_agg), else None. Such a step computes
    nothing: the worker applies the round and so catches up with the newest weights; its record
    says `skipped` and repeats the last computed loss.
    """
    model = build_model(config.model, data.features, data.classes, config.seed, config.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    if resume_step >= 0:
        if checkpointer is None:
            raise ValueError("resume_step needs a checkpointer to load from")
        checkpointer.load(resume_step, model, optimizer, comm)
    began: float | None = None  # a straggler's period counts from the end of the first step, when all have started
    loss = float("nan")
    for step in range(resume_step + 1, config.steps):
        t0 = time.perf_counter()
        ahead = closed(step) if closed else None
        if ahead is None:
            idx = torch.as_tensor(batch_of_step(step))
            optimizer.zero_grad()
            computed = nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
            computed.backward()
            loss = computed.item()
            if straggler:
                straggler.after_compute(time.perf_counter() - t0, 0.0 if began is None else t0 - began)
        t1 = time.perf_counter()
        set_flat_grad(model, average(flat_grad(model)) if ahead is None else ahead)
        t2 = time.perf_counter()
        optimizer.step()
        began = time.perf_counter() if began is None else began
        record = {"step": step, "epoch": step // batches_per_epoch, "loss": loss,
                  "step_time_s": time.perf_counter() - t0, "comm_time_s": t2 - t1, "ended_at": time.monotonic()}
        if ahead is not None:
            record["skipped"] = True
        last = step == config.steps - 1
        if last or (config.eval_every and (step + 1) % config.eval_every == 0):
            record["test_loss"], record["test_accuracy"] = evaluate(model, data.x_test, data.y_test)
        if on_step:  # before the checkpoint: a kill in between leaves a record the resumed run redoes,
            on_step(record)  # never a checkpointed step that no record shows
        if checkpointer:
            checkpointer.save(step, model, optimizer, comm)
    return model


def train_worker(config: TrainConfig, data: Dataset, comm: AllReduce,
                 on_step: StepCallback | None = None, checkpointer: Checkpointer | None = None,
                 resume_step: int = -1, straggler: Straggler | None = None) -> nn.Module:
    """One worker of a data-parallel job: its shard, gradients averaged through `comm`.

    checkpointer/resume_step/straggler: see run_training.
    """
    sharder = Sharder(len(data.y_train), comm.world_size, config.batch_size, config.seed)

    def average(grad: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(comm.allreduce(grad.numpy())) / comm.world_size

    def closed(step: int) -> torch.Tensor | None:
        pulled = comm.closed_rounds(step, 1)
        return None if pulled is None else torch.from_numpy(pulled[0]) / comm.world_size

    def on_worker_step(record: dict) -> None:
        record["bytes_sent"] = comm.bytes_sent
        if on_step:
            on_step(record)

    return run_training(config, data, lambda step: sharder.batch(comm.rank, step), average,
                        sharder.batches_per_epoch, on_worker_step, checkpointer, resume_step, straggler, comm, closed)


def train_reference(config: TrainConfig, data: Dataset, world: int,
                    on_step: StepCallback | None = None) -> nn.Module:
    """A single process fed the global batches a `world`-worker job would use."""
    sharder = Sharder(len(data.y_train), world, config.batch_size, config.seed)
    return run_training(config, data, sharder.global_batch, lambda grad: grad, sharder.batches_per_epoch, on_step)
