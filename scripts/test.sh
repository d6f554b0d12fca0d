#!/usr/bin/env bash
# Quick start 2: installs dependencies, builds (with the CUDA code whenever nvcc is present) and
# runs the whole test suite with CTest. Tests that need a GPU skip with a printed reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

# The decoders of untrusted bytes and the compression kernels again under AddressSanitizer: a small
# build of just those targets (no libtorch, no CUDA).
asan_targets="comm_encoded_tensor_test comm_encoded_tensor_proto_test comm_encoded_tensor_fuzz_test
  comm_compressed_allreduce_test kernels_quantize_test kernels_cast_test kernels_topk_test
  kernels_dgc_test"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHPTRAIN_ASAN=ON -DHPTRAIN_TORCH=OFF \
  -DHPTRAIN_CUDA=OFF >/dev/null
echo "build: AddressSanitizer build of the decoder and kernel tests"
# shellcheck disable=SC2086
ninja -C build-asan -j "$(nproc)" $asan_targets

# The libFuzzer targets (tests/fuzz), when clang is installed: each seed corpus is replayed once
# under AddressSanitizer (CTest label fuzz); bench/fuzz runs them for longer.
fuzz=0
if command -v clang++ >/dev/null 2>&1; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHPTRAIN_FUZZ=ON -DHPTRAIN_TORCH=OFF -DHPTRAIN_CUDA=OFF >/dev/null
  echo "build: libFuzzer targets (clang, AddressSanitizer)"
  ninja -C build-fuzz -j "$(nproc)" hptrain_fuzzers
  fuzz=1
else
  echo "build: no clang++, so no fuzz corpus replays (apt-get install clang)"
fi

cd build
status=0
ctest --output-on-failure --timeout 900 -j "${TEST_JOBS:-2}" "$@" || status=$?
echo "AddressSanitizer run:"
ctest --test-dir ../build-asan --output-on-failure --timeout 900 -j "${TEST_JOBS:-2}" \
  -R 'Encoded|Quantiz|Cast|TopK|Dgc|Compressed' "$@" || status=$?
if [ "$fuzz" = 1 ]; then
  echo "Fuzz corpus replays (AddressSanitizer):"
  ctest --test-dir ../build-fuzz --output-on-failure --timeout 300 -j "${TEST_JOBS:-2}" \
    -L fuzz "$@" || status=$?
fi
# CTest lists skipped tests without their reason; print the reason each test gave.
log=Testing/Temporary/LastTest.log
if grep -q ": Skipped$" "$log" 2>/dev/null; then
  echo "Skipped tests (not counted as passed) and their reasons:"
  awk '/: Skipped$/ { getline reason; next_reason = reason; next }
       /^\[  SKIPPED \] [A-Za-z].* \(/ { printf "  %s: %s\n", $4, next_reason }' "$log"
fi
exit $status
