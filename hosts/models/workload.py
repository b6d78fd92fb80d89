"""The DDP worker of a model workload: `python -m hosts model --config JOB.json --worker h1 --model resnet50 ...`.

Each iteration plays DDP's timeline against the real network: the forward pass (a sleep of the
profile's forward time), then the backward pass, during which every bucket's all-reduce is issued
when the profile says its gradients are ready, one after the other through the run's scheme
(hosts.agent.make_allreduce); the iteration ends when the backward pass and the last all-reduce
are both done. Compute is slept, not run, so the two cores stay free for the network and the
switches; what a worker measures is the communication DDP could not hide.

A bucket carries `grad_scale` of its gradients (at least one value): on a slow emulated network
hundreds of MB a step would take minutes, and the links then emulate link rate / grad_scale
(hosts.models.analytic). Every rank sends rank + 1 in every lane of every all-reduce (barriers
too), so every sum must be W (W + 1) / 2, which quantization keeps exact: `correct` checks it.
Under bounded staleness (hostagg, split with S > 0: hosts.host_agg) a round holds the gradients
its aggregator chose, so `correct` checks only that each sum is one value in every lane; `sums`
(one a round) are checked afterwards against the aggregator's record of what each round holds
(exact_sums). A laggard there skips an iteration whose rounds all closed without it: it pulls
them, computes nothing, and so computes its next iteration on the newest weights (as hosts.train
skips steps; the record says `skipped`). Times are divided by
`time_scale` (the emulated cluster's time; compute sleeps are multiplied by it). `batch` runs the
profile at another batch (its times scaled alike). A straggler entry of the agent config for this
worker (hosts.straggler) stretches an iteration's compute: forward and backward pass, and so when
each bucket is ready, by its factor at the iteration's start, its delay added to the forward pass.

Writes DIR/NAME.model.json: per-iteration times and their medians, the buckets, the analytic
model's iteration beside the measured one; `window` is the timed iterations and `comm_intervals`
the times any of this worker's all-reduces was in flight, the untimed warm-up pass first ([start,
end] pairs, one for all-reduces that followed each other without a pause), both on time.monotonic()
in this machine's time (the fidelity monitor measures links and processes over them:
testbed.fidelity).
"""
from __future__ import annotations

import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..agent import make_allreduce
from ..agent_config import AgentConfig
from . import analytic, ddp, profile
from .arch import build

log = logging.getLogger("aggnet.model")


class WrongModelSum(RuntimeError):
    exit_code = 1


def _sleep_until(t: float) -> None:
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def lead_rounds(buckets: int) -> int:
    """The all-reduces run_model makes before its iterations: two barriers and the warm-up pass's buckets."""
    return 2 + buckets


def round_plan(model: str, profile_name: str, bucket_mb: float | None, iterations: int,
               batch: int | None = None) -> tuple[int, int, int]:
    """(rounds, lead, buckets): the all-reduces run_model makes, the rounds a host aggregator serves a
    model job (hostagg, split): `lead` of their own (two barriers, the warm-up pass), then `buckets`
    an iteration."""
    prof = profile.load(model, profile_name)
    buckets = len(ddp.plan(model, build(model), prof if batch is None else prof.at_batch(batch), bucket_mb).buckets)
    return lead_rounds(buckets) + buckets * iterations, lead_rounds(buckets), buckets


def exact_sums(world: int, senders: list[int], included: list[list[list[int]]]) -> list[float]:
    """Every round's sum, each rank sending rank + 1: the ranks not in `senders` in every round (the
    switches' on-time workers in split aggregation), and the gradients the aggregator's record says the
    round holds (`included`: [seat, step] pairs, a seat indexing `senders`, the ranks it serves)."""
    on_time = sum(r + 1 for r in range(world) if r not in senders)
    return [float(on_time + sum(senders[seat] + 1 for seat, _ in held)) for held in included]


