"""The PyTorch side of bench/data/decode_throughput.sh: PIL + torchvision transforms
(RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize) in a DataLoader with W worker
processes over the same imagefolder; prints samples/s of the last epoch (the first warms up)."""
import argparse
import time

import torch
import torchvision
from torchvision import transforms


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
    seconds = 0.0
    for _ in range(args.epochs):
        start = time.monotonic()
        n = 0
        for inputs, _targets in loader:
            n += inputs.shape[0]
        seconds = time.monotonic() - start
    print(f"pytorch workers={args.workers} samples={n} seconds={seconds:.3f} "
          f"samples_per_s={n / seconds:.1f}")


if __name__ == "__main__":
    main()
