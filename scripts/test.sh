#!/usr/bin/env bash
# Quick start 2: installs dependencies, builds (with the CUDA code whenever nvcc is present) and
# runs the whole test suite with CTest. Tests that need a GPU skip with a printed reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
status=0
ctest --output-on-failure --timeout 900 -j "${TEST_JOBS:-2}" "$@" || status=$?
# CTest lists skipped tests without their reason; print the reason each test gave.
log=Testing/Temporary/LastTest.log
if grep -q ": Skipped$" "$log" 2>/dev/null; then
  echo "Skipped tests (not counted as passed) and their reasons:"
  awk '/: Skipped$/ { getline reason; next_reason = reason; next }
       /^\[  SKIPPED \] [A-Za-z].* \(/ { printf "  %s: %s\n", $4, next_reason }' "$log"
fi
exit $status
