# syntax=docker/dockerfile:1
# hptrain/runtime: the `hptrain` binary (ps, worker, run) on CPU, with Debian's libtorch and Gloo.
# The image every TrainingJob pod runs unless its template names another.
#
#   scripts/images.sh runtime    # hptrain/runtime:<VERSION>; --push REGISTRY, --tag T
#
# (`scripts/images.sh --dry-run` prints the `docker build` it runs; VERSION holds the version.)
#
# Build args: DEBIAN_IMAGE (the Debian 12 base of both stages), WITH_FASHION_MNIST=1 (bundle
# Debian's dataset-fashion-mnist, the examples' data set, at /usr/share/datasets/fashion-mnist;
# 0 leaves data sets to volumes).
ARG DEBIAN_IMAGE=debian:12-slim

# --- build: the repository's own scripts, as on a developer machine ----------------------------
FROM ${DEBIAN_IMAGE} AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN BUILD_DIR=/build BUILD_TYPE=Release HPTRAIN_CUDA=OFF CMAKE_ARGS="-DHPTRAIN_TESTS=OFF" \
      scripts/build.sh \
 && deploy/docker/runtime-deps.sh /build/bin/hptrain > /build/runtime-packages.txt \
 && cat /build/runtime-packages.txt

# --- runtime: the binary and exactly the libraries it links ------------------------------------
# Plus OpenBLAS: Debian's libtorch reaches BLAS through the libblas.so.3 alternative, which apt
# would otherwise fill with the reference BLAS (libblas3), slower for CPU training; OpenBLAS's
# alternative has the higher priority. The RUN after the binary's COPY fails the build if the
# binary loads another BLAS.
FROM ${DEBIAN_IMAGE}
ARG WITH_FASHION_MNIST=1
COPY --from=build /build/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && extra=$([ "${WITH_FASHION_MNIST}" = 1 ] && echo dataset-fashion-mnist || true) \
 && xargs -a /tmp/runtime-packages.txt \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libopenblas0-pthread $extra \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=build /build/bin/hptrain /usr/local/bin/hptrain
RUN /usr/local/bin/hptrain version && /usr/local/bin/hptrain version | grep -q '^blas: openblas'
# The shipped MP² predictor, at the path examples/fashion-mnist-mp2.yaml and the CRD name.
COPY examples/predictors/lenet5-fashion-mnist.mp2p /usr/share/hptrain/predictors/
# Non-root; the pod's securityContext may pick another uid, nothing here depends on it.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/hptrain"]
CMD ["--help"]
