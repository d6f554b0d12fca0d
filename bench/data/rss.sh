#!/usr/bin/env bash
# Peak resident memory (VmHWM) per worker: Fashion-MNIST LeNet-5, 4 workers, read through the idx
# reader, through the npy format (the same data converted with NumPy), and by the PyTorch DDP peer:
#   bench/data/rss.sh [STEPS]        (default 200 steps; build/bin/hptrain and /usr/bin/python3)
# Prints one line per worker and system. The npy copy is written to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 - "$tmp" <<'PY'
import gzip, struct, sys
import numpy as np
root, out = "/usr/share/datasets/fashion-mnist", sys.argv[1]
def idx(path):
    data = gzip.open(path, "rb").read()
    ndim = struct.unpack(">I", data[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)
for src, dst in (("train", "train"), ("t10k", "test")):
    np.save(f"{out}/{dst}-images.npy", idx(f"{root}/{src}-images-idx3-ubyte.gz"))
    np.save(f"{out}/{dst}-labels.npy", idx(f"{root}/{src}-labels-idx1-ubyte.gz").astype(np.int64))
PY

job() {  # $1 name, $2 dataset
  cat <<YAML
apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: $1}
spec:
  model: {name: lenet5}
  dataset: $2
  strategy: {type: ssgd}
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
  globalBatchSize: 128
  epochs: 1
  maxSteps: $steps
  threads: 1
  workers: {replicas: 4}
YAML
}
job rss-idx "{name: fashion-mnist}" >"$tmp/idx.yaml"
job rss-npy "{name: fashion-mnist, format: npy, path: $tmp}" >"$tmp/npy.yaml"

for system in idx npy; do
  bench/peak_rss.sh "$tmp/$system.yaml" | sed "s/^/$system  /"
done

# The DDP peer: four local ranks, the same steps; VmHWM of each rank process.
/usr/bin/python3 bench/peers/ddp_peer.py --local 4 --max-steps "$steps" --threads 1 \
  --output "$tmp/ddp.json" >/dev/null 2>&1 &
launcher=$!
declare -A peak
while kill -0 "$launcher" 2>/dev/null; do
  # mp.spawn's rank processes are the launcher's children (its resource tracker is not a rank).
  for pid in $(pgrep -P "$launcher" || true); do
    grep -q resource_tracker /proc/"$pid"/cmdline 2>/dev/null && continue
    hwm=$( (awk '/VmHWM/ {print $2}' /proc/"$pid"/status) 2>/dev/null || true)
    [ -n "$hwm" ] || continue
    if [ "$hwm" -gt "${peak[$pid]:-0}" ]; then peak[$pid]=$hwm; fi
  done
  sleep 0.2
done
wait "$launcher" || true
for pid in $(echo "${!peak[@]}" | tr ' ' '\n' | sort -n); do
  awk -v k="$pid" -v v="${peak[$pid]}" 'BEGIN { printf "ddp  pid-%-6s %8.1f MiB\n", k, v / 1024 }'
done
