#!/usr/bin/env bash
# Quick start 2: installs dependencies, builds (with the CUDA code whenever nvcc is present) and
# runs the whole test suite with CTest. Tests that need a GPU skip with a printed reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 -j "${TEST_JOBS:-2}" "$@"
