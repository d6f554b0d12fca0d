#!/usr/bin/python3
"""PyTorch DDP peer for the benchmark harness: the same model (LeNet-5 or the MLP of hptrain's
zoo), Fashion-MNIST data, global batch, optimizer, learning-rate schedule and seed policy as an
hptrain job, with the gloo backend. Variants (DDP communication hooks from PyTorch itself):

  --hook none         plain DDP (bucketed all-reduce of fp32 gradients)
  --hook fp16         default_hooks.fp16_compress_hook
  --hook powersgd     powerSGD_hook (--powersgd-rank R, error feedback and warm start on), with
                      the whole gradient in one bucket (see build())
  --hook postlocal    post_localSGD_hook + PostLocalSGDOptimizer with a PeriodicModelAverager
                      (--period P, after --local-warmup global steps)

One process per rank (the harness starts each in its host's namespace):
  ddp_peer.py --rank R --world-size N --master ADDR:PORT [options]
or N local processes:  ddp_peer.py --local N [options]

Rank 0 writes one JSON object (to --output, atomically, or stdout): samples/s inside training
steps, per-epoch test accuracy with the time since --t0 (Unix seconds; default: process start),
every evaluation (epoch ends and every --eval-every steps) the same way, and the wall time.
Data sampling: one seeded permutation per epoch shared by all ranks, rank r takes the r-th equal
slice of each global batch (hptrain's equal split).
"""
import argparse
import gzip
import json
import math
import os
import struct
import statistics
import sys
import tempfile
import time

START = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

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
    """hptrain's lenet5 (runtime/train/models/lenet5.cc): 61,706 parameters."""

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


class Mlp(nn.Module):
    """hptrain's mlp (runtime/train/models/mlp.cc): Linear+ReLU per hidden width, then Linear."""

    def __init__(self, hidden):
        super().__init__()
        widths = [784] + hidden + [10]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        x = torch.flatten(x, 1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


def learning_rate(args, epoch, step, steps_per_epoch):
    """hptrain's schedules (runtime/train/lr_schedule.cc): constant or cosine to min_lr."""
    if args.schedule == "cosine":
        t = (epoch * steps_per_epoch + step) / max(1, args.epochs * steps_per_epoch)
        return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * t))
    return args.lr


def build(args, model):
    """Wraps `model` in DDP with the chosen hook; returns (ddp, optimizer)."""
    options = {}
    if args.hook == "powersgd":
        # powerSGD_hook (PyTorch 1.13) chains each bucket's all-reduces through future callbacks,
        # so with two or more buckets every rank issues them in the order its futures complete,
        # which differs between ranks; gloo then pairs all-reduces of different sizes and aborts
        # ("op.preamble.length <= op.nbytes"). LeNet-5 fits DDP's first 1 MiB bucket; for larger
        # models the whole gradient goes into one bucket, so every rank issues the same sequence.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 40
        options["bucket_cap_mb"] = 1 << 20
    ddp = nn.parallel.DistributedDataParallel(model, **options)
    sgd = lambda params: torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,  # noqa: E731
                                         weight_decay=args.weight_decay)
    if args.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.powersgd_start, use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    elif args.hook == "postlocal":
        from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook
        from torch.distributed.algorithms.model_averaging import averagers
        from torch.distributed.optim import PostLocalSGDOptimizer
        # Each rank alone in its subgroup: between averages the steps are purely local.
        # (dist.new_subgroups needs CUDA; every rank creates every group, in the same order.)
        groups = [dist.new_group(ranks=[r]) for r in range(args.world_size)]
        subgroup = groups[dist.get_rank()]
        state = post_localSGD_hook.PostLocalSGDState(
            process_group=None, subgroup=subgroup, start_localSGD_iter=args.local_warmup)
        ddp.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)
        averager = averagers.PeriodicModelAverager(period=args.period, warmup_steps=args.local_warmup)
        return ddp, PostLocalSGDOptimizer(optim=sgd(ddp.parameters()), averager=averager)
    return ddp, sgd(ddp.parameters())


