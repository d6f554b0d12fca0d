#!/usr/bin/env python3
"""LeNet-5 on Fashion-MNIST in plain PyTorch, trained by hptrain: the demo job as a script.

Run it as a TrainingJob's spec.trainer (examples/python/lenet5.yaml):
    hptrain run examples/python/lenet5.yaml
The strategy, the workers' batch shares and the optimizer's settings come from the manifest; the
script names none of them. --builtin-init starts from the built-in trainer's initial parameters
(its model zoo, the job's seed), so the two trainers can be compared step for step.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

import hptrain as hp


class LeNet5(nn.Module):
    """As in the PyTorch tutorials: 28x28 inputs padded to 32x32 by the first convolution."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def accuracy(model, dataset, device):
    loader = DataLoader(dataset, batch_size=1000)
    correct, loss, n = 0, 0.0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss += F.cross_entropy(logits, y, reduction="sum").item()
        correct += (logits.argmax(1) == y).sum().item()
        n += len(y)
    return {"accuracy": correct / n, "loss": loss / n}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builtin-init", action="store_true",
                        help="start from the built-in trainer's initial LeNet-5 parameters")
    parser.add_argument("--loader-workers", type=int, default=0,
                        help="DataLoader worker processes (default 0: load in this process)")
    parser.add_argument("--own-optimizer", action="store_true",
                        help="step with torch.optim.SGD (spec.optimizer's lr and momentum) "
                             "instead of hptrain's optimizer")
    parser.add_argument("--batch-log", metavar="DIR",
                        help="write each step's local batch size to DIR/rank-N.txt")
    args = parser.parse_args()

    hp.init()
    train_set = hp.data.JobDataset("train")  # spec.dataset, read as the built-in trainer does
    test_set = hp.data.JobDataset("test")
    model = LeNet5()
    if args.builtin_init:
        with torch.no_grad():
            for (name, p), (zoo_name, value) in zip(model.named_parameters(),
                                                    hp._C.zoo_parameters(hp._session(), "lenet5")):
                assert name == zoo_name, (name, zoo_name)
                p.copy_(value)
    model = model.to(hp.device())

    optimizer = None  # hptrain's optimizer: spec.optimizer, with its learning-rate schedule
    if args.own_optimizer:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = hp.DistributedOptimizer(optimizer, model)
    sampler = hp.data.GlobalBatchSampler(len(train_set))
    loader = DataLoader(train_set, batch_sampler=sampler, num_workers=args.loader_workers)
    hp.restore(model, opt)

    device = hp.device()
    epoch = hp.epoch()
    batch_log = open("%s/rank-%d.txt" % (args.batch_log, hp.rank()), "a") if args.batch_log else None
    for x, y in loader:
        if batch_log:
            print(hp.step(), len(y), file=batch_log, flush=True)
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)  # the mean over this worker's batch
        loss.backward()
        opt.step()
        opt.zero_grad()
        hp.report(loss=loss.item())
        if hp.epoch() != epoch:  # an epoch (or the run) ended: evaluate, as the built-in trainer
            epoch = hp.epoch()
            evaluate(model, test_set, device)


def evaluate(model, test_set, device):
    result = hp.evaluate(lambda: accuracy(model, test_set, device))
    if hp.rank() == 0:
        print("step %d: test accuracy %.4f, loss %.4f"
              % (hp.step(), result["accuracy"], result["loss"]), flush=True)


if __name__ == "__main__":
    main()
