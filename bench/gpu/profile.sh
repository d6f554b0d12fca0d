#!/usr/bin/env bash
# Where one GPU worker's step goes, by Nsight Systems: the CUDA API calls (how many event
# records, queries and synchronisations a step makes, and their time) and the kernels of one
# hptrain worker training MODEL on synthetic data, the throughput benchmark's job.
#
#   bench/gpu/profile.sh [BUILD_DIR=build-gpu] [OUT_DIR=BUILD_DIR/profile]
#
# Environment: MODEL (resnet20), BATCH (128), STEPS (300), RUN_TIMEOUT (seconds, 120), NSYS (the
# nsys binary; default: nsys on PATH, else /usr/local/cuda/bin/nsys, else the newest
# /opt/nvidia/nsight-systems/*/bin/nsys). Writes OUT_DIR/profile.nsys-rep and prints nsys's
# cuda_api_sum and cuda_gpu_kern_sum tables (their first 30 lines). OPTIONAL=1: a machine without
# nsys is no error (exit 0 with a message; bench/gpu/run.sh sets it).
# Exit status: 0 profiled, 1 the run or nsys failed, 2 no nsys, no GPU or no hptrain binary.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build=${1:-build-gpu}
out=${2:-$build/profile}
model=${MODEL:-resnet20}
batch=${BATCH:-128}
steps=${STEPS:-300}
hptrain=$build/bin/hptrain
nsys=${NSYS:-$(command -v nsys || true)}
[[ -z $nsys && -x /usr/local/cuda/bin/nsys ]] && nsys=/usr/local/cuda/bin/nsys
if [[ -z $nsys ]]; then
  nsys=$(find /opt/nvidia/nsight-systems -path '*/bin/nsys' -type f 2>/dev/null | sort -V | tail -1)
fi
if [[ -z $nsys || ! -x $nsys ]]; then
  echo "profile: no nsys (Nsight Systems) on this machine; set NSYS to its path" >&2
  [[ ${OPTIONAL:-0} == 1 ]] && exit 0
  exit 2
fi
if [[ ! -x $hptrain ]]; then
  echo "profile: no $hptrain (build it with bench/gpu/build.sh)" >&2
  exit 2
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "profile: no NVIDIA GPU here (nvidia-smi -L failed)" >&2
  exit 2
fi
mkdir -p "$out"
wrap=()
[[ -x $build/run-env ]] && wrap=("$build/run-env")
# shellcheck source=bench/gpu/job_yaml.sh
source bench/gpu/job_yaml.sh
job=$out/job.yaml
job_yaml "$model" "$batch" >"$job"
echo "== $("$nsys" --version 2>&1 | head -1); $model batch $batch, $steps steps"
# The launcher starts the ps and the worker as child processes, which nsys follows.
if ! timeout "${RUN_TIMEOUT:-120}" "$nsys" profile --trace=cuda,osrt --sample=none \
  --force-overwrite=true -o "$out/profile" "${wrap[@]}" "$hptrain" run "$job" --quiet \
  --set "spec.maxSteps=$steps" >"$out/run.log" 2>&1; then
  echo "profile: the profiled run failed; last lines of $out/run.log:" >&2
  tail -n 15 "$out/run.log" >&2
  exit 1
fi
for report in cuda_api_sum cuda_gpu_kern_sum; do
  echo "== $report"
  if ! "$nsys" stats --report "$report" --format table "$out/profile.nsys-rep" \
    >"$out/$report.txt" 2>&1; then
    echo "profile: nsys stats --report $report failed:" >&2
    tail -n 10 "$out/$report.txt" >&2
    exit 1
  fi
  head -n 30 "$out/$report.txt"
done
