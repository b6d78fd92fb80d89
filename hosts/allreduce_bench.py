"""The all-reduce benchmark a worker host runs: one seeded vector per worker, summed, checked.

    python -m hosts bench --config job.json --worker h1 --elements 1000000 --seed 0 --out DIR

Every worker can rebuild every other worker's vector from the seed (`vector(seed, rank, ...)`),
so each one checks the sum it received against numpy on its own. Writes DIR/h1.log and
DIR/h1.bench.json; exit 0 when the sum is right, 1 when it is wrong or the all-reduce failed
(one line on stderr naming what), 2 on a bad config.

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
run's fidelity monitor (testbed.fidelity).
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
log = logging.getLogger("aggnet.bench")


class WrongSum(RuntimeError):
    """The all-reduce returned a sum that is not the numpy sum (or not within the bound)."""

    exit_code = 1


def value_limit(scheme: str, workers: int) -> int:
    """Largest |value| per worker so that the sum of `workers` values is exact on `scheme`."""
    total = (1 << 31) - 1 if scheme == "innet" else FLOAT32_EXACT
    return total // workers


def vector(seed: int, rank: int, elements: int, dtype: str, limit: int) -> np.ndarray:
    """Rank's input: int32 uniform in [-limit, limit], or float32 standard normal."""
    rng = np.random.default_rng((seed, rank))
    if dtype == "int32":
        return rng.integers(-limit, limit, size=elements, endpoint=True, dtype=np.int32)
    return rng.standard_normal(elements).astype(np.float32)


def check(scheme: str, dtype: str, inputs: list[np.ndarray], result: np.ndarray) -> dict:
    """Compare `result` with the sum of `inputs`: {"correct", "exact", "max_abs_error", "bound"}."""
    if dtype == "int32":
        expected = np.zeros(result.shape, dtype=np.int64)  # summed in place: 16 workers' int64 copies
        for x in inputs:                                   # of 1M elements each took 128 MB a process
            expected += x
        error = float(np.max(np.abs(result.astype(np.int64) - expected), initial=0))
        bound = 0.0
    elif scheme == "innet":
        e_max = max(quantize.max_exponent(x) for x in inputs)
        expected = np.sum(np.stack(inputs).astype(np.float64), axis=0)
        error = float(np.max(np.abs(result.astype(np.float64) - expected), initial=0.0))
        ulp_half = float(np.max(np.abs(expected), initial=0.0)) * 2.0 ** -24
        bound = quantize.error_bound(len(inputs), quantize.frac_bits(e_max, len(inputs))) + ulp_half
    elif scheme == "ps":
        expected = inputs[0].astype(np.float32)
        for x in inputs[1:]:
            expected = expected + x  # the server's order and precision
        error = float(np.max(np.abs(result.astype(np.float64) - expected), initial=0.0))
        bound = 0.0
    else:  # ring: each chunk is summed in float32 starting at another rank
        stacked = np.stack(inputs).astype(np.float64)
        expected = np.sum(stacked, axis=0)
        error = float(np.max(np.abs(result.astype(np.float64) - expected), initial=0.0))
        bound = (len(inputs) - 1) * float(np.max(np.sum(np.abs(stacked), axis=0), initial=0.0)) * 2.0 ** -24
    return {"correct": error <= bound, "exact": error == 0.0, "max_abs_error": error, "bound": bound}


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
    limit = value_limit(config.scheme, world)
    inputs = [vector(seed, r, elements, dtype, limit) for r in range(world)]
    mine = inputs[rank]
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
    verdict = check(config.scheme, dtype, inputs, result)
    report = {"worker": worker, "rank": rank, "workers": world, "scheme": config.scheme, "dtype": dtype,
              "elements": elements, "seed": seed, "seconds": seconds, "window": [t0, t1],
              "goodput_elements_per_s": elements / seconds if seconds > 0 else None, **verdict, **stats}
    (out_dir / f"{worker}.bench.json").write_text(json.dumps(report, indent=2) + "\n")
    if not verdict["correct"]:
        raise WrongSum(f"sum differs from numpy's by up to {verdict['max_abs_error']:g} "
                       f"(allowed {verdict['bound']:g})")
    log.info("result correct: max abs error %g (bound %g)", verdict["max_abs_error"], verdict["bound"])
    return report