def train(rank, args):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size,
                            init_method=f"tcp://{args.master}")
    torch.manual_seed(args.seed)
    model = LeNet5() if args.model == "lenet5" else Mlp(args.hidden)
    ddp, opt = build(args, model)
    xtr, ytr = load(args.data, "train")
    xte, yte = load(args.data, "test")
    local = args.batch // args.world_size
    steps = len(xtr) // args.batch
    g = torch.Generator().manual_seed(args.seed)
    factors = [float(f) for f in args.slowdown.split(",")] if args.slowdown else []
    slowdown = factors[rank] if rank < len(factors) else 1.0
    recent_cpu = []  # the last --slowdown-window forward CPU times, as spec.testing.slowdownWindow
    per_epoch = []
    evaluations = []
    train_time = 0.0
    total_steps = 0

    def evaluate(step):
        """Rank 0 tests the model after `step` global steps; the other ranks wait."""
        acc = None
        if rank == 0:
            with torch.no_grad():
                acc = (model(xte).argmax(1) == yte).float().mean().item()
            evaluations.append({"step": step, "epochs": step / steps, "test_accuracy": acc,
                                "elapsed_seconds": time.time() - args.t0})
            if args.progress:
                print(f"step {step} (epoch {step / steps:.2f}): test accuracy {100 * acc:.2f}%",
                      file=sys.stderr, flush=True)
        dist.barrier()
        return acc

    for epoch in range(args.epochs):
        if args.max_steps and total_steps >= args.max_steps:
            break
        perm = torch.randperm(len(xtr), generator=g)
        dist.barrier()
        t0 = time.time()
        epoch_steps = min(steps, args.max_steps - total_steps) if args.max_steps else steps
        for s in range(epoch_steps):
            for group in opt.param_groups:
                group["lr"] = learning_rate(args, epoch, s, steps)
            step_start = time.time()
            step_cpu = time.thread_time()
            idx = perm[s * args.batch + rank * local: s * args.batch + (rank + 1) * local]
            opt.zero_grad()
            loss = F.cross_entropy(ddp(xtr[idx]), ytr[idx])
            forward = time.time() - step_start
            forward_cpu = time.thread_time() - step_cpu
            loss.backward()
            if slowdown > 1.0:
                # hptrain's spec.testing.slowdown stretches compute to f x its CPU time. DDP's
                # backward overlaps the all-reduce (and so the wait for slower ranks), so it
                # cannot be timed apart: compute is estimated as 3 x forward (backward costs
                # about twice the forward), and the rank sleeps what the wall clock has not
                # already covered of f x that in CPU time. With a window, the CPU time charged
                # is the median of the last steps'.
                recent_cpu = (recent_cpu + [forward_cpu])[-args.slowdown_window:]
                charged = statistics.median(recent_cpu)
                time.sleep(max(0.0, 3.0 * (slowdown * charged - forward)))
            opt.step()
            done = total_steps + s + 1
            if args.eval_every and done % args.eval_every == 0 and s + 1 < epoch_steps:
                # Like hptrain's spec.evalEverySteps; not counted as training time.
                dist.barrier()
                paused = time.time()
                evaluate(done)
                t0 += time.time() - paused
        dist.barrier()
        train_time += time.time() - t0
        total_steps += epoch_steps
        acc = evaluate(total_steps)
        if rank == 0:
            per_epoch.append({"epoch": epoch + 1, "test_accuracy": acc,
                              "elapsed_seconds": evaluations[-1]["elapsed_seconds"]})
    if rank == 0:
        result = {"system": f"pytorch-ddp-{args.hook}", "workers": args.world_size,
                  "steps": total_steps, "train_seconds": train_time,
                  "samples_per_second": total_steps * args.batch / train_time,
                  "wall_seconds": time.time() - args.t0, "per_epoch": per_epoch,
                  "evaluations": evaluations,
                  "final": {"test_accuracy": per_epoch[-1]["test_accuracy"] if per_epoch else 0.0}}
        text = json.dumps(result)
        if args.output:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.output)))
            with os.fdopen(fd, "w") as f:
                f.write(text + "\n")
            os.replace(tmp, args.output)
        else:
            print(text, flush=True)
    # Every rank reaches the teardown together: destroy_process_group can hang when one rank
    # tears down while another still works (pytorch/pytorch#75097); once, in this peer's test,
    # a run hung after printing its result.
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--master", default="127.0.0.1:29511", help="rank 0's ADDR:PORT for rendezvous")
    p.add_argument("--local", type=int, default=0, help="spawn this many local ranks instead")
    p.add_argument("--model", choices=["lenet5", "mlp"], default="lenet5")
    p.add_argument("--hidden", default="256,128", help="mlp hidden widths, comma-separated")
    p.add_argument("--hook", choices=["none", "fp16", "powersgd", "postlocal"], default="none")
    p.add_argument("--powersgd-rank", type=int, default=2)
    p.add_argument("--powersgd-start", type=int, default=10,
                   help="plain all-reduce for this many iterations first (PyTorch needs >= 2)")
    p.add_argument("--period", type=int, default=8, help="post-local SGD averaging period")
    p.add_argument("--local-warmup", type=int, default=50,
                   help="post-local SGD: global all-reduce steps before local steps start")
    p.add_argument("--slowdown", default="",
                   help="per-rank slowdown factors, comma-separated (emulated heterogeneity)")
    p.add_argument("--slowdown-window", type=int, default=1,
                   help="charge each step the median forward CPU time of the last N steps "
                        "(hptrain's spec.testing.slowdownWindow; default 1: its own)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--schedule", choices=["constant", "cosine"], default="constant")
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: cores/ranks)")
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop after this many steps in all (0: every epoch whole), like spec.maxSteps")
    p.add_argument("--eval-every", type=int, default=0,
                   help="also evaluate every this many global steps (0: at epoch ends only), "
                        "like spec.evalEverySteps")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--t0", type=float, default=START, help="Unix time elapsed_seconds count from")
    p.add_argument("--output", default="", help="rank 0 writes its JSON result here")
    p.add_argument("--progress", action="store_true", help="rank 0 prints each epoch on stderr")
    args = p.parse_args()
    args.hidden = [int(w) for w in args.hidden.split(",") if w]
    if args.slowdown_window < 1:
        p.error(f"--slowdown-window must be at least 1, got {args.slowdown_window}")
    if args.local:
        args.world_size = args.local
    if args.threads == 0:
        args.threads = max(1, (os.cpu_count() or 1) // args.world_size)
    if args.batch % args.world_size:
        p.error(f"--batch {args.batch} is not a multiple of the {args.world_size} ranks")
    if args.local:
        import torch.multiprocessing as mp
        mp.spawn(train, args=(args,), nprocs=args.local, join=True)
    else:
        train(args.rank, args)


if __name__ == "__main__":
    main()
