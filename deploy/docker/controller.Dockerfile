# syntax=docker/dockerfile:1
# hptrain/controller: the Kubernetes operator (hptrain-controller). No libtorch at run time.
#
#   scripts/images.sh controller    # hptrain/controller:<VERSION>; --push REGISTRY, --tag T
#
# (`scripts/images.sh --dry-run` prints the `docker build` it runs; VERSION holds the version.)
#
# The build stage installs the repository's full dependency list (scripts/install-deps.sh, the
# one list developers and CI use) even though the controller needs only part of it; only the
# libraries hptrain-controller links reach the runtime stage.
ARG DEBIAN_IMAGE=debian:12-slim

# --- build -------------------------------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN BUILD_DIR=/build BUILD_TYPE=Release HPTRAIN_CUDA=OFF \
      CMAKE_ARGS="-DHPTRAIN_TESTS=OFF -DHPTRAIN_TORCH=OFF" scripts/build.sh \
 && test -x /build/bin/hptrain-controller \
 && deploy/docker/runtime-deps.sh /build/bin/hptrain-controller > /build/runtime-packages.txt \
 && cat /build/runtime-packages.txt

# --- runtime -----------------------------------------------------------------------------------
FROM ${DEBIAN_IMAGE}
COPY --from=build /build/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=build /build/bin/hptrain-controller /usr/local/bin/hptrain-controller
# Matches deploy/controller/deployment.yaml (runAsNonRoot, readOnlyRootFilesystem): the
# controller writes nothing to disk.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/hptrain-controller"]
