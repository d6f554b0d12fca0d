#!/usr/bin/env bash
# Configures and builds hptrain into build/ (binaries in build/bin, tests in build/tests).
# Incremental: re-running rebuilds only what changed (ccache also caches across clean builds).
# Environment: BUILD_DIR (default build), BUILD_TYPE (default Release), HPTRAIN_CUDA (AUTO|ON|OFF),
# JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DHPTRAIN_CUDA="${HPTRAIN_CUDA:-AUTO}" \
  ${CMAKE_ARGS:-} >/dev/null
echo "build: compiling into $build_dir (jobs=$jobs)"
ninja -C "$build_dir" -j "$jobs"
