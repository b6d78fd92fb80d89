"""Per-step training state on disk, so workers resume from the last step they all completed.

A synchronous all-reduce completes step t on every worker or on none; but a failure can
strike while the last results of step t are still on their way, so one worker may hold
step t while another holds only t - 1. Each worker therefore keeps its last KEEP steps;
`common_step` is the newest step every worker has, and everyone restarts from there, so
no update is lost (everyone redoes the missing step) and none is doubled (nobody keeps a
step the others will redo).

A checkpoint holds the model, the optimizer and the all-reduce's own state (hosts.comm:
the in-network client's quantization bits carry over from step to step), so a resumed worker
computes bit for bit what an uninterrupted one would.

Files: DIR/WORKER.step-N.pt, written to a temporary name and renamed (a crash mid-write
leaves the previous checkpoint intact).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

KEEP = 2  # steps kept per worker: enough when workers can be at most one step apart
_NAME = re.compile(r"^(?P<worker>.+)\.step-(?P<step>\d+)\.pt$")


class CheckpointError(RuntimeError):
    """No usable checkpoint (missing folder, step or worker); one line, exit 2."""

    exit_code = 2


class Stateful(Protocol):
    """What keeps state beside the model, saved and restored with it (an AllReduce)."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class Checkpointer:
    """One worker's checkpoints under `folder`."""

    def __init__(self, folder: str | Path, worker: str, keep: int = KEEP):
        self.folder = Path(folder)
        self.worker = worker
        self.keep = keep
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, step: int) -> Path:
        return self.folder / f"{self.worker}.step-{step}.pt"

    def save(self, step: int, model: nn.Module, optimizer: torch.optim.Optimizer, comm: Stateful | None = None) -> None:
        """Write the state after `step` completed; drop checkpoints older than the newest `keep`."""
        tmp = self.folder / f".{self.worker}.step-{step}.tmp"
        torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "comm": comm.state_dict() if comm is not None else {}}, tmp)
        os.replace(tmp, self.path(step))
        for old in self.steps()[:-self.keep]:
            self.path(old).unlink(missing_ok=True)

    def steps(self) -> list[int]:
        """Steps this worker has checkpoints of, oldest first."""
        return sorted(steps_on_disk(self.folder).get(self.worker, []))

    def load(self, step: int, model: nn.Module, optimizer: torch.optim.Optimizer, comm: Stateful | None = None) -> None:
        """Restore the state after `step` into model, optimizer and comm."""
        path = self.path(step)
        if not path.exists():
            raise CheckpointError(f"{self.folder}: worker {self.worker} has no checkpoint of step {step} "
                                  f"(has {self.steps() or 'none'})")
        state = torch.load(path, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if comm is not None:
            comm.load_state_dict(state.get("comm", {}))


def steps_on_disk(folder: str | Path) -> dict[str, list[int]]:
    """worker -> the steps it has checkpoints of, read from the file names."""
    found: dict[str, list[int]] = {}
    for entry in Path(folder).iterdir() if Path(folder).is_dir() else ():
        m = _NAME.match(entry.name)
        if m:
            found.setdefault(m["worker"], []).append(int(m["step"]))
    return found


def common_step(folder: str | Path, workers: list[str]) -> int:
    """The newest step every worker has a checkpoint of; -1 when some worker has none (start over)."""
    on_disk = steps_on_disk(folder)
    have = [set(on_disk.get(w, [])) for w in workers]
    shared = set.intersection(*have) if have else set()
    if shared:
        return max(shared)
    if have and all(have):
        raise CheckpointError(f"{folder}: workers share no checkpointed step "
                              f"({', '.join(f'{w}: {sorted(s)}' for w, s in zip(workers, have))})")
    return -1
