#!/usr/bin/env python3
"""Exports a model as TorchScript for hptrain (`model: {torchscript: PATH}` in a TrainingJob).

The networks here mirror the C++ zoo (runtime/train/models/lenet5.cc, mlp.cc) layer for layer
and name for name, so a scripted LeNet-5 has the same 61,706 parameters, in the same order and
with the same names, as the built-in `lenet5`.

    /usr/bin/python3 examples/export_torchscript.py [OUT] [--model lenet5|mlp]
        [--channels 1] [--size 28] [--classes 10] [--hidden 256,128] [--seed 0]

OUT defaults to examples/lenet5.pt (or examples/mlp.pt). Runs on Debian's python3-torch (1.13)
and on current PyTorch releases. Exported .pt files are build outputs: do not commit them.
"""

import argparse
import os
import sys
from typing import List

import torch
from torch import nn


class LeNet5(nn.Module):
    """conv5x5(6) relu pool2, conv5x5(16) relu pool2, fc 120, fc 84, fc classes.

    Inputs smaller than 32x32 are zero-padded in conv1 up to 32 (28x28: padding 2), exactly as
    the C++ version does.
    """

    def __init__(self, channels: int, size: int, classes: int):
        super().__init__()
        pad = (32 - size + 1) // 2 if size < 32 else 0
        side = ((size + 2 * pad - 4) // 2 - 4) // 2
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=pad)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * side * side, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class Mlp(nn.Module):
    """flatten, Linear+ReLU per hidden width, Linear to classes; layers in `layers`."""

    num_hidden: int

    def __init__(self, channels: int, size: int, classes: int, hidden: List[int]):
        super().__init__()
        widths = [channels * size * size] + hidden + [classes]
        self.layers = nn.ModuleList(
            [nn.Linear(widths[i], widths[i + 1]) for i in range(len(widths) - 1)])
        self.num_hidden = len(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(x, 1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < self.num_hidden:
                x = torch.relu(x)
        return x


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="output path (default examples/<model>.pt)")
    parser.add_argument("--model", choices=["lenet5", "mlp"], default="lenet5")
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--size", type=int, default=28, help="input height = width")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--hidden", default="256,128", help="mlp hidden widths, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.model == "lenet5":
        model = LeNet5(args.channels, args.size, args.classes)
    else:
        hidden = [int(w) for w in args.hidden.split(",") if w]
        model = Mlp(args.channels, args.size, args.classes, hidden)
    scripted = torch.jit.script(model)

    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   args.model + ".pt")
    # Check the module before writing it: one forward pass on a zero batch.
    logits = scripted(torch.zeros(1, args.channels, args.size, args.size))
    assert logits.shape == (1, args.classes), logits.shape
    scripted.save(out)
    params = sum(p.numel() for p in scripted.parameters())
    print(f"wrote {out}: {args.model}, {params} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
