#!/usr/bin/env python3
"""A character-level Transformer language model, trained by hptrain: a model, a loss and a metric
(perplexity) that the built-in trainer does not have, under any strategy of the manifest
(examples/python/char-transformer-hps.yaml, char-transformer-multistep.yaml).

The corpus is text every Debian system has: the licence texts in /usr/share/common-licenses (or
--corpus FILE...). The last 10 % of it is held out for the perplexity.
"""
import argparse
import glob
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

import hptrain as hp


class Windows(Dataset):
    """Every `context`-character window of the text (stride `context`), with the next character of
    each position as its target."""

    def __init__(self, codes, context):
        self.codes = codes
        self.context = context

    def __len__(self):
        return (len(self.codes) - 1) // self.context

    def __getitem__(self, i):
        start = i * self.context
        chunk = self.codes[start:start + self.context + 1]
        return chunk[:-1], chunk[1:]


class CharTransformer(nn.Module):
    def __init__(self, vocab, context, width=64, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(context, width))
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width, dropout=0.0,
                                           batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        mask = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        n = x.shape[1]
        h = self.embed(x) + self.position[:n]
        h = self.blocks(h, mask=self.mask[:n, :n])
        return self.head(self.norm(h))


def load_corpus(files):
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in sorted(files))
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([index[c] for c in text], dtype=torch.long), len(vocab)


def perplexity(model, dataset, device):
    """Held-out loss per character, its perplexity, and next-character accuracy."""
    loss, correct, n = 0.0, 0, 0
    for x, y in DataLoader(dataset, batch_size=64):
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
        correct += (logits.argmax(-1) == y).sum().item()
        n += y.numel()
    mean = loss / n
    return {"loss": mean, "perplexity": math.exp(mean), "accuracy": correct / n}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="*", default=glob.glob("/usr/share/common-licenses/*"),
                        help="text files (default: /usr/share/common-licenses/*)")
    parser.add_argument("--context", type=int, default=64, help="characters per window")
    args = parser.parse_args()

    hp.init()
    torch.manual_seed(hp.job()["seed"])  # the same initial model on every worker
    codes, vocab = load_corpus(args.corpus)
    split = int(len(codes) * 0.9)
    train_set = Windows(codes[:split], args.context)
    test_set = Windows(codes[split:], args.context)
    device = hp.device()
    model = CharTransformer(vocab, args.context).to(device)

    # hptrain's optimizer (spec.optimizer): the parameter server's strategies need it.
    opt = hp.DistributedOptimizer(None, model)
    loader = DataLoader(train_set, batch_sampler=hp.data.GlobalBatchSampler(len(train_set)))
    hp.restore(model, opt)

    epoch = hp.epoch()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())  # mean over the local batch
        loss.backward()
        opt.step()
        opt.zero_grad()
        hp.report(loss=loss.item())
        if hp.epoch() != epoch:
            epoch = hp.epoch()
            result = hp.evaluate(lambda: perplexity(model, test_set, device))
            if hp.rank() == 0:
                print("epoch %d: held-out loss %.4f, perplexity %.2f, next-character accuracy "
                      "%.3f" % (epoch, result["loss"], result["perplexity"], result["accuracy"]),
                      flush=True)


if __name__ == "__main__":
    main()
