#!/usr/bin/env bash
# Throughput of hptrain `ssgd` (4 workers) against PyTorch DDP (gloo, 4 processes) and a
# single-process libtorch loop, on the same LeNet-5 / Fashion-MNIST / batch 128 / SGD settings,
# one after the other on this machine. Each system runs EPOCHS epochs (default 1); throughput is
# samples per second inside training steps (start-up and evaluation excluded), test accuracy is
# after the last epoch. Prints a table and writes bench/results/compare-ddp-<time>.json.
#
#   bench/compare_ddp.sh [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-1}
out=bench/results/compare-ddp-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
[ -x build/bin/hptrain ] || scripts/build.sh

echo "hptrain ssgd, 4 workers, $epochs epoch(s)"
build/bin/hptrain run examples/fashion-mnist.yaml --set spec.epochs="$epochs" --quiet \
  --output-json "$out/hptrain.json" >"$out/hptrain.log"
echo "PyTorch DDP (gloo), 4 processes"
/usr/bin/python3 bench/peers/ddp_peer.py --local 4 --epochs "$epochs" >"$out/ddp.json" 2>"$out/ddp.log"
echo "libtorch, single process"
build/bin/hptrain-libtorch-loop examples/fashion-mnist.yaml --epochs "$epochs" >"$out/libtorch.json"

/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
h = json.load(open(f"{out}/hptrain.json"))
d = json.loads(open(f"{out}/ddp.json").read().strip().splitlines()[-1])
l = json.loads(open(f"{out}/libtorch.json").read().strip().splitlines()[-1])
rows = [("hptrain ssgd (4 workers)", h["samples_per_second"], h["final"]["test_accuracy"]),
        ("PyTorch DDP gloo (4 procs)", d["samples_per_second"], d["per_epoch"][-1]["test_accuracy"]),
        ("libtorch single process", l["samples_per_second"], l["per_epoch"][-1]["test_accuracy"])]
print(f"{'system':30} {'samples/s':>10} {'vs DDP':>7} {'test acc':>9}")
for name, sps, acc in rows:
    print(f"{name:30} {sps:10.1f} {sps / rows[1][1]:7.2f} {100 * acc:8.2f}%")
json.dump({"hptrain": h, "ddp": d, "libtorch": l}, open(f"{out}/summary.json", "w"), indent=2)
PY
