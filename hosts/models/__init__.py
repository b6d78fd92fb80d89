"""Real models as DDP gradient workloads (`--workload model:NAME`).

What the network sees of a model is DDP's: its parameter tensors (hosts.models.arch: the real
shapes, built on the meta device, no weights), grouped into buckets the way DDP groups them
(hosts.models.ddp), each bucket's all-reduce started when the backward pass has produced its
gradients, with forward and backward times per layer from a profile file (hosts.models.profile).
hosts.models.workload is the worker that runs it; hosts.models.analytic predicts its iteration
time from the same plan at link rate.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from . import arch


@dataclass(frozen=True)
class ModelSpec:
    """A workload model: how to build it and a batch of input for timing it (`aggnet profile`)."""

    build: Callable[[], nn.Module]
    example: Callable[[int], torch.Tensor]
    input_text: str  # what one sample is, for the profile file


def _images(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 224, 224)


def _tokens(vocab: int) -> Callable[[int], torch.Tensor]:
    return lambda batch: torch.randint(0, vocab, (batch, 128))


MODELS: dict[str, ModelSpec] = {
    "resnet50": ModelSpec(arch.ResNet50, _images, "a 3x224x224 image"),
    "vgg16": ModelSpec(arch.VGG16, _images, "a 3x224x224 image"),
    "bert-base": ModelSpec(arch.BertBase, _tokens(30522), "a sequence of 128 tokens"),
    "gpt2": ModelSpec(arch.GPT2Small, _tokens(50257), "a sequence of 128 tokens"),
}


class UnknownModel(ValueError):
    exit_code = 2


def spec(name: str) -> ModelSpec:
    """The model called `name`; UnknownModel naming the choices otherwise."""
    if name not in MODELS:
        raise UnknownModel(f"model {name!r} is not one of {', '.join(MODELS)}")
    return MODELS[name]


def build(name: str, device: str = "meta") -> nn.Module:
    """Model `name` with its real parameter shapes; on the meta device no memory is allocated."""
    with torch.device(device):
        return spec(name).build()
