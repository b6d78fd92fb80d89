"""Datasets that ship offline, and deterministic sharding of them across workers.

- "digits": scikit-learn's 8x8 handwritten digits (bundled with the package, no download).
- "synthetic": a larger generated 10-class task on 16x16 inputs, for benchmarks.

Sharding: a seeded permutation of the training set is cut into `world` equal shards (the
remainder is dropped so every worker's local batch has the same size, which makes the
average of the workers' mean gradients equal to the mean gradient of the global batch).
Each worker reshuffles its shard every epoch with a seed derived from (seed, epoch, rank);
the global batch of a step is the concatenation of all ranks' local batches, in rank order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .agent_config import DATASET_NAMES

TEST_FRACTION = 0.2
SYNTHETIC_SAMPLES = 10000
SYNTHETIC_FEATURES = 256


class DataError(ValueError):
    """A dataset or sharding request that cannot be satisfied."""

    exit_code = 2


@dataclass(frozen=True)
class Dataset:
    """Train and test splits as tensors (float32 features, int64 labels)."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: int

    @property
    def features(self) -> int:
        return self.x_train.shape[1]


def load_dataset(name: str, seed: int) -> Dataset:
    """The named dataset, split into train/test by a permutation drawn from `seed`."""
    if name == "digits":
        from sklearn.datasets import load_digits
        bunch = load_digits()
        x, y = bunch.data / 16.0, bunch.target
    elif name == "synthetic":
        from sklearn.datasets import make_classification
        x, y = make_classification(n_samples=SYNTHETIC_SAMPLES, n_features=SYNTHETIC_FEATURES, n_informative=24,
                                   n_redundant=8, n_classes=10, n_clusters_per_class=1, class_sep=1.0,
                                   random_state=seed)
    else:
        raise DataError(f"dataset {name!r}: unknown (choose one of {', '.join(DATASET_NAMES)})")
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(len(y) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    xt = torch.as_tensor(x, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.int64)
    return Dataset(name, xt[train], yt[train], xt[test], yt[test], int(y.max()) + 1)


class Sharder:
    """Which training samples each rank uses at each step (pure function of the seed)."""

    def __init__(self, samples: int, world: int, batch_size: int, seed: int):
        if world < 1 or batch_size < 1:
            raise DataError(f"sharding: world {world} and batch_size {batch_size} must be positive")
        per_rank = samples // world
        if per_rank < batch_size:
            raise DataError(f"sharding: {samples} samples over {world} workers leaves {per_rank} per worker, "
                            f"fewer than batch_size {batch_size}")
        self.world = world
        self.batch_size = batch_size
        self.seed = seed
        order = np.random.default_rng(seed).permutation(samples)
        self.shards = [order[r * per_rank:(r + 1) * per_rank] for r in range(world)]
        self.batches_per_epoch = per_rank // batch_size

    def batch(self, rank: int, step: int) -> np.ndarray:
        """Indices of rank's local batch at `step`."""
        epoch, k = divmod(step, self.batches_per_epoch)
        shard = self.shards[rank]
        order = np.random.default_rng((self.seed, epoch, rank)).permutation(len(shard))
        return shard[order[k * self.batch_size:(k + 1) * self.batch_size]]

    def global_batch(self, step: int) -> np.ndarray:
        """The whole step's batch: every rank's local batch, in rank order."""
        return np.concatenate([self.batch(r, step) for r in range(self.world)])
