# syntax=docker/dockerfile:1
# hptrain/runtime-cuda: the `hptrain` binary built with HPTRAIN_CUDA=ON (CUDA compression and
# update kernels, the NCCL communicator) against a CUDA build of libtorch, for GPU node pools:
# its workers train on the GPU (spec.device: cuda, or auto on a pod given one).
#
#   scripts/images.sh runtime-cuda    # hptrain/runtime-cuda:<VERSION>; --push REGISTRY, --tag T
#
# (`scripts/images.sh --dry-run` prints the `docker build` it runs; VERSION holds the version.)
#
# Base: NVIDIA's CUDA images (nvidia/cuda, cuDNN variant). NVIDIA publishes them for Ubuntu, not
# Debian, so this image is Ubuntu 24.04 based: its archive has the same libraries as Debian 12
# at compatible versions (abseil 20220623, gRPC 1.51, yaml-cpp, cpp-httplib, Gloo), under the
# package names listed below, which are scripts/install-deps.sh's build packages less libtorch.
# The devel stage has nvcc and NCCL (libnccl-dev); the runtime stage has the CUDA runtime,
# cuDNN and libnccl2; the GPU driver (libcuda.so.1) comes from the node through the NVIDIA
# container toolkit at run time.
#
# libtorch is PyTorch's own CUDA build (Ubuntu's libtorch-dev is CPU only): the C++11-ABI
# "shared-with-deps" archive for the image's CUDA minor version, unpacked at /opt/libtorch in
# both stages (the binary finds it through its RUNPATH). No package owns those libraries, so
# runtime-deps.sh does not list them; the runtime stage copies the directory instead. The
# archive is the one download of the build besides the base images and Ubuntu's packages.
#
# Build args: CUDA_VERSION, UBUNTU (image tag parts), CUDA_ARCHITECTURES (GPU generations to
# compile for: 80 A100, 86 A10/A40, 89 L4/L40, 90 H100; 75 adds T4), LIBTORCH_VERSION and
# LIBTORCH_CUDA (the archive's version and CUDA tag, which must match CUDA_VERSION's major.minor:
# cu126 for 12.6), LIBTORCH_URL (the whole address, e.g. a mirror inside the cluster's network).
ARG CUDA_VERSION=12.6.3
ARG UBUNTU=ubuntu24.04
ARG LIBTORCH_VERSION=2.7.1
ARG LIBTORCH_CUDA=cu126

# --- build -------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-devel-${UBUNTU} AS build
ARG CUDA_ARCHITECTURES="75;80;86;89;90"
ARG LIBTORCH_VERSION
ARG LIBTORCH_CUDA
ARG LIBTORCH_URL=https://download.pytorch.org/libtorch/${LIBTORCH_CUDA}/libtorch-cxx11-abi-shared-with-deps-${LIBTORCH_VERSION}%2B${LIBTORCH_CUDA}.zip
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build ccache pkg-config git binutils curl ca-certificates unzip \
      libgloo-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
      libcpp-httplib-dev libyaml-cpp-dev nlohmann-json3-dev libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
RUN curl -fsSL -o /tmp/libtorch.zip "${LIBTORCH_URL}" \
 && unzip -q /tmp/libtorch.zip -d /opt \
 && rm /tmp/libtorch.zip \
 && test -f /opt/libtorch/lib/libtorch_cuda.so
WORKDIR /src
COPY . .
RUN BUILD_DIR=/build BUILD_TYPE=Release HPTRAIN_CUDA=ON \
      CMAKE_ARGS="-DHPTRAIN_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES} -DCMAKE_PREFIX_PATH=/opt/libtorch" \
      scripts/build.sh \
 && readelf -d /build/bin/hptrain | grep -q 'libtorch_cuda.so' \
 && deploy/docker/runtime-deps.sh /build/bin/hptrain > /build/runtime-packages.txt \
 && cat /build/runtime-packages.txt

# --- runtime -----------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-${UBUNTU}
COPY --from=build /build/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=build /opt/libtorch/lib /opt/libtorch/lib
COPY --from=build /build/bin/hptrain /usr/local/bin/hptrain
# The shipped MP² predictor, at the path examples/fashion-mnist-mp2.yaml and the CRD name.
COPY examples/predictors/lenet5-fashion-mnist.mp2p /usr/share/hptrain/predictors/
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/hptrain"]
CMD ["--help"]
