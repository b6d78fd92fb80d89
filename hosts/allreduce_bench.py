"""The all-reduce benchmark a worker host runs: one seeded vector per worker, summed, checked.

    python -m hosts bench --config job.json --worker h1 --elements 1000000 --seed 0 --out DIR

Every worker can rebuild every other worker's vector from the seed (`Vectors`), so each one checks
the sum it received against numpy on its own. Rank r's vector is b + a*r elementwise, a and b drawn
once from the seed: every rank's differs at every element (a missing, doubled or misplaced
contribution shows as a wrong sum wherever a != 0), and the int32 sum has a closed form, W*b +
a*W(W-1)/2, so checking costs one pass over the tensor whatever W. (With W independent random
vectors each worker drew all W of them: 64 workers of 1M elements held 256 MB each and spent
10 s of CPU between them.) Writes DIR/h1.log and DIR/h1.bench.json; exit 0 when the sum is right,
1 when it is wrong or the all-reduce failed (one line on stderr naming what), 2 on a bad config.

What "right" means:
- innet, int32: values in +-(2^31-1)/W so the exact sum fits; the result must equal numpy's.
- ps, int32: the server sums float32, so values stay within +-2^24/W where float32 is exact;
  the result must equal numpy's.
- innet, float32: within the quantization bound of docs/protocol.md, W * 2^-(f+1) with the f
  the workers agree on, plus float32's rounding of the output (half an ulp).
- ps, float32: the server adds in rank order in float32; the result must equal that sum bit
  for bit.
- ring, int32: as ps (float32 sums of values within +-2^24/W are exact).
- ring, float32: each chunk is summed in float32 from a different rank onwards, so W-1 roundings
  of at most half an ulp of a partial sum: within (W-1) * sum|x| * 2^-24.

Timing starts after a one-chunk warm-up all-reduce, which every worker leaves only once all of
them have started, so `seconds` measures the streaming, not process start-up skew; `window` is
that streaming's [start, end] on time.monotonic(), the clock every process here shares, for the
run's fidelity monitor (testbed.fidelity); `max_rss_mb` the worker's peak resident memory, checking
included.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from . import quantize
from .agent_config import AgentConfig
from .ps import ParameterServerClient
from .ring import RingAllReduce

DTYPES = ("int32", "float32")
FLOAT32_EXACT = 1 << 24  # float32 holds every integer up to this exactly
CHECK_BLOCK = 1 << 16  # elements compared at a time
log = logging.getLogger("aggnet.bench")


class WrongSum(RuntimeError):
    """The all-reduce returned a sum that is not the numpy sum (or not within the bound)."""

    exit_code = 1


def value_limit(scheme: str, workers: int) -> int:
    """Largest |value| per worker so that the sum of `workers` values is exact on `scheme`."""
    total = (1 << 31) - 1 if scheme == "innet" else FLOAT32_EXACT
    return total // workers


class Vectors:
    """Every rank's input, rank r's b + a*r (see the module docstring): int32 within [-limit, limit], or
    float32 around a standard normal b."""

    def __init__(self, seed: int, elements: int, dtype: str, limit: int, world: int):
        rng = np.random.default_rng(seed)
        self.world = world
        if dtype == "int32":
            half = limit // 2
            step = (limit - half) // max(1, world - 1)  # |b + a*r| <= half + step*(W-1) <= limit
            self.b = rng.integers(-half, half, size=elements, endpoint=True, dtype=np.int32)
            self.a = rng.integers(-step, step, size=elements, endpoint=True, dtype=np.int32)
        else:
            self.b = rng.standard_normal(elements).astype(np.float32)
            self.a = (rng.standard_normal(elements) / max(1, world)).astype(np.float32)

    def of(self, rank: int) -> np.ndarray:
        """Rank `rank`'s vector (int32 arithmetic cannot overflow: |a*r| and |b + a*r| stay within the limit)."""
        out = self.a * self.a.dtype.type(rank)
        out += self.b
        return out

    def int_error(self, result: np.ndarray) -> int:
        """The largest |result - exact sum over all ranks| of int32 vectors, the sum in its closed form,
        a block at a time in int64 (no temporaries the size of the tensor)."""
        w, worst = self.world, 0
        for lo in range(0, result.size, CHECK_BLOCK):
            hi = lo + CHECK_BLOCK
            expected = self.b[lo:hi].astype(np.int64) * w + self.a[lo:hi].astype(np.int64) * (w * (w - 1) // 2)
            worst = max(worst, int(np.max(np.abs(result[lo:hi] - expected), initial=0)))
        return worst


def check(scheme: str, dtype: str, vectors: Vectors, result: np.ndarray) -> dict:
    """Compare `result` with the sum of every rank's vector: {"correct", "exact", "max_abs_error", "bound"}.
    Holds one vector at a time besides the sums."""
    ranks = range(vectors.world)
    if dtype == "int32":
        error, bound = float(vectors.int_error(result)), 0.0
    elif scheme == "ps":
        expected = vectors.of(0)
        for r in ranks[1:]:
            expected = expected + vectors.of(r)  # the server's order and precision
        error = float(np.max(np.abs(result.astype(np.float64) - expected), initial=0.0))
        bound = 0.0
    else:
        expected = np.zeros(result.shape, dtype=np.float64)
        magnitude = np.zeros(result.shape, dtype=np.float64)
        e_max = quantize.E_MIN
        for r in ranks:
            x = vectors.of(r)
            expected += x
            magnitude += np.abs(x)
            e_max = max(e_max, quantize.max_exponent(x))
        error = float(np.max(np.abs(result.astype(np.float64) - expected), initial=0.0))
        if scheme == "innet":
            ulp_half = float(np.max(np.abs(expected), initial=0.0)) * 2.0 ** -24
            bound = quantize.error_bound(vectors.world, quantize.frac_bits(e_max, vectors.world)) + ulp_half
        else:  # ring: each chunk is summed in float32 starting at another rank
            bound = (vectors.world - 1) * float(np.max(magnitude, initial=0.0)) * 2.0 ** -24
    return {"correct": error <= bound, "exact": error == 0.0, "max_abs_error": error, "bound": bound}


def peak_rss_mb() -> float:
    """This program's peak resident memory (VmHWM: since its exec; getrusage's ru_maxrss also counts the
    process it was forked from, here the 100 MB `aggnet run`)."""
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return round(kb / 1024, 1)


def _host_client(config: AgentConfig, worker: str, rank: int) -> ParameterServerClient | RingAllReduce:
    """The float32 all-reduce of a host scheme: the parameter server's client or a ring rank."""
    if config.scheme == "ps":
        assert config.ps is not None, "the config loader requires a server for scheme ps"
        return ParameterServerClient(config.ps, worker, rank, len(config.workers), config.timeout_s)
    return RingAllReduce(list(config.workers), rank, config.timeout_s)


def run_bench(config: AgentConfig, worker: str, elements: int, seed: int, dtype: str, out_dir: Path,
              source: str = "<agent config>") -> dict:
    """All-reduce this worker's vector once (after a warm-up), check it, write NAME.bench.json;
    WrongSum (after writing it) when the sum is wrong."""
    rank = config.rank_of(worker, source)
    world = len(config.workers)
    vectors = Vectors(seed, elements, dtype, value_limit(config.scheme, world), world)
    mine = vectors.of(rank)
    log.info("worker %s rank %d of %d, scheme %s, %d %s elements, seed %d", worker, rank, world, config.scheme,
             elements, dtype, seed)
    if config.scheme == "innet":
        from .allreduce import AllReduceClient

        assert config.job is not None, "the config loader requires a job for scheme innet"
        with AllReduceClient(config.job, rank, stall_timeout_s=config.timeout_s) as client:
            client.allreduce_int(np.zeros(config.job.lanes, dtype=np.int32))
            t0 = time.monotonic()
            result = client.allreduce(mine)
            t1 = time.monotonic()
            stats = {"packets_sent": client.stats.packets_sent, "retransmissions": client.stats.retransmissions,
                     "fast_retransmits": client.stats.fast_retransmits, "marked_results": client.stats.marked_results,
                     "smallest_window": client.window.smallest,
                     **({"spilled_chunks": client.stats.spilled} if config.job.pool else {})}
    elif config.scheme in ("ps", "ring"):
        with _host_client(config, worker, rank) as client:
            client.allreduce(np.zeros(world, dtype=np.float32))  # returns once every worker is there
            t0 = time.monotonic()
            result = client.allreduce(mine.astype(np.float32))
            t1 = time.monotonic()
            stats = {"bytes_sent": client.bytes_sent}
    else:
        raise WrongSum(f"{source}: the benchmark runs schemes innet, ps and ring, not {config.scheme}")
    seconds = t1 - t0
    log.info("all-reduce took %.3f s", seconds)
    verdict = check(config.scheme, dtype, vectors, result)
    report = {"worker": worker, "rank": rank, "workers": world, "scheme": config.scheme, "dtype": dtype,
              "elements": elements, "seed": seed, "seconds": seconds, "window": [t0, t1],
              "max_rss_mb": peak_rss_mb(),
              "goodput_elements_per_s": elements / seconds if seconds > 0 else None, **verdict, **stats}
    (out_dir / f"{worker}.bench.json").write_text(json.dumps(report, indent=2) + "\n")
    if not verdict["correct"]:
        raise WrongSum(f"sum differs from numpy's by up to {verdict['max_abs_error']:g} "
                       f"(allowed {verdict['bound']:g})")
    log.info("result correct: max abs error %g (bound %g)", verdict["max_abs_error"], verdict["bound"])
    return report
