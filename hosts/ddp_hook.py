"""A DistributedDataParallel communication hook that sums gradients with an AggNet AllReduce.

An existing DDP script switches to AggNet with one line after wrapping the model:

    ddp.register_comm_hook(ddp_hook.connect(), ddp_hook.aggnet_hook)

connect() reads the agent config named by $AGGNET_CONFIG (hosts/agent_config.py) and joins
the job as this process's torch.distributed rank, using the config's scheme (innet, ps or
ring). torch.distributed still starts the job (gloo), broadcasts the initial weights and
orders the buckets; only the gradient all-reduce leaves gloo for AggNet.

No `from __future__ import annotations` here: DDP checks the hook's annotations at run time.
"""
import atexit
import os

import torch
import torch.distributed as dist

from .comm import AllReduce

CONFIG_ENV = "AGGNET_CONFIG"


class HookError(RuntimeError):
    """The hook cannot be set up (no config, rank mismatch)."""

    exit_code = 2


def aggnet_hook(state: AllReduce, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average the bucket over all ranks through `state` (what DDP's default hook does with gloo)."""
    buf = bucket.buffer()
    summed = state.allreduce(buf.detach().to("cpu", torch.float32).numpy())
    averaged = torch.from_numpy(summed).div_(state.world_size).to(buf.device, buf.dtype)
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(averaged)
    return future


def connect(config_path: str | None = None, rank: int | None = None) -> AllReduce:
    """The AllReduce of this rank: config from $AGGNET_CONFIG, rank from torch.distributed."""
    from .agent import make_allreduce
    from .agent_config import load_config

    path = config_path or os.environ.get(CONFIG_ENV)
    if not path:
        raise HookError(f"aggnet DDP hook: no config (pass config_path or set ${CONFIG_ENV})")
    config = load_config(path)
    rank = dist.get_rank() if rank is None else rank
    if dist.is_initialized() and dist.get_world_size() != len(config.workers):
        raise HookError(f"{path}: field 'workers': {len(config.workers)} workers, but torch.distributed "
                        f"has world size {dist.get_world_size()}")
    comm = make_allreduce(config, rank)
    atexit.register(comm.close)  # DDP scripts never close a hook's state; a PS waits for the goodbye
    return comm
