"""Models the workers train: a small MLP (default) and a small CNN for square image inputs.

Both are tiny on purpose: the testbed measures communication, and the machine running
several emulated workers has few cores. Gradients travel as one flat float32 vector, so
this module also flattens gradients and writes an all-reduced vector back.
"""
from __future__ import annotations

import math
import threading

import torch
from torch import nn

from .agent_config import MODEL_NAMES

_INIT_LOCK = threading.Lock()  # weights come from torch's global RNG; threads must not interleave


class ModelError(ValueError):
    """A model that cannot be built for the requested data shape."""

    exit_code = 2


def build_model(name: str, features: int, classes: int, seed: int, hidden: int = 64) -> nn.Module:
    """The named model with weights drawn from `seed`, so every worker starts identical."""
    with _INIT_LOCK:
        torch.manual_seed(seed)
        return _build(name, features, classes, hidden)


def _build(name: str, features: int, classes: int, hidden: int) -> nn.Module:
    if name == "mlp":
        return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))
    if name == "cnn":
        side = math.isqrt(features)
        if side * side != features or side < 4:
            raise ModelError(f"model 'cnn': needs square images, {features} features is not a square of side >= 4")
        pooled = (side // 2) * (side // 2)
        return nn.Sequential(nn.Unflatten(1, (1, side, side)),
                             nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(8 * pooled, hidden), nn.ReLU(), nn.Linear(hidden, classes))
    raise ModelError(f"model {name!r}: unknown (choose one of {', '.join(MODEL_NAMES)})")


def flat_grad(model: nn.Module) -> torch.Tensor:
    """All parameter gradients as one float32 vector, in parameter order (zeros where unset)."""
    parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in model.parameters()]
    return torch.cat(parts).to(torch.float32)


def set_flat_grad(model: nn.Module, flat: torch.Tensor) -> None:
    """Write a vector laid out like flat_grad() back into the parameters' .grad."""
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    if flat.numel() != total:
        raise ModelError(f"gradient vector has {flat.numel()} values, the model has {total} parameters")
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].reshape(p.shape).to(p.dtype).clone()
        offset += n


def flat_params(model: nn.Module) -> torch.Tensor:
    """All parameters as one vector (for comparing replicas)."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])
