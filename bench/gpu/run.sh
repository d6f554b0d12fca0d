#!/usr/bin/env bash
# The one run on the GPU machine: build, test and measure, within a fixed time.
#
#   bench/gpu/run.sh OUT_DIR
#
# Steps, each under `timeout` so that the whole script ends within BUDGET_S (540 s by default):
#   1. env:         nvidia-smi, driver, nvcc, torch, NCCL, compiler and CMake versions.
#   2. build:       bench/gpu/build.sh (the default targets) into build-gpu; on failure the first
#                   compiler errors are printed and the later steps use what was built.
#   3. check:       bench/gpu/check.sh build-gpu (CUDA kernel tests, NCCL tests and all-reduce
#                   check, CUDA kernel benchmark).
#   4. integration: build-gpu/tests/integration_cuda_training_test, if built.
#   5. parity:      bench/gpu/torch_parity.py (plain PyTorch's own cuda-vs-cpu drift, step by step).
#   6. throughput:  bench/gpu/throughput.sh (hptrain vs PyTorch, one worker on the GPU), then
#                   bench/gpu/profile.sh (Nsight Systems' CUDA API and kernel tables of one
#                   ResNet-20 worker, where nsys is installed), both into throughput.log.
#   7. amp:         bench/gpu/throughput.sh with PRECISION=bf16, then fp16 (steps amp-bf16,
#                   amp-fp16): ResNet-20 at batch 128 with spec.precision against PyTorch AMP
#                   (bench/peers/amp_peer.py: torch.autocast, and GradScaler for fp16), the same
#                   model and batch; AMP_STEPS timed steps (600). Into amp-bf16.log, amp-fp16.log.
#   8. exchange:    build-gpu/bin/exchange_bucket_bench (quantize-8 exchange vs fp32 all-reduce).
# A step gets at most its own cap and never more than leaves the later steps their minimum.
# OUT_DIR receives 10 files: summary.txt env.txt build.log check.log (with the kernel benchmark's
# table) integration.log parity.log throughput.log amp-bf16.log amp-fp16.log exchange.log. The
# summary is printed last.
# Environment: BUDGET_S (540), BUILD_DIR (build-gpu), BUILD_TARGETS (build.sh's default list),
# SKIP (steps not to run, e.g. "parity throughput amp-bf16 amp-fp16" to spend the time on the
# tests; the summary lists them as skipped), BENCHMARK_REPETITIONS (check.sh's kernel benchmark,
# 10; 0 skips it), AMP_STEPS (600).
# Exit status: 0 every step passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
if (($# != 1)); then
  echo "usage: bench/gpu/run.sh OUT_DIR" >&2
  exit 1
fi
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BUILD_DIR:-build-gpu}
export BUILD_DIR=$build
budget=${BUDGET_S:-540}
end=$((SECONDS + budget))
summary=()
failed=0
note() { summary+=("$*"); }

# allow CAP RESERVE: seconds for the next step: CAP, but leave RESERVE for the steps after it.
allow() {
  local left=$((end - SECONDS - $2))
  ((left < $1)) || left=$1
  ((left > 5)) || left=5
  echo "$left"
}

# step NAME CAP RESERVE LOG CMD...: runs CMD under timeout, output appended to LOG; a step named
# in SKIP is not run.
step() {
  local name=$1 cap=$2 reserve=$3 log=$4
  shift 4
  if [[ " ${SKIP:-} " == *" $name "* ]]; then
    echo "== $name: skipped (SKIP)" | tee -a "$log"
    note "$(printf '%-12s %-28s' "$name" "skipped (SKIP)")"
    return 0
  fi
  local limit started rc
  limit=$(allow "$cap" "$reserve")
  started=$SECONDS
  echo "== $name (limit ${limit}s): $*" | tee -a "$log"
  timeout -k 5 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local verdict=ok
  ((rc == 124 || rc == 137)) && verdict="TIMED OUT after ${limit}s"
  ((rc != 0 && rc != 124 && rc != 137)) && verdict="FAILED (exit $rc)"
  ((rc != 0)) && failed=1
  note "$(printf '%-12s %-28s %4d s' "$name" "$verdict" $((SECONDS - started)))"
  if ((rc != 0)); then
    while read -r line; do note "  | $line"; done < <(grep -v '^== ' "$log" | tail -n 3 | cut -c1-240)
  fi
  echo "== $name: $verdict in $((SECONDS - started)) s" | tee -a "$log"
  return "$rc"
}

# 1. env ----------------------------------------------------------------------------------------
{
  date -u
  nvidia-smi 2>&1 || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())' 2>&1
  python3 -c 'import importlib.metadata as m; print("nvidia-nccl", m.version([d for d in m.packages_distributions().get("nvidia", []) if "nccl" in d][0]))' 2>&1 || true
  g++ --version | head -1
  cmake --version | head -1
  echo "ninja $(ninja --version)"
  echo "cores $(nproc)"
  free -g | head -2
  du -sh .gpu-prefix 2>&1
  # Whether the pip libtorch exports Gloo symbols of its own (see build.sh).
  torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
  echo "gloo symbols exported by libtorch_cpu.so: $(nm -D --defined-only "$torch_lib/libtorch_cpu.so" 2>/dev/null | grep -c gloo)"
  echo "protobuf symbols exported by libtorch_cpu.so: $(nm -D --defined-only "$torch_lib/libtorch_cpu.so" 2>/dev/null | grep -c google8protobuf)"
} >"$out/env.txt" 2>&1
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
note "gpu: ${gpu:-none (nvidia-smi failed)}"
note "$(grep -m1 '^python' "$out/env.txt")"