def run_model(config: AgentConfig, worker: str, model: str, profile_name: str, bucket_mb: float | None,
              iterations: int, grad_scale: float, link_mbps: float | None, time_scale: float, out_dir: Path,
              source: str = "<agent config>", batch: int | None = None) -> dict:
    """Run `iterations` DDP iterations of `model` as `worker`; write and return NAME.model.json's content."""
    rank = config.rank_of(worker, source)
    world = len(config.workers)
    prof = profile.load(model, profile_name)
    if batch is not None:
        prof = prof.at_batch(batch)
    straggler = config.stragglers.get(worker)
    plan = ddp.plan(model, build(model), prof, bucket_mb)
    vectors = [np.full(max(1, round(b.elements * grad_scale)), rank + 1, dtype=np.float32) for b in plan.buckets]
    barrier = np.full(world, rank + 1, dtype=np.float32)  # a small all-reduce: all return at about the same moment
    expected = world * (world + 1) / 2
    stale = config.staleness > 0 and config.scheme in ("hostagg", "split")  # a round's sum: its aggregator's choice
    lead = lead_rounds(len(vectors))
    log.info("worker %s rank %d of %d, %s (%s profile), %d buckets of %d values in all, grad scale %g", worker, rank,
             world, model, prof.device, len(vectors), sum(len(v) for v in vectors), grad_scale)
    records: list[dict[str, Any]] = []
    in_flight: list[list[float]] = []  # [start, end] of the all-reduces, merged where one waited for another
    sums: list[float | None] = []  # every round's, one value in every lane (else None)

    def check(out: np.ndarray) -> bool:
        value = float(out.flat[0]) if out.size and np.all(out == out.flat[0]) else None
        sums.append(value)
        return value is not None and (stale or value == expected)

    correct = True
    with make_allreduce(config, rank) as comm:
        correct = check(comm.allreduce(barrier))
        # The warm-up pass, as DDP benchmarks discard their first iterations: every bucket once, back
        # to back, so the timed iterations find each size's buffers and quantization bits in place.
        s = time.monotonic()
        for vec in vectors:
            correct = check(comm.allreduce(vec)) and correct
        in_flight.append([s, time.monotonic()])
        # Again: a large all-reduce ends up to a step apart on different ranks (90 ms apart after
        # GPT-2's warm-up on the ring), and where DDP hides communication nothing evens that out later:
        # every bucket's all-reduce would start that much apart and wait for the latest rank.
        correct = check(comm.allreduce(barrier)) and correct
        began: float | None = None  # a straggler's window counts from the end of the first iteration (hosts.train)
        for it in range(iterations):
            t0 = time.monotonic()
            pulled = comm.closed_rounds(lead + it * len(vectors), len(vectors))
            if pulled is not None:  # a laggard: the iteration closed without it; it applies the rounds
                for out in pulled:
                    correct = check(out) and correct
                t1 = time.monotonic()
                pulling = (t1 - t0) / time_scale
                records.append({"iteration": it, "iteration_s": pulling, "comm_s": pulling, "bucket_s": [],
                                "compute_s": 0.0, "exposed_comm_s": pulling, "window": [t0, t1], "skipped": True})
                log.info("iteration %d: skipped, its %d rounds pulled", it, len(pulled))
                continue
            elapsed = 0.0 if began is None else (t0 - began) / time_scale  # the cluster's time
            delay, slow = straggler.slowing(elapsed, t0) if straggler else (0.0, 1.0)
            compute = plan.compute_s * slow + delay  # this iteration's, the cluster's time
            backward_at = t0 + (plan.forward_s * slow + delay) * time_scale
            busy = 0.0
            took = []  # each bucket's all-reduce, the cluster's time
            for bucket, vec in zip(plan.buckets, vectors):
                ready_at = backward_at + bucket.ready_s * slow * time_scale
                _sleep_until(ready_at)
                s = time.monotonic()
                out = comm.allreduce(vec)
                e = time.monotonic()
                busy += e - s
                took.append((e - s) / time_scale)
                if in_flight and in_flight[-1][1] >= ready_at:  # it waited for the one before: no pause between
                    in_flight[-1][1] = e
                else:
                    in_flight.append([s, e])
                correct = check(out) and correct
            _sleep_until(backward_at + plan.backward_s * slow * time_scale)
            t1 = time.monotonic()
            began = t1 if began is None else began
            seconds = (t1 - t0) / time_scale
            records.append({"iteration": it, "iteration_s": seconds, "comm_s": busy / time_scale, "bucket_s": took,
                            "compute_s": compute, "exposed_comm_s": seconds - compute, "window": [t0, t1]})
            log.info("iteration %d: %.3f s, all-reduces busy %.3f s", it, seconds, busy / time_scale)
    report: dict[str, Any] = {"worker": worker, "rank": rank, "workers": world, "scheme": config.scheme, "model": model,
              "profile": {"name": profile_name, "path": prof.path, "device": prof.device, "batch": prof.batch},
              "bucket_mb": bucket_mb, "grad_scale": grad_scale, "time_scale": time_scale,
              "buckets": [b.nbytes for b in plan.buckets], "values_sent": [len(v) for v in vectors],
              "compute_s": plan.compute_s, "correct": correct, "sums": sums,
              "skipped_iterations": sum(1 for r in records if r.get("skipped")),
              "iteration_s": statistics.median(r["iteration_s"] for r in records),
              "exposed_comm_s": statistics.median(r["exposed_comm_s"] for r in records),
              "comm_s": statistics.median(r["comm_s"] for r in records),
              "window": [records[0]["window"][0], records[-1]["window"][1]], "comm_intervals": in_flight,
              "iterations": records}
    if link_mbps is not None:
        lanes = config.job.lanes if config.job is not None else 0
        bps = analytic.emulated_link_bps(link_mbps, grad_scale, time_scale)
        predicted = analytic.iteration(plan, config.scheme, world, bps, lanes, grad_scale)
        report.update(emulated_link_gbps=bps / 1e9, analytic=predicted,
                      measured_vs_analytic=report["iteration_s"] / predicted["iteration_s"])
    (out_dir / f"{worker}.model.json").write_text(json.dumps(report, indent=2) + "\n")
    if not correct:
        raise WrongModelSum(f"a bucket's sum differs from {expected:g}" if not stale else
                            "a bucket's sum differs between lanes")
    return report
