"""The PyTorch side of bench/data/decode_throughput.sh: PIL + torchvision transforms
(RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize) in a DataLoader with W worker
processes over the same imagefolder; prints samples/s and samples per CPU second (the main process
and its workers) of the last epoch (the first warms up)."""
import argparse
import os
import time

import torch
import torchvision
from torchvision import transforms


def cpu_seconds(pids):
    """User + system CPU seconds of the processes `pids` (from /proc/PID/stat)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    data = torchvision.datasets.ImageFolder(args.root + "/train", transform=transform)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True,
                                         num_workers=args.workers, persistent_workers=True)
    seconds = cpu = 0.0
    pids = [os.getpid()]
    for epoch in range(args.epochs):
        if epoch == 1:  # the persistent workers exist from the first epoch on
            pids = [os.getpid()] + [w.pid for w in loader._iterator._workers]
        start, cpu_start = time.monotonic(), cpu_seconds(pids)
        n = 0
        for inputs, _targets in loader:
            n += inputs.shape[0]
        seconds, cpu = time.monotonic() - start, cpu_seconds(pids) - cpu_start
    print(f"pytorch workers={args.workers} samples={n} seconds={seconds:.3f} "
          f"cpu_seconds={cpu:.3f} samples_per_s={n / seconds:.1f} "
          f"samples_per_cpu_s={n / cpu:.1f}")


if __name__ == "__main__":
    main()
