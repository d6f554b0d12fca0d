#!/usr/bin/env bash
# GPU checks of a CUDA build, for a machine with an NVIDIA GPU: the CUDA-twin tests (codes and
# values against the CPU reference; the optimizer's device route against its host route), the
# NCCL back end's tests and all-reduce check, and the CUDA kernel benchmark with each kernel's
# bandwidth as a share of a device-to-device copy.
#
#   bench/gpu/check.sh [BUILD_DIR=build] [OUT_DIR=BUILD_DIR/gpu-check]
#
# On the GPU machine BUILD_DIR is build-gpu (bench/gpu/build.sh; bench/gpu/run.sh calls this).
#
# BUILD_DIR is a build configured with -DHPTRAIN_CUDA=ON (tests in BUILD_DIR/tests, programs in
# BUILD_DIR/bin). Logs and the benchmark's JSON go to OUT_DIR; a summary is printed last. Exit
# status: 0 when every test passed and every check verified, 1 otherwise, 2 without a GPU.
# Environment: BENCHMARK_REPETITIONS (10) for the kernel benchmark; 0 skips it.
set -uo pipefail
build=${1:-build}
out=${2:-$build/gpu-check}
mkdir -p "$out"
# A build from bench/gpu/build.sh records where its libraries are (the carried prefix, NCCL).
# shellcheck source=/dev/null
[[ -f $build/env.sh ]] && source "$build/env.sh"

if ! nvidia-smi -L >"$out/gpu.txt" 2>&1; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L failed: $(head -1 "$out/gpu.txt"))" >&2
  exit 2
fi
cat "$out/gpu.txt"

failed=()
run() {  # run NAME CMD...: log to $out/NAME.log, remember a failure
  local name=$1
  shift
  echo "== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then
    tail -n 3 "$out/$name.log"
  else
    echo "   FAILED (exit $?), last lines of $out/$name.log:"
    tail -n 25 "$out/$name.log"
    failed+=("$name")
  fi
}

for t in kernels_quantize_cuda_test kernels_cast_cuda_test kernels_topk_cuda_test \
  kernels_update_cuda_test optim_device_test comm_nccl_test sync_device_codecs_test \
  sync_device_strategies_test sync_device_scale_test; do
  if [[ -x $build/tests/$t ]]; then
    run "$t" "$build/tests/$t" --gtest_brief=1
    # Skips are listed, never counted as passes. comm_nccl_test skips its no-device case here, and
    # its two-ranks case on a machine with one GPU (NCCL refuses two ranks on one device).
    if grep -q "SKIPPED" "$out/$t.log"; then
      grep "SKIPPED\|skip" "$out/$t.log" | head -5
    fi
  else
    echo "== $t: not built (configure with -DHPTRAIN_CUDA=ON)"
    failed+=("$t")
  fi
done
run nccl_allreduce_check "$build/bin/nccl_allreduce_check" 1 64 20
if ((${BENCHMARK_REPETITIONS:-10} > 0)); then
  run kernels_cuda_benchmark "$build/bin/hptrain-kernels-cuda-benchmark" \
    --benchmark_repetitions="${BENCHMARK_REPETITIONS:-10}" --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/kernels_cuda.json" --benchmark_out_format=json
fi

if [[ -s $out/kernels_cuda.json ]]; then
  python3 - "$out/kernels_cuda.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
median = {r["run_name"].replace("/manual_time", ""): r["bytes_per_second"]
          for r in runs if r.get("aggregate_name") == "median"}
copy = median.get("BM_DeviceCopy")
print("\nkernel (64 MiB fp32 in)      median GB/s   of device copy")
for name, bps in median.items():
    share = f"{100 * bps / copy:6.1f} %" if copy else "-"
    print(f"{name:28s} {bps / 1e9:11.1f}   {share}")
PY
fi

if ((${#failed[@]})); then
  echo "gpu-check: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu-check: all passed"