# 2. build --------------------------------------------------------------------------------------
: >"$out/build.log"
# shellcheck disable=SC2086  # BUILD_TARGETS is a list
step build 300 230 "$out/build.log" bench/gpu/build.sh ${BUILD_TARGETS:-}
[[ -f $build/configure.log ]] && { echo "== configure log"; cat "$build/configure.log"; } >>"$out/build.log"
while read -r line; do note "  $line"; done < <(grep -E '^build: (phase|built|FAILED|not defined)' "$out/build.log")
if grep -q -E 'error:|CMake Error|FAILED:' "$out/build.log"; then
  echo "== first build errors:"
  grep -m 8 -A 2 -E 'error:|CMake Error' "$out/build.log" | head -n 24 | cut -c1-200
  note "  first errors: $(grep -m 3 -E 'error:|CMake Error' "$out/build.log" | cut -c1-200 | tr '\n' '|')"
fi
# Our programs run with build.sh's library path (run-env); python3 and nvidia-smi without it.
wrap=()
[[ -x $build/run-env ]] && wrap=("$build/run-env")
# Smoke: the binary starts, runs a tiny job on the GPU and exits cleanly (exit codes in the summary).
if [[ -x $build/bin/hptrain ]]; then
  "${wrap[@]}" "$build/bin/hptrain" version >>"$out/build.log" 2>&1
  version_rc=$?
  smoke=(run examples/synthetic-mlp.yaml --quiet --set spec.maxSteps=5 --set spec.device=cuda)
  timeout 60 "${wrap[@]}" "$build/bin/hptrain" "${smoke[@]}" >>"$out/build.log" 2>&1
  smoke_rc=$?
  note "smoke        hptrain version exit $version_rc; 5-step cuda run exit $smoke_rc"
  # Which C++ runtime functions of hptrain bind to the copies libtorch exports (runtime/base/
  # files.h): all bindings resolved at start, those of std:: symbols into libtorch* counted.
  LD_BIND_NOW=1 LD_DEBUG=bindings "${wrap[@]}" "$build/bin/hptrain" version 2>&1 >/dev/null |
    grep -E "binding file [^ ]*/hptrain \[0\] to [^ ]*libtorch[^ ]* \[0\]: .*symbol \`_ZN?K?St" \
    >"$build/std-bindings.txt"
  {
    echo "== hptrain's std:: symbols bound into libtorch: $(wc -l <"$build/std-bindings.txt")"
    sed -E 's/.* to ([^ ]*) .*symbol `([^'"'"']*).*/\1 \2/' "$build/std-bindings.txt" | head -n 20
  } >>"$out/build.log"
  note "bindings     hptrain std:: symbols bound into libtorch: $(wc -l <"$build/std-bindings.txt")"
  # A crash: where, from cuda-gdb (the machine has no gdb; cuda-gdb debugs host code too).
  if ((smoke_rc > 128)) && [[ -x /usr/local/cuda/bin/cuda-gdb ]]; then
    echo "== backtrace of the crashed smoke run" >>"$out/build.log"
    timeout 60 "${wrap[@]}" /usr/local/cuda/bin/cuda-gdb -q -batch -ex "set pagination off" \
      -ex run -ex bt --args "$build/bin/hptrain" "${smoke[@]}" >>"$out/build.log" 2>&1
    while read -r line; do note "  | $line"; done < <(grep -A6 'received signal' "$out/build.log" | head -8)
  fi
fi

