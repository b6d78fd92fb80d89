"""Real models as DDP gradient workloads (`--workload model:NAME`).

What the network sees of a model is DDP's: its parameter tensors (hosts.models.arch: the real
shapes, built on the meta device, no weights), grouped into buckets the way DDP groups them
(hosts.models.ddp), each bucket's all-reduce started when the backward pass has produced its
gradients, with forward and backward times per layer from a profile file (hosts.models.profile).
hosts.models.workload is the worker that runs it; hosts.models.analytic predicts its iteration
time from the same plan at link rate.
"""
from __future__ import annotations

MODEL_NAMES = ("resnet50", "vgg16", "bert-base", "gpt2", "ncf", "lstm")  # hosts.models.arch.MODELS, without importing torch
