"""Every collective a script uses, on backend "aggnet", rank and world from torchrun's environment.

    collectives.py OUT [--wrong dtype|size|subgroup|dead-peer] [--reinit-port PORT]

Rank r's all_reduce input of dtype D is seeded by (r, D), so the test can compute every sum;
OUT/rank<R>.pt holds what each call returned. --wrong makes the call a user gets wrong.
"""
import argparse
import os

import torch
import torch.distributed as dist

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32)
SIZE = 1000


def seeded(rank: int, dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 * rank + DTYPES.index(dtype))
    if dtype == torch.int32:
        return torch.randint(-2**20, 2**20, (SIZE,), generator=gen, dtype=torch.int32)
    return (torch.randn(SIZE, generator=gen) * 3).to(dtype)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--wrong", default="", choices=("", "dtype", "size", "subgroup", "dead-peer"))
    parser.add_argument("--reinit-port", type=int, help="first make, use and destroy a group with this store port")
    args = parser.parse_args()
    out, wrong = args.out, args.wrong
    if args.reinit_port:  # a store of its own: a rank must not find the first group's store still up
        dist.init_process_group("aggnet", init_method=f"tcp://127.0.0.1:{args.reinit_port}",
                                rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
        dist.all_reduce(torch.ones(7, dtype=torch.int32))
        dist.destroy_process_group()
    dist.init_process_group("aggnet")
    rank, world = dist.get_rank(), dist.get_world_size()
    if wrong == "dtype":
        dist.all_reduce(torch.zeros(4, dtype=torch.float64))
    if wrong == "size":
        dist.all_reduce(torch.zeros(10 + rank))
    if wrong == "subgroup":
        dist.new_group(list(range(world)))
    if wrong == "dead-peer" and rank == world - 1:
        os._exit(0)  # gone without a word, like a crashed process
    results = {}
    for dtype in DTYPES:
        for op in ("SUM", "AVG"):
            t = seeded(rank, dtype).reshape(20, -1)  # a 2-D tensor: shapes survive
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            results[f"{op}/{dtype}"] = t
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    results["MAX"] = t
    t = torch.arange(3.0) + rank
    dist.broadcast(t, src=world - 1)
    results["broadcast"] = t
    gathered = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    results["all_gather"] = torch.stack(gathered)
    t = torch.zeros(1)
    dist.reduce_scatter_tensor(t, torch.arange(float(world)) + rank)
    results["reduce_scatter"] = t
    dist.barrier()
    t = torch.tensor([float(rank)])
    if rank == 0:
        dist.send(torch.tensor([42.0]), dst=1)
    elif rank == 1:
        dist.recv(t, src=0)
    results["send_recv"] = t
    torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    dist.destroy_process_group()
