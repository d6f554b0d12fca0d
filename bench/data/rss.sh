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

# Samples every child of $1 (the launcher) each 0.2 s until it exits: the peak VmHWM (all resident
# pages, the data's shared file pages included) and the peak RssAnon (private memory) of each.
sample() {
  local launcher=$1 label=$2
  declare -A hwm anon name
  while kill -0 "$launcher" 2>/dev/null; do
    for pid in $(pgrep -P "$launcher" || true); do
      cmd=$( (tr '\0' ' ' </proc/"$pid"/cmdline) 2>/dev/null || true)
      case "$cmd" in *resource_tracker*|"") continue ;; esac
      if [ -z "${name[$pid]:-}" ]; then
        role=$(echo "$cmd" | awk '{print $2}')
        rank=$(echo "$cmd" | sed -n 's/.*--rank \([0-9]*\).*/\1/p')
        case "$cmd" in *hptrain*) name[$pid]="$role${rank:+-$rank}" ;; *) name[$pid]="rank-pid$pid" ;; esac
      fi
      read -r h a < <(awk '/VmHWM/ {h=$2} /RssAnon/ {a=$2} END {print h, a}' /proc/"$pid"/status \
                      2>/dev/null || true)
      [ -n "${h:-}" ] || continue
      if [ "$h" -gt "${hwm[$pid]:-0}" ]; then hwm[$pid]=$h; fi
      if [ "${a:-0}" -gt "${anon[$pid]:-0}" ]; then anon[$pid]=$a; fi
    done
    sleep 0.2
  done
  wait "$launcher" || true
  for pid in "${!hwm[@]}"; do
    awk -v s="$label" -v k="${name[$pid]}" -v h="${hwm[$pid]}" -v a="${anon[$pid]}" \
      'BEGIN { printf "%-4s %-12s VmHWM %7.1f MiB   RssAnon %7.1f MiB\n", s, k, h / 1024, a / 1024 }'
  done | sort
}

for system in idx npy; do
  build/bin/hptrain run "$tmp/$system.yaml" --quiet >/dev/null 2>"$tmp/$system.err" &
  sample $! "$system"
done

# The DDP peer: four local ranks (mp.spawn's children of the launcher), the same steps.
/usr/bin/python3 bench/peers/ddp_peer.py --local 4 --max-steps "$steps" --threads 1 \
  --output "$tmp/ddp.json" >/dev/null 2>"$tmp/ddp.err" &
sample $! ddp
