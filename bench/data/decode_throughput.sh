#!/usr/bin/env bash
# JPEG decode + augmentation throughput per core: hptrain's imagefolder source and decode pool
# (build/bin/hptrain-decode-bench) against PIL + torchvision transforms in a PyTorch DataLoader,
# on the same 256x256 JPEGs, RandomResizedCrop(224) + flip + normalize, batch 64, each pinned with
# taskset to the same W cores (W decode threads / W DataLoader worker processes).
#
#   bench/data/decode_throughput.sh [--images 2000] [--workers "1 2"] [--build build]
set -euo pipefail
images=2000
workers="1 2"
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --images) images="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    *) echo "usage: $0 [--images N] [--workers \"1 2\"] [--build DIR]" >&2; exit 2 ;;
  esac
done
python=/usr/bin/python3
"$python" -c "import torchvision, PIL" 2>/dev/null || {
  echo "$0: $python needs torchvision and PIL (apt-get install python3-torchvision python3-pil)" >&2
  exit 2
}
here="$(cd "$(dirname "$0")" && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$build/bin/hptrain-decode-bench" --write "$dir" --images "$images"
# Per core: samples per CPU second (every thread / process of each side), which other load on
# the machine does not skew; samples/s (wall) beside it.
echo "| cores | hptrain samples/s | hptrain samples per CPU s | PyTorch samples/s | PyTorch samples per CPU s | ratio per CPU s |"
echo "|---|---|---|---|---|---|"
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
for w in $workers; do
  cores="0-$((w - 1))"
  ours=$(taskset -c "$cores" "$build/bin/hptrain-decode-bench" --read "$dir" --threads "$w")
  theirs=$(taskset -c "$cores" "$python" "$here/decode_throughput.py" "$dir" --workers "$w")
  awk -v w="$w" -v a="$(echo "$ours" | field samples_per_s)" \
      -v ac="$(echo "$ours" | field samples_per_cpu_s)" \
      -v b="$(echo "$theirs" | field samples_per_s)" \
      -v bc="$(echo "$theirs" | field samples_per_cpu_s)" 'BEGIN {
    printf "| %d | %.0f | %.0f | %.0f | %.0f | %.2fx |\n", w, a, ac, b, bc, ac / bc }'
done
