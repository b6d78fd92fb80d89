"""Fixed-point quantization: agreed scale never overflows, error stays within the stated bound."""
import math

import numpy as np
import pytest

from hosts import quantize as qz


def agree(tensors):
    """What the fabric computes: the summed votes, then the shared fractional bits."""
    votes = sum(qz.exponent_vote(qz.max_exponent(t)) for t in tensors)
    e_max, workers = qz.tally_votes(votes)
    assert workers == len(tensors)
    return qz.frac_bits(e_max, workers)


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 8, 17])
@pytest.mark.parametrize("magnitude", [1e-30, 1e-6, 1.0, 3.5, 1e4, 1e30])
def test_sum_fits_int32_and_error_within_bound(workers, magnitude):
    rng = np.random.default_rng(workers * 1000 + int(math.log10(magnitude) + 40))
    tensors = [(rng.standard_normal(4096) * magnitude).astype(np.float32) for _ in range(workers)]
    tensors[0][7] = np.float32(magnitude * 8)  # one outlier sets the scale
    f = agree(tensors)
    qs = [qz.quantize(t, f) for t in tensors]
    total = np.sum([q.astype(np.int64) for q in qs], axis=0)
    assert np.abs(total).max() <= 2**30  # the switch can never saturate
    exact = np.sum([t.astype(np.float64) for t in tensors], axis=0)
    got = qz.dequantize(total.astype(np.int32), f, np.float64)
    assert np.abs(got - exact).max() <= qz.error_bound(workers, f)
    # the bound is tight enough to matter: at most 4 W^2 2^-31 of the largest input value
    peak = max(float(np.abs(t).max()) for t in tensors)
    assert qz.error_bound(workers, f) <= 4 * workers**2 * 2.0**-31 * peak


def test_worst_case_values_at_the_edge_of_the_exponent():
    # every worker sends values just below 2**e_max with the same sign: the tightest case
    workers = 4
    x = np.full(100, np.nextafter(np.float32(4.0), np.float32(0)), dtype=np.float32)
    f = agree([x] * workers)
    q = qz.quantize(x, f)
    assert int(q.astype(np.int64).sum() // 100) * workers <= 2**31 - 1


def test_zero_tensor_and_bad_values():
    assert qz.max_exponent(np.zeros(10)) == qz.E_MIN
    assert qz.max_exponent(np.array([0.5])) == 0 and qz.max_exponent(np.array([-0.75])) == 0
    assert qz.max_exponent(np.array([1.0])) == 1
    with pytest.raises(qz.QuantizeError, match="NaN or infinity"):
        qz.max_exponent(np.array([1.0, np.nan]))
    with pytest.raises(qz.QuantizeError, match="NaN or infinity"):
        qz.quantize(np.array([np.inf]), 3)
    with pytest.raises(qz.QuantizeError, match="more than 30 bits"):
        qz.quantize(np.array([2.0**20]), 20)
    with pytest.raises(qz.QuantizeError, match="exponent vote"):
        qz.tally_votes(np.zeros(qz.E_BUCKETS, np.int32))


def test_rounding_is_to_nearest():
    q = qz.quantize(np.array([0.26, -0.26, 0.24]), 2)  # units of 0.25
    assert q.tolist() == [1, -1, 1]
    assert qz.dequantize(q, 2, np.float64).tolist() == [0.25, -0.25, 0.25]
