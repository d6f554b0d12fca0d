#!/usr/bin/env bash
# Installs every Debian 12 package that hptrain's build, tests, demo and benchmarks need.
# Idempotent: packages already installed are skipped, and `apt-get update` runs at most once.
set -euo pipefail

packages=(
  # toolchain (clang: the libFuzzer targets of tests/fuzz)
  build-essential cmake ninja-build ccache pkg-config git clang
  # runtime dependencies; OpenBLAS for libtorch's libblas.so.3, which is otherwise the reference
  # BLAS (slow on CPU; `hptrain version` prints the one in use). The reference BLAS stays
  # installed beside it (the alternative picks OpenBLAS): the tests that compare two programs'
  # parameters within 1e-5 run both on it (tests/integration/python_test.cc), and blas_test.cc
  # switches between the two
  libtorch-dev libgloo-dev libopenblas0-pthread libblas3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libcpp-httplib-dev libyaml-cpp-dev nlohmann-json3-dev libssl-dev zlib1g-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev prometheus procps iproute2
  # data and the PyTorch peer
  dataset-fashion-mnist python3-torch python3-yaml
  # the Python package (python/hptrain): pybind11 and Python's headers
  pybind11-dev python3-dev python3-numpy
  # user data formats (spec.dataset.format imagefolder, filelist, webdataset): JPEG and PNG
  libturbojpeg0-dev libpng-dev
  # the data-loading peer of bench/data (PIL decoding, torchvision transforms)
  python3-pil python3-torchvision
  # deploy checks (tests/deploy)
  python3-jsonschema
  # benchmark report plots
  python3-matplotlib
)
# kubectl, so that the kubectl-based deploy checks (tests/deploy) run instead of skipping on a fresh
# machine. Only where none is on the PATH: a kubectl from another source (Kubernetes' own apt
# repository, the Google Cloud SDK) owns /usr/bin/kubectl too, and installing Debian's beside it
# would fail on that file.
if ! command -v kubectl >/dev/null 2>&1; then
  packages+=(kubernetes-client)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
