#!/usr/bin/python3
"""PyTorch DDP peer: the same LeNet-5, data, global batch, optimizer and seed policy as
examples/fashion-mnist.yaml, with the gloo backend and N local processes.

Run with Debian's python3-torch:  /usr/bin/python3 bench/ddp_lenet.py --workers 4 --epochs 1
Prints one JSON line: samples/s over the training steps, test accuracy per epoch, wall time.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(root, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(root, name)):
            return os.path.join(root, name)
    raise FileNotFoundError(os.path.join(root, stem))


def load(root, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(find(root, f"{prefix}-images-idx3-ubyte"))
    y = read_idx(find(root, f"{prefix}-labels-idx1-ubyte"))
    x = (torch.from_numpy(x.copy()).float().div(255.0) - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(y.copy()).long()


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def worker(rank, args, port, queue):
    torch.set_num_threads(args.threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.workers)
    torch.manual_seed(args.seed)
    model = LeNet5()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    xtr, ytr = load(args.data, "train")
    xte, yte = load(args.data, "test")
    local = args.batch // args.workers
    steps = len(xtr) // args.batch
    if args.max_steps:
        steps = min(steps, args.max_steps)
    g = torch.Generator().manual_seed(args.seed)
    per_epoch = []
    start = time.time()
    train_time = 0.0
    total_steps = 0
    for epoch in range(args.epochs):
        perm = torch.randperm(len(xtr), generator=g)
        dist.barrier()
        t0 = time.time()
        for s in range(steps):
            idx = perm[s * args.batch + rank * local: s * args.batch + (rank + 1) * local]
            opt.zero_grad()
            loss = F.cross_entropy(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
        dist.barrier()
        train_time += time.time() - t0
        total_steps += steps
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        per_epoch.append({"epoch": epoch + 1, "test_accuracy": acc})
    if rank == 0:
        queue.put({"system": "pytorch-ddp-gloo", "workers": args.workers,
                   "steps": total_steps, "train_seconds": train_time,
                   "samples_per_second": total_steps * args.batch / train_time,
                   "wall_seconds": time.time() - start, "per_epoch": per_epoch})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: cores/workers)")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--port", type=int, default=29511)
    args = p.parse_args()
    if args.threads == 0:
        args.threads = max(1, os.cpu_count() // args.workers)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(worker, args=(args, args.port, queue), nprocs=args.workers, join=True)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
