# syntax=docker/dockerfile:1
# hptrain/runtime-cuda: the `hptrain` binary built with HPTRAIN_CUDA=ON (CUDA compression and
# update kernels, the NCCL communicator) for GPU node pools.
#
#   docker build -f deploy/docker/runtime-cuda.Dockerfile -t hptrain/runtime-cuda:0.1.0 .
#
# Base: NVIDIA's CUDA images (nvidia/cuda, cuDNN variant). NVIDIA publishes them for Ubuntu, not
# Debian, so this image is Ubuntu 24.04 based: its archive has the same libraries as Debian 12
# at compatible versions (abseil 20220623, gRPC 1.51, yaml-cpp, cpp-httplib, Gloo, libtorch),
# under the package names listed below, which are scripts/install-deps.sh's build packages.
# The devel stage has nvcc and NCCL (libnccl-dev); the runtime stage has the CUDA runtime,
# cuDNN and libnccl2; the GPU driver (libcuda.so.1) comes from the node through the NVIDIA
# container toolkit at run time.
#
# libtorch here is Ubuntu's CPU build: the trainer keeps its flat buffers in host memory for
# now (spec.device: cuda is refused, runtime/train/trainer.cc), while the kernels and NCCL use
# the GPU directly.
#
# Build args: CUDA_VERSION, UBUNTU (image tag parts), CUDA_ARCHITECTURES (GPU generations to
# compile for: 80 A100, 86 A10/A40, 89 L4/L40, 90 H100; 75 adds T4).
ARG CUDA_VERSION=12.6.3
ARG UBUNTU=ubuntu24.04

# --- build -------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-devel-${UBUNTU} AS build
ARG CUDA_ARCHITECTURES="75;80;86;89;90"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build ccache pkg-config git binutils \
      libtorch-dev libgloo-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
      libcpp-httplib-dev libyaml-cpp-dev nlohmann-json3-dev libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN BUILD_DIR=/build BUILD_TYPE=Release HPTRAIN_CUDA=ON \
      CMAKE_ARGS="-DHPTRAIN_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
      scripts/build.sh \
 && deploy/docker/runtime-deps.sh /build/bin/hptrain > /build/runtime-packages.txt \
 && cat /build/runtime-packages.txt

# --- runtime -----------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-${UBUNTU}
COPY --from=build /build/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=build /build/bin/hptrain /usr/local/bin/hptrain
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/hptrain"]
CMD ["--help"]
