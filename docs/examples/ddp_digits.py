"""A plain PyTorch DDP script (the shape of PyTorch's DDP example) on scikit-learn's digits.

Started by torchrun, or on every worker host by `aggnet run --script` (docs/training.md):

    aggnet run --script docs/examples/ddp_digits.py --out /tmp/ddp

Nothing in it is AggNet's: torch registers the backend "aggnet" by itself (docs/training.md);
with --backend gloo it is ordinary DDP over gloo. Each rank saves its final weights to OUT/rank<R>.pt.
"""
import argparse
import os

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="aggnet")
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=16, help="per rank")
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group(args.backend)  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(args.seed)
digits = load_digits()
x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
y = torch.tensor(digits.target)
model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
order = torch.randperm(len(x), generator=torch.Generator().manual_seed(args.seed))

for step in range(args.steps):
    start = (step * world + rank) * args.batch_size % (len(x) - args.batch_size)
    idx = order[start:start + args.batch_size]
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
    loss.backward()
    optimizer.step()

os.makedirs(args.out, exist_ok=True)
torch.save(model.module.state_dict(), os.path.join(args.out, f"rank{rank}.pt"))
print(f"rank {rank}: final loss {loss.item():.4f}")
dist.destroy_process_group()
