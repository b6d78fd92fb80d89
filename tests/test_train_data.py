"""Datasets, deterministic sharding, models and gradient flattening."""
import numpy as np
import pytest
import torch

from hosts.data import DataError, Sharder, load_dataset
from hosts.model import ModelError, build_model, flat_grad, flat_params, set_flat_grad


def test_digits_split_is_seeded_and_offline():
    a, b, c = load_dataset("digits", 0), load_dataset("digits", 0), load_dataset("digits", 1)
    assert (len(a.y_train), len(a.y_test), a.features, a.classes) == (1438, 359, 64, 10)
    assert torch.equal(a.x_train, b.x_train) and not torch.equal(a.y_train, c.y_train)
    assert a.x_train.min() >= 0 and a.x_train.max() <= 1 and a.y_train.dtype == torch.int64


def test_synthetic_task_is_larger_and_seeded():
    a, b = load_dataset("synthetic", 2), load_dataset("synthetic", 2)
    assert (len(a.y_train), len(a.y_test), a.features, a.classes) == (8000, 2000, 256, 10)
    assert torch.equal(a.x_test, b.x_test)


def test_unknown_dataset():
    with pytest.raises(DataError, match=r"dataset 'mnist': unknown \(choose one of digits, synthetic\)"):
        load_dataset("mnist", 0)


def test_shards_are_disjoint_equal_and_global_batch_is_their_concatenation():
    s = Sharder(103, 4, 5, seed=9)
    assert [len(x) for x in s.shards] == [25] * 4 and s.batches_per_epoch == 5
    assert len(set(np.concatenate(s.shards))) == 100
    for step in (0, 4, 5, 17):
        batches = [s.batch(r, step) for r in range(4)]
        for r, b in enumerate(batches):
            assert len(b) == 5 and set(b) <= set(s.shards[r])
        np.testing.assert_array_equal(s.global_batch(step), np.concatenate(batches))
    epoch0 = np.concatenate([s.batch(1, k) for k in range(5)])
    epoch1 = np.concatenate([s.batch(1, k) for k in range(5, 10)])
    assert sorted(epoch0) == sorted(epoch1) == sorted(s.shards[1]) and not np.array_equal(epoch0, epoch1)
    np.testing.assert_array_equal(Sharder(103, 4, 5, seed=9).batch(3, 7), s.batch(3, 7))


def test_sharding_that_cannot_fill_a_batch():
    with pytest.raises(DataError, match="10 samples over 4 workers leaves 2 per worker, fewer than batch_size 3"):
        Sharder(10, 4, 3, seed=0)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_models_are_seeded_and_gradients_round_trip(name):
    a, b = build_model(name, 64, 10, seed=4), build_model(name, 64, 10, seed=4)
    assert torch.equal(flat_params(a), flat_params(b))
    assert not torch.equal(flat_params(a), flat_params(build_model(name, 64, 10, seed=5)))
    x = torch.rand(6, 64)
    assert a(x).shape == (6, 10)
    torch.nn.functional.cross_entropy(a(x), torch.arange(6)).backward()
    g = flat_grad(a)
    assert g.shape == flat_params(a).shape and g.abs().sum() > 0
    set_flat_grad(b, g * 2)
    torch.testing.assert_close(flat_grad(b), g * 2)


def test_model_errors():
    with pytest.raises(ModelError, match="model 'cnn': needs square images, 60 features"):
        build_model("cnn", 60, 10, seed=0)
    with pytest.raises(ModelError, match="model 'vit': unknown"):
        build_model("vit", 64, 10, seed=0)
    model = build_model("mlp", 4, 2, seed=0, hidden=3)  # 4*3+3+3*2+2 = 23 parameters
    with pytest.raises(ModelError, match="gradient vector has 22 values, the model has 23 parameters"):
        set_flat_grad(model, torch.zeros(22))
