"""A DDP training script in the shape of PyTorch's DDP tutorial series (torchrun launches it; a
Trainer with a DistributedSampler and snapshots it resumes from), changed only as a user changes
it to run on CPUs: the backend's name ("nccl" -> "aggnet"), no cuda device, DDP without
device_ids. It never imports AggNet: torch registers "aggnet" by itself (docs/training.md).

    torchrun --standalone --nproc-per-node 2 docs/examples/ddp_torchrun.py 10 2 --snapshot /tmp/snapshot.pt

The job it joins is named by $AGGNET_CONFIG (`aggnet run --script` sets it on every emulated host).
"""
import argparse
import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class RegressionSet(Dataset):
    """`size` random (x, y) pairs with y a fixed linear function of x plus noise, the same on every rank."""

    def __init__(self, size: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.rand(size, 20, generator=g)
        self.y = self.x @ torch.linspace(-1, 1, 20).unsqueeze(1) + 0.01 * torch.randn(size, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def ddp_setup() -> None:
    init_process_group(backend="aggnet")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from torchrun


class Trainer:
    def __init__(self, model: torch.nn.Module, train_data: DataLoader, optimizer: torch.optim.Optimizer,
                 save_every: int, snapshot_path: str):
        self.rank = int(os.environ["LOCAL_RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            print(f"[rank {self.rank}] resuming from the snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, path: str) -> None:
        snapshot = torch.load(path)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"[rank {self.rank}] resuming at epoch {self.epochs_run}")

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int) -> None:
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            loss = self._run_batch(source, targets)
        print(f"[rank {self.rank}] epoch {epoch} | steps {len(self.train_data)} | last loss {loss:.5f}")

    def _save_snapshot(self, epoch: int) -> None:
        torch.save({"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}, self.snapshot_path)
        print(f"epoch {epoch} | snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main(save_every: int, total_epochs: int, batch_size: int, snapshot_path: str) -> None:
    ddp_setup()
    torch.manual_seed(0)
    dataset = RegressionSet(512)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(dataset))
    trainer = Trainer(model, loader, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    torch.save(trainer.model.module.state_dict(), f"{snapshot_path}.rank{trainer.rank}")
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="distributed training job")
    parser.add_argument("total_epochs", type=int, help="total epochs to train the model")
    parser.add_argument("save_every", type=int, help="how often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="input batch size on each device (default: 32)")
    parser.add_argument("--snapshot", default="snapshot.pt", help="where the snapshot goes")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size, args.snapshot)
