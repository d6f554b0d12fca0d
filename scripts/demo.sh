#!/usr/bin/env bash
# Quick start 1: installs dependencies, builds, and trains LeNet-5 on the real Fashion-MNIST with
# 4 local workers (examples/fashion-mnist.yaml). Extra arguments go to `hptrain run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/bin/hptrain run examples/fashion-mnist.yaml --output-json build/demo-summary.json "$@"
