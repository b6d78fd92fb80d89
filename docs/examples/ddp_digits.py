"""A plain PyTorch DDP training script on scikit-learn digits; AggNet sums its gradients.

Run one process per rank (here 2 on localhost; see docs/training.md):

    AGGNET_CONFIG=job.json python docs/examples/ddp_digits.py --rank 0 --world 2 --out /tmp/ddp &
    AGGNET_CONFIG=job.json python docs/examples/ddp_digits.py --rank 1 --world 2 --out /tmp/ddp

Without the marked line this is ordinary DDP over gloo; with it, every gradient bucket
goes through AggNet's all-reduce (the config's scheme: innet, ps or ring).
Each rank saves its final weights to OUT/rank<R>.pt.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from hosts import ddp_hook
from hosts.data import Sharder, load_dataset
from hosts.model import build_model

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--world", type=int, required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--master", default="127.0.0.1:29512")
parser.add_argument("--no-aggnet", action="store_true", help="plain gloo all-reduce, for comparison")
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank, world_size=args.world)
data = load_dataset("digits", args.seed)
model = DistributedDataParallel(build_model("mlp", data.features, data.classes, args.seed))
if not args.no_aggnet:
    model.register_comm_hook(ddp_hook.connect(), ddp_hook.aggnet_hook)  # <- the one-line change
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
sharder = Sharder(len(data.y_train), args.world, args.batch_size, args.seed)

for step in range(args.steps):
    idx = torch.as_tensor(sharder.batch(args.rank, step))
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
    loss.backward()
    optimizer.step()

os.makedirs(args.out, exist_ok=True)
torch.save(model.module.state_dict(), os.path.join(args.out, f"rank{args.rank}.pt"))
print(f"rank {args.rank}: final loss {loss.item():.4f}")
dist.destroy_process_group()
