"""Float <-> int32 fixed point for in-network summation (docs/protocol.md, "Quantization").

Switches add int32 lanes, so float gradients travel as round(x * 2**f). Every worker must
use the same number of fractional bits f, and f must be small enough that the sum over
all W workers fits in int32. The workers agree on f per all-reduce call:

1. each worker computes e, the smallest exponent with max|x| < 2**e (clamped to
   [E_MIN, E_MAX]) and contributes a one-hot vote vector of E_BUCKETS int32;
2. the votes are summed through the fabric like any other int32 tensor; the highest
   non-zero bucket is the global e_max, and the total of all votes is W;
3. f = 30 - e_max - ceil(log2 W). Then every |q| <= 2**(30 - ceil(log2 W)) and any sum
   of W of them is at most 2**30 < 2**31 - 1: the switch can never overflow.

The all-reduce client (hosts.allreduce) saves the separate vote after a tensor size's first
call: it quantizes at the f the previous call agreed on and sends this call's votes in the
same stream, then repeats the call at the newly agreed f only when the votes show that a
value may not have fit (`fits` is false: it was clamped) or a switch flagged an overflow.

Error bound (per element, against the exact real sum of the inputs):
    |sum_i x_i - dequantize(sum_i q_i, f)| <= W * 2**-(f + 1)
because each rounding errs by at most half a unit of 2**-f and the switch adds exactly.
"""
from __future__ import annotations

import math

import numpy as np

E_MIN = -127
E_BUCKETS = 256
E_MAX = E_MIN + E_BUCKETS - 1
HEADROOM_BITS = 30  # |sum| <= 2**30 leaves one spare bit below int32's 2**31 - 1


class QuantizeError(ValueError):
    """Values that cannot be carried as fixed point (NaN/inf) or a vote that makes no sense."""

    exit_code = 1


def max_exponent(x: np.ndarray) -> int:
    """Smallest e in [E_MIN, E_MAX] with max|x| < 2**e; raises QuantizeError for NaN/inf."""
    x = np.asarray(x)
    if x.size == 0:
        return E_MIN
    peak = float(np.max(np.abs(x)))
    if not math.isfinite(peak):
        raise QuantizeError("tensor holds NaN or infinity; it cannot be quantized")
    if peak == 0.0:
        return E_MIN
    _, e = math.frexp(peak)  # peak = m * 2**e with 0.5 <= m < 1, so peak < 2**e
    return min(max(e, E_MIN), E_MAX)


def exponent_vote(e: int) -> np.ndarray:
    """This worker's one-hot vote for exponent e, to be summed over all workers."""
    if not E_MIN <= e <= E_MAX:
        raise QuantizeError(f"exponent {e} is outside [{E_MIN}, {E_MAX}]")
    vote = np.zeros(E_BUCKETS, dtype=np.int32)
    vote[e - E_MIN] = 1
    return vote


def tally_votes(votes: np.ndarray) -> tuple[int, int]:
    """(e_max, workers) from the summed vote vector."""
    votes = np.asarray(votes)
    if votes.shape != (E_BUCKETS,) or (votes < 0).any() or votes.sum() == 0:
        raise QuantizeError(f"exponent vote: expected {E_BUCKETS} non-negative counts with a positive total")
    e_max = E_MIN + int(np.flatnonzero(votes)[-1])
    return e_max, int(votes.sum())


def frac_bits(e_max: int, workers: int) -> int:
    """Fractional bits such that W values below 2**e_max sum without int32 overflow."""
    if workers < 1:
        raise QuantizeError(f"workers: {workers} must be at least 1")
    return HEADROOM_BITS - e_max - math.ceil(math.log2(workers))


def fits(e_max: int, f: int) -> bool:
    """Whether every value below 2**e_max quantizes at f fractional bits without clamping."""
    return e_max + f <= HEADROOM_BITS


def quantize(x: np.ndarray, f: int, saturate: bool = False) -> np.ndarray:
    """round(x * 2**f) as int32 (round half to even). A value beyond 2**HEADROOM_BITS raises,
    or with `saturate` is clamped to it (for callers that check `fits` afterwards)."""
    scaled = np.rint(np.asarray(x, dtype=np.float64) * math.ldexp(1.0, f))
    if not np.isfinite(scaled).all():
        raise QuantizeError("tensor holds NaN or infinity; it cannot be quantized")
    limit = float(1 << HEADROOM_BITS)
    if scaled.size and np.abs(scaled).max() > limit:
        if not saturate:
            raise QuantizeError(f"a value needs more than {HEADROOM_BITS} bits at {f} fractional bits")
        np.clip(scaled, -limit, limit, out=scaled)
    return scaled.astype(np.int32)


def dequantize(q: np.ndarray, f: int, dtype: np.dtype | type = np.float32) -> np.ndarray:
    """q * 2**-f, computed exactly in float64, returned as `dtype`."""
    return (np.asarray(q, dtype=np.float64) * math.ldexp(1.0, -f)).astype(dtype)


def error_bound(workers: int, f: int) -> float:
    """Max |exact sum - dequantized sum| per element for W workers at f fractional bits."""
    return workers * math.ldexp(1.0, -(f + 1))
