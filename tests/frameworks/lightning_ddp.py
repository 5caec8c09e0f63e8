"""A small Lightning script: Trainer(strategy="ddp", accelerator="cpu",
devices=2), for make test-frameworks (tests/frameworks.sh). Each rank
prints its hello, every step's loss and its end; --pause S sleeps S
seconds a step (time to press c)."""
import argparse
import time

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--pause", type=float, default=0.0)
args = p.parse_args()


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def on_train_start(self):
        print(f"hello from rank {self.global_rank} of {self.trainer.world_size}", flush=True)

    def training_step(self, batch, i):
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        print(f"rank {self.global_rank} step {self.global_step} loss {loss.item():.8f}", flush=True)
        time.sleep(args.pause)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


torch.manual_seed(0)
data = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 4))
trainer = L.Trainer(strategy="ddp", accelerator="cpu", devices=2, max_steps=args.steps, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Model(), DataLoader(data, batch_size=16))
print(f"rank {trainer.global_rank} done", flush=True)
