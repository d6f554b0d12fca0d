#!/usr/bin/env python3
"""Writes Fashion-MNIST in every format of spec.dataset.format, for the jobs in examples/data/.

Usage: make_data.py OUT [--source DIR] [--limit N] [--formats npy,imagefolder,...]

Reads the idx files of Debian's dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist,
or --source) and writes, under OUT:

  npy/            train-images.npy (uint8 [N, 28, 28]), train-labels.npy (int64 [N]), test-*
  imagefolder/    train/<class>/<index>.png, test/<class>/<index>.png
  filelist/       train.txt, test.txt (`images/train/<index>.png<TAB><class>` lines) and the PNGs
  webdataset/     train-000000.tar, ..., test-000000.tar: <index>.png + <index>.cls members
  multilabel/     npy images with float32 multi-hot labels [N, 4] of the class's attributes
                  (garment, footwear, bag, covers the legs), for task multilabel

PNG is lossless, so every format holds the very pixels of the idx files (a job with
`normalize: false` trains bit for bit alike on each). --limit N keeps the first N samples of each
split (for quick trials). Needs NumPy and PIL (Debian: python3-numpy, python3-pil).
"""

import argparse
import gzip
import io
import os
import sys
import tarfile

import numpy as np
from PIL import Image

FORMATS = ("npy", "imagefolder", "filelist", "webdataset", "multilabel")
SHARD_SAMPLES = 10000  # samples per webdataset shard

# Fashion-MNIST's classes: 0 T-shirt/top, 1 trouser, 2 pullover, 3 dress, 4 coat, 5 sandal,
# 6 shirt, 7 sneaker, 8 bag, 9 ankle boot. The multilabel set's attributes of each class:
ATTRIBUTES = ("garment", "footwear", "bag", "covers_legs")
CLASS_ATTRIBUTES = {0: {"garment"}, 1: {"garment", "covers_legs"}, 2: {"garment"},
                    3: {"garment", "covers_legs"}, 4: {"garment"}, 5: {"footwear"},
                    6: {"garment"}, 7: {"footwear"}, 8: {"bag"}, 9: {"footwear"}}


def read_idx(path, header_bytes):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header_bytes)


def load_split(source, split, limit):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(source, f"{prefix}-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(source, f"{prefix}-labels-idx1-ubyte.gz"), 8)
    images = images.reshape(-1, 28, 28)
    if limit:
        images, labels = images[:limit], labels[:limit]
    return images, labels.astype(np.int64)


def png_bytes(image):
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def write_npy(out, split, images, labels):
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, f"{split}-images.npy"), images)
    np.save(os.path.join(out, f"{split}-labels.npy"), labels)


def write_imagefolder(out, split, images, labels):
    for i, (image, label) in enumerate(zip(images, labels)):
        folder = os.path.join(out, split, str(label))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{i:05d}.png"), "wb") as f:
            f.write(png_bytes(image))


def write_filelist(out, split, images, labels):
    folder = os.path.join(out, "images", split)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(out, f"{split}.txt"), "w", encoding="utf-8") as listing:
        for i, (image, label) in enumerate(zip(images, labels)):
            with open(os.path.join(folder, f"{i:05d}.png"), "wb") as f:
                f.write(png_bytes(image))
            listing.write(f"images/{split}/{i:05d}.png\t{label}\n")


def write_webdataset(out, split, images, labels):
    os.makedirs(out, exist_ok=True)
    for shard, start in enumerate(range(0, len(labels), SHARD_SAMPLES)):
        with tarfile.open(os.path.join(out, f"{split}-{shard:06d}.tar"), "w") as tar:
            for i in range(start, min(start + SHARD_SAMPLES, len(labels))):
                for name, data in ((f"{i:06d}.png", png_bytes(images[i])),
                                   (f"{i:06d}.cls", str(labels[i]).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def write_multilabel(out, split, images, labels):
    table = np.array([[1.0 if a in CLASS_ATTRIBUTES[c] else 0.0 for a in ATTRIBUTES]
                      for c in range(10)], dtype=np.float32)
    write_npy(out, split, images, table[labels])


WRITERS = {"npy": write_npy, "imagefolder": write_imagefolder, "filelist": write_filelist,
           "webdataset": write_webdataset, "multilabel": write_multilabel}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="directory to write the formats' folders into")
    parser.add_argument("--source", default="/usr/share/datasets/fashion-mnist",
                        help="the idx files (default: Debian's dataset-fashion-mnist)")
    parser.add_argument("--limit", type=int, default=0,
                        help="keep the first N samples of each split (default: all)")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help=f"comma-separated subset of {','.join(FORMATS)}")
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    unknown = [f for f in formats if f not in WRITERS]
    if unknown:
        print(f"make_data.py: --formats: unknown {', '.join(unknown)} (expected {', '.join(FORMATS)})",
              file=sys.stderr)
        return 2
    for split in ("train", "test"):
        try:
            images, labels = load_split(args.source, split, args.limit)
        except OSError as e:
            print(f"make_data.py: {e}", file=sys.stderr)
            return 2
        for name in formats:
            WRITERS[name](os.path.join(args.out, name), split, images, labels)
    for name in formats:
        print(os.path.join(args.out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
