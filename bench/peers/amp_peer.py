#!/usr/bin/python3
"""PyTorch AMP peer: the reference for hptrain's spec.precision bf16 and fp16 throughput on one
GPU (bench/gpu/throughput.sh with PRECISION=bf16|fp16, run by bench/gpu/run.sh's amp step).

  amp_peer.py --model resnet20|lenet5 --precision bf16|fp16 [--batch B] [--steps N]
      [--warmup W] [--window K] [--lr LR] [--momentum M] [--weight-decay WD] [--device cuda|cpu]

The loop, the models and the data are bench/gpu/torch_loop.py's (the models defined exactly as
runtime/train/models/resnet20.cc and lenet5.cc, synthetic data of the model's shape, pinned
double-buffered host batches, torch.optim.SGD), with PyTorch's recipe for mixed precision: the
forward and the loss under torch.autocast(device_type, dtype), fp32 weights and optimizer; for
fp16 a GradScaler (initial scale 2^16, growth 2 every 2000 steps, backoff 0.5: hptrain's
runtime/train/precision.h uses the same) scales the loss, unscales the gradients and skips a
step with an inf or nan. bf16 needs no scaler. On the CPU (--device cpu, to check the script
without a GPU) only bf16 autocast exists.

Prints one JSON line, torch_loop.py's fields plus precision and warmup_skipped_steps (fp16: the
warm-up steps the scaler skipped; the timed steps are not checked, which would cost a sync).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import torch_loop  # noqa: E402  (bench/gpu/torch_loop.py: the models and the data)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def grad_scaler(enabled):
    """torch.amp.GradScaler("cuda") where it exists (torch >= 2.3), else torch.cuda.amp's."""
    kwargs = dict(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                  growth_interval=2000, enabled=enabled)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        try:
            return torch.amp.GradScaler("cuda", **kwargs)
        except TypeError:
            pass
    return torch.cuda.amp.GradScaler(**kwargs)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    torch_loop.add_loop_arguments(p, model_default="resnet20")
    p.add_argument("--precision", choices=sorted(DTYPES), required=True)
    p.set_defaults(batch=128)
    args = p.parse_args(argv)
    torch_loop.check_loop_arguments(p, args)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("amp_peer: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if not cuda and args.precision == "fp16":
        print("amp_peer: --precision fp16 needs --device cuda", file=sys.stderr)
        return 2
    dtype = DTYPES[args.precision]

    torch.manual_seed(args.seed)
    shape = torch_loop.SHAPES[args.model]
    x_host, y_host = torch_loop.synthetic(args.samples, shape, args.classes, args.seed)
    model = torch_loop.MODELS[args.model](*shape, args.classes).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    scaler = grad_scaler(args.precision == "fp16")
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.cuda.reset_peak_memory_stats(device)
    staging = [(torch.empty((args.batch, *shape), pin_memory=cuda),
                torch.empty((args.batch,), dtype=torch.long, pin_memory=cuda),
                torch.cuda.Event() if cuda else None) for _ in range(2)]
    gen = torch.Generator().manual_seed(args.seed + 1)
    count = [0]
    skipped = [0]

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def step(count_skips=False):
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
        with torch.autocast(device_type=device.type, dtype=dtype):
            loss = F.cross_entropy(model(x), y, reduction="sum") / args.batch
        opt.zero_grad(set_to_none=True)
        if scaler.is_enabled():
            scaler.scale(loss).backward()
            before = scaler.get_scale() if count_skips else 0.0
            scaler.step(opt)
            scaler.update()
            # A skipped step backs the scale off. Reading the scale waits for the device, so
            # only the warm-up steps, where the skips happen, are counted.
            if count_skips:
                skipped[0] += scaler.get_scale() < before
        else:
            loss.backward()
            opt.step()
        return loss

    loss = None
    for _ in range(args.warmup):
        loss = step(count_skips=True)
    rates, done, loss = torch_loop.timed_windows(args, step, sync, loss)
    print(json.dumps({
        "model": args.model,
        "batch": args.batch,
        "precision": args.precision,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "samples_per_second": statistics.median(rates),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        "steps": done,
        "warmup_steps": args.warmup,
        "windows": len(rates),
        "warmup_skipped_steps": int(skipped[0]),
        "final_loss": float(loss),
        "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
