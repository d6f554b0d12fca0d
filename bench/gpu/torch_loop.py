#!/usr/bin/env python3
"""Plain PyTorch training loop: the reference that hptrain's single-worker GPU throughput is
compared with (bench/gpu/throughput.sh).

  python3 bench/gpu/torch_loop.py --model lenet5|resnet20 [--batch B] [--steps N] [--warmup W]
      [--window K] [--lr LR] [--momentum M] [--weight-decay WD] [--device cuda|cpu]

The models are defined exactly as runtime/train/models/lenet5.cc and resnet20.cc (same layers,
padding, option-A shortcuts, batch norm, Kaiming-normal init of ResNet-20's conv and linear
weights). The loss is cross-entropy summed over the batch and divided by the batch size, as the
trainer computes it; the optimizer is torch.optim.SGD with the job's momentum and weight decay.
Data: a host tensor of synthetic samples of the job's shape (1x28x28 for lenet5, 3x32x32 for
resnet20), normalized on the host; each step gathers a random batch into one of two pinned
buffers and copies it to the device with non_blocking=True.

The first --warmup steps are not timed. The rest are timed in windows of --window steps (each
ended by a device synchronization); samples_per_second is the median over the windows. Prints one
JSON line: {model, batch, device, samples_per_second, peak_memory_bytes (torch.cuda.
max_memory_allocated; null on the CPU), steps (timed), warmup_steps, windows, final_loss}.
Needs torch only and no network.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"lenet5": (1, 28, 28), "resnet20": (3, 32, 32)}


class LeNet5(nn.Module):
    """runtime/train/models/lenet5.cc: conv1 pads inputs under 32x32 up to 32."""

    def __init__(self, channels, height, width, classes):
        super().__init__()
        side = min(height, width)
        pad = (32 - side + 1) // 2 if side < 32 else 0
        h = ((height + 2 * pad - 4) // 2 - 4) // 2
        w = ((width + 2 * pad - 4) // 2 - 4) // 2
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=pad)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * h * w, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def conv3x3(cin, cout, stride):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """Option-A shortcut: stride-2 subsampling and zero-padding of the new channels."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        self.pad_front = (cout - cin) // 2
        self.pad_back = cout - cin - (cout - cin) // 2
        self.conv1 = conv3x3(cin, cout, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = conv3x3(cout, cout, 1)
        self.bn2 = nn.BatchNorm2d(cout)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x
        if self.stride != 1:
            shortcut = shortcut[:, :, ::self.stride, ::self.stride]
        if self.pad_front + self.pad_back > 0:
            shortcut = F.pad(shortcut, (0, 0, 0, 0, self.pad_front, self.pad_back))
        return F.relu(out + shortcut)


class ResNet20(nn.Module):
    """runtime/train/models/resnet20.cc: 3 stages of 3 basic blocks, 16/32/64 channels."""

    def __init__(self, channels, height, width, classes):
        super().__init__()
        self.conv1 = conv3x3(channels, 16, 1)
        self.bn1 = nn.BatchNorm2d(16)
        stages, cin = [], 16
        for stage, width_ in enumerate((16, 32, 64)):
            blocks = []
            for block in range(3):
                blocks.append(BasicBlock(cin, width_, 2 if stage > 0 and block == 0 else 1))
                cin = width_
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.fc = nn.Linear(64, classes)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.init.kaiming_normal_(m.weight)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


MODELS = {"lenet5": LeNet5, "resnet20": ResNet20}


def synthetic(samples, shape, classes, seed):
    """Pixels near a 16-dimensional subspace, labels from a linear teacher (the shape of
    runtime/train/data/synthetic_dataset.cc's task; the exact values do not matter here)."""
    g = torch.Generator().manual_seed(seed)
    dim = shape[0] * shape[1] * shape[2]
    basis = torch.rand(dim, 16, generator=g) * 2 - 1
    z = torch.rand(samples, 16, generator=g) * 2 - 1
    pixels = (127.5 + 48.0 * z @ basis.T).round().clamp(0, 255)
    x = (pixels / 255.0 - 0.5) / 0.25  # the data set's mean and std, as spec.dataset.normalize
    teacher = torch.rand(classes, dim, generator=g) * 2 - 1
    y = (x @ teacher.T).argmax(1)
    return x.reshape(samples, *shape).contiguous(), y


def add_loop_arguments(p, model_default=None):
    """The loop's flags, shared with bench/peers/amp_peer.py."""
    if model_default is None:
        p.add_argument("--model", choices=sorted(MODELS), required=True)
    else:
        p.add_argument("--model", choices=sorted(MODELS), default=model_default)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=300, help="timed steps")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps before")
    p.add_argument("--window", type=int, default=25, help="steps per timed window")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--samples", type=int, default=8192, help="host data set size")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")


def check_loop_arguments(p, args):
    for name in ("batch", "steps", "window", "classes", "samples"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be positive, got {getattr(args, name)}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")


def timed_windows(args, step, sync, loss):
    """args.steps timed steps in windows of args.window: (samples/s per window, steps, last loss)."""
    sync()
    rates, done = [], 0
    while done < args.steps:
        k = min(args.window, args.steps - done)
        start = time.perf_counter()
        for _ in range(k):
            loss = step()
        sync()
        rates.append(k * args.batch / (time.perf_counter() - start))
        done += k
    return rates, done, loss


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_loop_arguments(p)
    args = p.parse_args(argv)
    check_loop_arguments(p, args)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("torch_loop: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2

    torch.manual_seed(args.seed)
    shape = SHAPES[args.model]
    x_host, y_host = synthetic(args.samples, shape, args.classes, args.seed)
    model = MODELS[args.model](*shape, args.classes).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.cuda.reset_peak_memory_stats(device)
    # Two pinned staging buffers, alternating: a buffer is refilled only once the copy that
    # read it has finished (its event), so the host gathers the next batch while the device runs.
    staging = [(torch.empty((args.batch, *shape), pin_memory=cuda),
                torch.empty((args.batch,), dtype=torch.long, pin_memory=cuda),
                torch.cuda.Event() if cuda else None) for _ in range(2)]
    gen = torch.Generator().manual_seed(args.seed + 1)
    count = [0]

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def step():
        xb, yb, copied = staging[count[0] % 2]
        count[0] += 1
        if copied is not None:
            copied.synchronize()
        idx = torch.randint(0, args.samples, (args.batch,), generator=gen)
        torch.index_select(x_host, 0, idx, out=xb)
        torch.index_select(y_host, 0, idx, out=yb)
        x = xb.to(device, non_blocking=True)
        y = yb.to(device, non_blocking=True)
        if copied is not None:
            copied.record()
        loss = F.cross_entropy(model(x), y, reduction="sum") / args.batch
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    loss = None
    for _ in range(args.warmup):
        loss = step()
    rates, done, loss = timed_windows(args, step, sync, loss)
    print(json.dumps({
        "model": args.model,
        "batch": args.batch,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "samples_per_second": statistics.median(rates),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        "steps": done,
        "warmup_steps": args.warmup,
        "windows": len(rates),
        "final_loss": float(loss),
        "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