# 3. check --------------------------------------------------------------------------------------
: >"$out/check.log"
step check 90 200 "$out/check.log" bench/gpu/check.sh "$build" "$build/gpu-check"
for f in "$build"/gpu-check/*.log; do
  [[ -f $f ]] && { echo "== $f"; cat "$f"; } >>"$out/check.log"
done
note "$(grep -E '^gpu-check:' "$out/check.log" | tail -1)"
while read -r line; do note "  $line"; done < <(grep -E '^nccl_allreduce_check:|^nccl async route:|^\[  (PASSED|FAILED|SKIPPED) |device route' "$out/check.log" | head -30)

# 4. integration --------------------------------------------------------------------------------
: >"$out/integration.log"
# The time held back for the steps after this one: parity, throughput and exchange, or only the
# exchange when the other two are skipped.
# The amp steps' share of what is held back: 60 s each unless skipped.
amp_reserve=0
for precision in bf16 fp16; do
  [[ " ${SKIP:-} " == *" amp-$precision "* ]] || amp_reserve=$((amp_reserve + 60))
done
integration_reserve=$((150 + amp_reserve))
[[ " ${SKIP:-} " == *" parity "* && " ${SKIP:-} " == *" throughput "* ]] &&
  integration_reserve=$((45 + amp_reserve))
if [[ -x $build/tests/integration_cuda_training_test ]]; then
  # The GPU tests; the DevicePath ones need no GPU and run in CI.
  step integration 260 "$integration_reserve" "$out/integration.log" env HPTRAIN_BIN="$PWD/$build/bin" "${wrap[@]}" \
    "$build/tests/integration_cuda_training_test" --gtest_filter='Cuda.*'
  while read -r line; do note "  $line"; done < <(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[ +(OK|FAILED) \]|Failure|max relative difference' "$out/integration.log" | head -30 | cut -c1-240)
else
  echo "integration_cuda_training_test not built" >"$out/integration.log"
  note "integration  not built"
  failed=1
fi

# 5. parity ------------------------------------------------------------------------------------
: >"$out/parity.log"
step parity 40 130 "$out/parity.log" python3 bench/gpu/torch_parity.py
while read -r line; do note "  $line"; done < <(grep -E '^\{"step": (1|20),' "$out/parity.log" | cut -c1-240)

# 6. throughput ---------------------------------------------------------------------------------
: >"$out/throughput.log"
if [[ -x $build/bin/hptrain ]]; then
  step throughput 120 $((25 + amp_reserve)) "$out/throughput.log" env RUN_TIMEOUT=60 \
    bench/gpu/throughput.sh "$build" "$build/throughput"
  for f in "$build"/throughput/*.log "$build"/throughput/throughput.json; do
    [[ -f $f ]] && { echo "== $f"; tail -n 40 "$f"; } >>"$out/throughput.log"
  done
  while read -r line; do note "  $line"; done < <(sed -n '/^model  /,/^throughput:/p' "$out/throughput.log" | grep -v '^throughput:')
else
  echo "hptrain not built" >"$out/throughput.log"
  note "throughput   skipped: hptrain not built"
  failed=1
fi

if [[ -x $build/bin/hptrain ]]; then
  step profile 60 $((15 + amp_reserve)) "$out/throughput.log" env OPTIONAL=1 bench/gpu/profile.sh "$build" \
    "$build/profile"
fi

# 7. amp ---------------------------------------------------------------------------------------
# bf16 and fp16 ResNet-20 (synthetic CIFAR-shaped data) against PyTorch AMP, same model and batch.
amp_left=$amp_reserve
for precision in bf16 fp16; do
  : >"$out/amp-$precision.log"
  if [[ ! -x $build/bin/hptrain ]]; then
    echo "hptrain not built" >"$out/amp-$precision.log"
    note "amp-$precision skipped: hptrain not built"
    continue
  fi
  [[ " ${SKIP:-} " == *" amp-$precision "* ]] || amp_left=$((amp_left - 60))
  step "amp-$precision" 90 $((40 + amp_left)) "$out/amp-$precision.log" env PRECISION="$precision" \
    MODELS=resnet20:128 STEPS="${AMP_STEPS:-600}" RUN_TIMEOUT=40 \
    bench/gpu/throughput.sh "$build" "$build/amp"
  for f in "$build"/amp/*"-$precision"*.log "$build/amp/throughput-$precision.json"; do
    [[ -f $f ]] && { echo "== $f"; tail -n 40 "$f"; } >>"$out/amp-$precision.log"
  done
  while read -r line; do note "  $precision $line"; done < <(sed -n '/^model  /,/^throughput:/p' "$out/amp-$precision.log" | grep -v '^throughput:')
done

# 8. exchange -----------------------------------------------------------------------------------
: >"$out/exchange.log"
if [[ -x $build/bin/exchange_bucket_bench ]]; then
  step exchange 40 0 "$out/exchange.log" "${wrap[@]}" "$build/bin/exchange_bucket_bench" 25 30
  while read -r line; do note "  $line"; done < <(grep -E '^  ' "$out/exchange.log")
else
  echo "exchange_bucket_bench not built" >"$out/exchange.log"
  note "exchange     skipped: not built"
  failed=1
fi

note "total $((SECONDS - (end - budget))) s of ${budget} s; files in $out: $(find "$out" -maxdepth 1 -type f -printf '%f ' | sort)"
printf '%s\n' "${summary[@]}" >"$out/summary.txt"
echo
echo "===== summary ====="
cat "$out/summary.txt"
exit "$failed"
