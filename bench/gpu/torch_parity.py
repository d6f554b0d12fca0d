#!/usr/bin/env python3
"""How far plain PyTorch's CUDA training drifts from its CPU training, step by step: the reference
for hptrain's cuda-vs-cpu parity test (tests/integration/cuda_training_test.cc).

  python3 bench/gpu/torch_parity.py [--model lenet5|resnet20] [--batch 64] [--steps 20]
      [--lr 0.05] [--momentum 0.9] [--weight-decay 5e-4] [--seed 7] [--report 1,2,5,10,20]

One model is built on the CPU from the seed (torch_loop.py's definitions, which are hptrain's) and
copied into four runs that see the same batches of synthetic data with the same SGD:
  cpu64       float64 on the CPU: the reference, as near to exact arithmetic as is at hand;
  cpu32       float32 on the CPU;
  cuda32      float32 on the GPU, deterministic cuDNN, no autotuning, no TF32;
  cuda32-nocudnn  the same with cuDNN off (PyTorch's own CUDA convolutions).
At each reported step it prints, for each float32 run against cpu64 and for cuda32 against cpu32,
the largest element-wise relative difference of the parameters (absolute below 1e-2, as the test
measures it) and the norm-wise one |a-b|/|b|. One JSON line per step; needs torch and no network.
"""
import argparse
import copy
import json
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __import__("os").path.dirname(__file__))
from torch_loop import MODELS, SHAPES, synthetic  # noqa: E402


def flat(model):
    return torch.cat([p.detach().double().cpu().flatten() for p in model.parameters()])


def differences(a, b):
    d = (a - b).abs()
    return {"max_relative": float((d / b.abs().clamp(min=1e-2)).max()),
            "normwise": float(d.norm() / b.norm())}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="lenet5")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--report", default="1,2,5,10,20", help="steps to compare at")
    args = p.parse_args(argv)
    report = {int(s) for s in args.report.split(",") if s}
    cuda = torch.cuda.is_available()
    if not cuda:
        print("torch_parity: torch sees no CUDA device; comparing the CPU runs only",
              file=sys.stderr)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False

    torch.manual_seed(args.seed)
    shape = SHAPES[args.model]
    x, y = synthetic(4096, shape, 10, args.seed)
    base = MODELS[args.model](*shape, 10).train()
    runs = {"cpu64": (torch.device("cpu"), torch.float64, True),
            "cpu32": (torch.device("cpu"), torch.float32, True)}
    if cuda:
        runs["cuda32"] = (torch.device("cuda"), torch.float32, True)
        runs["cuda32-nocudnn"] = (torch.device("cuda"), torch.float32, False)
    models, opts = {}, {}
    for name, (device, dtype, _) in runs.items():
        models[name] = copy.deepcopy(base).to(device=device, dtype=dtype)
        opts[name] = torch.optim.SGD(models[name].parameters(), lr=args.lr,
                                     momentum=args.momentum, weight_decay=args.weight_decay)
    gen = torch.Generator().manual_seed(args.seed + 1)
    for step in range(1, args.steps + 1):
        idx = torch.randperm(x.shape[0], generator=gen)[:args.batch]
        for name, (device, dtype, cudnn) in runs.items():
            torch.backends.cudnn.enabled = cudnn
            xb = x[idx].to(device=device, dtype=dtype)
            loss = F.cross_entropy(models[name](xb), y[idx].to(device), reduction="sum") / args.batch
            opts[name].zero_grad(set_to_none=True)
            loss.backward()
            opts[name].step()
        torch.backends.cudnn.enabled = True
        if step in report:
            ref = flat(models["cpu64"])
            line = {"step": step}
            for name in runs:
                if name != "cpu64":
                    line[f"{name}_vs_cpu64"] = differences(flat(models[name]), ref)
            if cuda:
                line["cuda32_vs_cpu32"] = differences(flat(models["cuda32"]),
                                                      flat(models["cpu32"]))
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
