"""The torch.distributed backend "aggnet".

    dist.init_process_group("aggnet")   # torchrun's RANK, WORLD_SIZE, MASTER_ADDR/PORT

No import is needed: torch registers the backend through its autoload entry point
(hosts.torch_plugin, which makes its groups here); with TORCH_DEVICE_BACKEND_AUTOLOAD=0 a
script calls hosts.torch_plugin.register() first.

The process joins the AggNet job of the agent config named by $AGGNET_CONFIG
(hosts.agent_config; `aggnet run --script` writes it and sets every variable), as worker
RANK of the config's workers. all_reduce SUM and AVG of float32, float16, bfloat16 and
int32 go through the config's scheme: with innet the switches sum (floats quantized,
hosts.quantize; int32 exact); with ps, ring or hostagg the host baselines sum floats as
float32. Every other collective (broadcast, all_gather, reduce_scatter, barrier,
send/recv, other reduce ops, and int32 outside innet) goes over a gloo group the backend
makes on the hosts' own addresses, so DDP and ordinary scripts work as they are.

Before each summed all_reduce the ranks check, through the same path, that they all
reduce the same size, dtype and op: a mismatch is one clear BackendError, never a silent
mix of two tensors. A silent peer makes a call fail after the config's timeout_s (or
init_process_group's timeout, if shorter) with the peer's silence named.

With $AGGNET_OUT set, each rank writes OUT/<worker>.backend.json at exit: its calls and the
fractional bits of every quantized float call (the error bound of a call is
hosts.quantize.error_bound(W, bits)).
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from .allreduce import InNetworkAllReduce
from .comm import AllReduce

CONFIG_ENV = "AGGNET_CONFIG"
OUT_ENV = "AGGNET_OUT"
SUMMED_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32)
SUMMED_OPS = (dist.ReduceOp.SUM, dist.ReduceOp.AVG)
_SIZE_PIECE_BITS = 10  # a tensor size travels as three 10-bit pieces (sizes below 2**30)
# (job id, rank) -> the chunk a group made again after destroy_process_group() starts at: the
# switches answer a chunk sequence number they already summed with its stored (stale) result.
_NEXT_CHUNK: dict[tuple[int, int], int] = {}
_open: list[AggNetProcessGroup] = []  # the process's group: the job is the whole world, once


class BackendError(RuntimeError):
    """The backend cannot be set up (no config, wrong world size), or a call is wrong."""

    exit_code = 2


class _Completed(dist.Work):
    """The Work of a collective that finished before it was returned (the sums are synchronous)."""

    def __init__(self, tensors: list[torch.Tensor]):
        super().__init__()
        self._future: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        self._future.set_result(tensors)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        return True

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        return self._future


def _on_host(name: str) -> Callable[..., dist.Work]:
    """A collective of AggNetProcessGroup handed to its gloo group's method `name` as it is.

    Why not leave these to the ProcessGroup base class, which would reach gloo too: torch's
    C++ trampoline for Python process groups holds the GIL while it calls the base class, and
    gloo's run loop, holding its queue lock, may wait for the GIL (to free a finished work's
    tensors): a deadlock seen here about once in 40 runs. Gloo's own binding releases the GIL.
    """
    def collective(self: AggNetProcessGroup, *args: object, **kwargs: object) -> dist.Work:
        return getattr(self.host, name)(*args, **kwargs)

    collective.__name__ = name
    return collective


class AggNetProcessGroup(dist.ProcessGroup):
    """A process group whose summed all-reduces go through an AggNet AllReduce; everything
    else goes to the gloo group registered under it."""

    # The collectives torch's trampoline would route through the base class (see _on_host); the
    # coalesced all_gather/reduce_scatter_single, which gloo's binding lacks, still go that way.
    allgather = _on_host("allgather")
    allreduce_coalesced = _on_host("allreduce_coalesced")
    all_to_all_single = _on_host("alltoall_base")
    barrier = _on_host("barrier")
    broadcast = _on_host("broadcast")
    reduce_scatter = _on_host("reduce_scatter")
    send = _on_host("send")
    recv = _on_host("recv")

    def __init__(self, name: str, comm: AllReduce, host_group: dist.ProcessGroupGloo, worker: str):
        super().__init__(comm.rank, comm.world_size)
        self.name = name  # the backend's, as registered (hosts.torch_plugin)
        self.comm = comm
        self.host = host_group
        self.worker = worker
        self.switch = comm.client if isinstance(comm, InNetworkAllReduce) else None  # innet: sums int32 too
        if self.switch is not None:
            self.switch.next_chunk = _NEXT_CHUNK.get(self._job_key(), 0)
        self.calls = 0
        self.closed = False
        self.scales: list[int] = []  # fractional bits of each quantized float call
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, host_group)
        self._set_default_backend(dist.ProcessGroup.BackendType.GLOO)

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return self.name

    def allreduce(self, tensors: list[torch.Tensor], opts: dist.AllreduceOptions) -> dist.Work:
        """SUM and AVG through AggNet (after checking every rank reduces the same); other ops over gloo."""
        if opts.reduceOp.op not in SUMMED_OPS:
            return self.host.allreduce(tensors, opts)
        if len(tensors) != 1:
            raise BackendError(f"aggnet all_reduce: expected one tensor per call, got {len(tensors)}")
        tensor = tensors[0]
        if tensor.dtype not in SUMMED_DTYPES:
            raise BackendError(f"aggnet all_reduce: dtype {tensor.dtype} is not supported (SUM and AVG take "
                               f"{', '.join(str(d) for d in SUMMED_DTYPES)})")
        if tensor.device.type != "cpu":
            raise BackendError(f"aggnet all_reduce: tensor on {tensor.device}; the backend sums CPU tensors")
        average = opts.reduceOp.op == dist.ReduceOp.AVG
        self._check_same_call(tensor, average)
        summed = self._sum(tensor.detach().reshape(-1).numpy() if tensor.dtype == torch.int32
                           else tensor.detach().reshape(-1).to(torch.float32).numpy())
        if average:
            summed = summed // self.comm.world_size if tensor.dtype == torch.int32 else summed / self.comm.world_size
        with torch.no_grad():
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(summed)).reshape(tensor.shape))
        self.calls += 1
        return _Completed(tensors)

    def _sum(self, flat: np.ndarray) -> np.ndarray:
        """The element-wise sum over all ranks: int32 exactly, floats as float32."""
        if flat.dtype == np.int32:
            return self._sum_int(flat)
        out = self.comm.allreduce(flat)
        if self.switch is not None:
            self.scales.append(self.switch.scale)
        return out

    def _sum_int(self, flat: np.ndarray) -> np.ndarray:
        """Exact int32 sum: through the switches with innet, else over gloo."""
        if self.switch is not None:
            return self.switch.allreduce_int(flat)
        tensor = torch.from_numpy(flat.copy())
        self.host.allreduce([tensor], dist.AllreduceOptions()).wait()
        return tensor.numpy()

    def _check_same_call(self, tensor: torch.Tensor, average: bool) -> None:
        """Sum (1, d, d**2) of this call's descriptor d over the ranks: W * sum(d**2) == sum(d)**2
        for every field only when all ranks sent the same d (Cauchy-Schwarz), so a mismatch in
        size, dtype or op shows in one extra int32 chunk, without gathering anything."""
        n = tensor.numel()
        if n >= 1 << 3 * _SIZE_PIECE_BITS:
            raise BackendError(f"aggnet all_reduce: {n} elements; the backend sums tensors below "
                               f"{1 << 3 * _SIZE_PIECE_BITS} elements per call")
        mask = (1 << _SIZE_PIECE_BITS) - 1
        d = np.array([SUMMED_DTYPES.index(tensor.dtype), int(average), n & mask, n >> _SIZE_PIECE_BITS & mask,
                      n >> 2 * _SIZE_PIECE_BITS], dtype=np.int32)
        total = self._sum_int(np.concatenate([[1], d, d * d]).astype(np.int32)).astype(np.int64)
        workers, sums, squares = total[0], total[1:1 + d.size], total[1 + d.size:]
        if workers != self.comm.world_size or (workers * squares != sums * sums).any():
            raise BackendError(f"aggnet all_reduce: the ranks disagree on the call (rank {self.comm.rank}: "
                               f"{n} elements of {tensor.dtype}, op {'AVG' if average else 'SUM'}); every rank "
                               "must all-reduce the same size, dtype and op in the same order")

    def _job_key(self) -> tuple[int, int]:
        assert self.switch is not None, "only an in-network job has chunk numbers"
        return self.switch.job.job_id, self.switch.rank

    def summary(self) -> dict:
        """What this rank did (written to $AGGNET_OUT/<worker>.backend.json at exit)."""
        return {"worker": self.worker, "rank": self.comm.rank, "world_size": self.comm.world_size,
                "calls": self.calls, "scales": self.scales}

    def shutdown(self) -> None:
        """destroy_process_group(): close the AggNet endpoint, then the gloo group."""
        self.close()
        super().shutdown()

    def close(self) -> None:
        """Close the AggNet endpoint once (destroy_process_group or exit); write the summary where
        $AGGNET_OUT says."""
        if self.closed:
            return
        self.closed = True
        if self.switch is not None:
            _NEXT_CHUNK[self._job_key()] = self.switch.next_chunk
        out = os.environ.get(OUT_ENV)
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            Path(out, f"{self.worker}.backend.json").write_text(json.dumps(self.summary()) + "\n")
        self.comm.close()


def create(name: str, store: dist.Store, rank: int, world_size: int, timeout: timedelta) -> AggNetProcessGroup:
    """Join the job of $AGGNET_CONFIG as `rank`, for backend `name` (init_process_group("aggnet"): hosts.torch_plugin)."""
    from .agent import make_allreduce
    from .agent_config import load_config

    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise BackendError(f"aggnet backend: no job (set ${CONFIG_ENV} to the agent config; `aggnet run --script` "
                           "does; outside Mininet, a config naming your fabric or a host scheme: docs/training.md)")
    if any(not group.closed for group in _open):
        raise BackendError("aggnet backend: a second group while the first is open; the AggNet job is the "
                           "whole world (make subgroups with new_group(..., backend=\"gloo\"))")
    config = load_config(path)
    if world_size != len(config.workers):
        raise BackendError(f"{path}: field 'workers': {len(config.workers)} workers, but the process group "
                           f"has world size {world_size}")
    config = dataclasses.replace(config, timeout_s=min(config.timeout_s, timeout.total_seconds()))
    me = config.workers[rank]
    opts = dist.ProcessGroupGloo._Options()
    opts._devices = [dist.ProcessGroupGloo.create_device(hostname=me.host)]
    opts._timeout = timedelta(seconds=config.timeout_s)
    host_group = dist.ProcessGroupGloo(dist.PrefixStore("aggnet-host/", store), rank, world_size, opts)
    group = AggNetProcessGroup(name, make_allreduce(config, rank), host_group, me.name)
    _open[:] = [group]
    atexit.register(group.close)  # for scripts that never destroy the group: a PS waits for the goodbye
    return group

