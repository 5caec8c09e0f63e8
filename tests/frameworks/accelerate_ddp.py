"""A small Accelerate script (CPU, 2 processes, launched as torchrun
launches them), for make test-frameworks (tests/frameworks.sh). Each rank
prints its hello, every step's loss and its end; --pause S sleeps S
seconds a step (time to press c)."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--pause", type=float, default=0.0)
args = p.parse_args()

acc = Accelerator(cpu=True)
rank = acc.process_index
print(f"hello from rank {rank} of {acc.num_processes}", flush=True)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 4))
model, opt, loader = acc.prepare(model, opt, DataLoader(data, batch_size=16))
step = 0
while step < args.steps:
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
        print(f"rank {rank} step {step} loss {loss.item():.8f}", flush=True)
        time.sleep(args.pause)
        step += 1
        if step == args.steps:
            break
acc.wait_for_everyone()
print(f"rank {rank} done", flush=True)
acc.end_training()
