"""The worker agent: one process per worker host, training its shard of the job.

    python -m hosts worker --config job.json --worker h1 --out DIR [--checkpoint CKPT [--resume-step N]]

Writes DIR/h1.log (everything it did), DIR/h1.metrics.jsonl (one JSON object per step:
step, epoch, loss, step_time_s, comm_time_s, bytes_sent, and test_loss/test_accuracy on
evaluation steps) and, on success, DIR/h1.result.json. Exit 0 on success; on failure one
line "agent h1: ..." on stderr naming what failed (a crashed peer is named) and a non-zero
exit code (2 bad config, 1 communication failure, 3 internal error).

With --checkpoint the state after every step is saved under CKPT (hosts.checkpoint), and
--resume-step N continues a run after step N (appending to the metrics file).
"""
from __future__ import annotations

import json
import logging
import statistics
from dataclasses import asdict
from pathlib import Path

from .agent_config import AgentConfig
from .comm import AllReduce

log = logging.getLogger("aggnet.agent")


def make_allreduce(config: AgentConfig, rank: int, start_step: int = 0) -> AllReduce:
    """The AllReduce implementation the config's scheme names, connected for `rank` (first step: start_step)."""
    me = config.workers[rank]
    if config.scheme == "innet":
        from .allreduce import InNetworkAllReduce
        assert config.job is not None, "the config loader requires a job for scheme innet"
        return InNetworkAllReduce(config.job, rank, stall_timeout_s=config.timeout_s)
    if config.scheme == "ps":
        from .ps import ParameterServerClient
        assert config.ps is not None, "the config loader requires a server for scheme ps"
        return ParameterServerClient(config.ps, me.name, rank, len(config.workers), config.timeout_s)
    if config.scheme == "hostagg" or me.name in config.split_workers:  # split: a straggler, to the aggregator
        from .host_agg import HostAggClient
        servers = [e for e in (config.aggregator, config.replica) if e is not None]
        seat = config.split_workers.index(me.name) if config.split_workers else rank
        return HostAggClient(servers, me.name, rank, len(config.workers), config.timeout_s, start_step, seat)
    if config.scheme == "split":  # an on-time worker: a member of the tree, averaging over the whole job
        from .allreduce import InNetworkAllReduce
        from .split_agg import member_rank
        assert config.job is not None, "the config loader requires a job for scheme split"
        comm = InNetworkAllReduce(config.job, member_rank(config, me.name), stall_timeout_s=config.timeout_s)
        comm.rank, comm.world_size = rank, len(config.workers)
        return comm
    from .ring import RingAllReduce
    return RingAllReduce(list(config.workers), rank, config.timeout_s)


def run_agent(config: AgentConfig, worker: str, out_dir: Path, source: str = "<agent config>",
              checkpoint_dir: Path | None = None, resume_step: int = -1) -> dict:
    """Train as `worker`; write metrics and the result JSON under out_dir; return the result.

    checkpoint_dir: save the state after every step there; resume_step >= 0: continue after
    that step from its checkpoint.
    """
    import torch

    from .checkpoint import Checkpointer, CheckpointError
    from .data import load_dataset
    from .train import train_worker

    torch.set_num_threads(1)  # several agents share few cores
    rank = config.rank_of(worker, source)
    tc = config.train
    log.info("worker %s rank %d of %d, scheme %s, train %s", worker, rank, len(config.workers), config.scheme,
             asdict(tc))
    if resume_step >= 0 and checkpoint_dir is None:
        raise CheckpointError(f"agent {worker}: --resume-step needs --checkpoint")
    if resume_step >= tc.steps - 1:
        raise CheckpointError(f"agent {worker}: --resume-step {resume_step}: nothing left to train "
                              f"(the job has {tc.steps} steps)")
    checkpointer = Checkpointer(checkpoint_dir, worker) if checkpoint_dir is not None else None
    straggler, pause = config.stragglers.get(worker), config.compute_pause(worker)
    if pause:
        log.info("compute slowed: %s (straggler %s, time scale %g)", pause, straggler, config.time_scale)
    data = load_dataset(tc.dataset, tc.seed)
    records: list[dict] = []
    mode = "a" if resume_step >= 0 else "w"
    with open(out_dir / f"{worker}.metrics.jsonl", mode) as metrics, \
            make_allreduce(config, rank, resume_step + 1) as comm:
        def on_step(record: dict) -> None:
            record.update(comm.step_metrics())
            records.append(record)
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            if "test_accuracy" in record:
                log.info("step %d loss %.4f test accuracy %.4f", record["step"], record["loss"],
                         record["test_accuracy"])

        if resume_step >= 0:
            log.info("resuming after step %d", resume_step)
        train_worker(tc, data, comm, on_step, checkpointer, resume_step, pause)
        run_metrics = comm.run_metrics()
    last = records[-1]
    result = {"worker": worker, "rank": rank, "world_size": len(config.workers), "scheme": config.scheme,
              "config": asdict(tc), "seeds": {"model": tc.seed, "data": tc.seed}, "steps": tc.steps,
              "final_loss": last["test_loss"], "final_accuracy": last["test_accuracy"],
              "step_time_s": statistics.median(r["step_time_s"] for r in records),
              "comm_time_s": statistics.median(r["comm_time_s"] for r in records),
              "bytes_sent": last["bytes_sent"], **run_metrics}
    if config.scheme in ("hostagg", "split"):
        result["staleness_bound"] = config.staleness
        result["max_staleness"] = max(r.get("staleness", 0) for r in records)
    if straggler:
        result["straggler"] = straggler.to_dict()
    if resume_step >= 0:
        result["resumed_after_step"] = resume_step
    (out_dir / f"{worker}.result.json").write_text(json.dumps(result, indent=2) + "\n")
    log.info("done: final accuracy %.4f", result["final_accuracy"])
    return result
