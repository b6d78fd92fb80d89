"""DDP's view of a model: layers, buckets and when each bucket's gradients are ready.

Buckets follow DistributedDataParallel in its steady state (after the first iteration it rebuilds
them in the order gradients arrive, which for these models is the reverse of the parameter order):
parameters taken last to first, a bucket closes once it holds at least its cap, the cap being
`bucket_mb` MiB (DDP's default 25) and, only when the default is used, 1 MiB for the first bucket
(so the all-reduce of the last layers' gradients starts early).

Timing comes from a profile (hosts.models.profile): the forward pass, then the backward pass
running the layers last to first; a layer's gradients are ready when its backward time has
passed, and a bucket's all-reduce may start once all its layers are done.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from .arch import layers
from .profile import Profile

MIB = 1 << 20
DEFAULT_BUCKET_MB = 25.0  # DDP's bucket_cap_mb
FIRST_BUCKET_BYTES = MIB  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
GRAD_BYTES = 4  # float32 gradients


def assign_buckets(sizes: list[int], bucket_mb: float | None = None) -> list[list[int]]:
    """Parameter indices per bucket, in all-reduce order, for parameters of `sizes` bytes."""
    cap = int((bucket_mb or DEFAULT_BUCKET_MB) * MIB)
    caps = [min(FIRST_BUCKET_BYTES, cap) if bucket_mb is None else cap, cap]
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i in reversed(range(len(sizes))):
        current.append(i)
        filled += sizes[i]
        if filled >= caps[min(len(buckets), 1)]:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


@dataclass(frozen=True)
class Bucket:
    """One all-reduce of an iteration: how many gradient values, and when they are ready
    (seconds after the backward pass started, unscaled)."""

    elements: int
    ready_s: float

    @property
    def nbytes(self) -> int:
        return self.elements * GRAD_BYTES


@dataclass(frozen=True)
class Plan:
    """One DDP iteration of a model: forward time, backward time, buckets in all-reduce order."""

    model: str
    forward_s: float
    backward_s: float
    buckets: tuple[Bucket, ...]

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s

    @property
    def elements(self) -> int:
        return sum(b.elements for b in self.buckets)


def plan(name: str, model: nn.Module, profile: Profile, bucket_mb: float | None = None) -> Plan:
    """The iteration of `model` under `profile` (whose layers must be the model's)."""
    owned = layers(model)
    profile.check_layers(list(owned))
    ready: dict[int, float] = {}
    elapsed = 0.0
    for layer in reversed(list(owned)):  # backward runs the layers last to first
        elapsed += profile.layers[layer].backward_s
        ready.update((i, elapsed) for i in owned[layer])
    counts = [p.numel() for p in model.parameters()]
    buckets = tuple(Bucket(sum(counts[i] for i in b), max(ready[i] for i in b))
                    for b in assign_buckets([c * GRAD_BYTES for c in counts], bucket_mb))
    return Plan(name, profile.forward_s, elapsed, buckets)
