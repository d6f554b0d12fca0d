#!/usr/bin/env bash
# Builds hptrain's container images from deploy/docker/<image>.Dockerfile, with the repository
# root as the build context, tagged with the release version in VERSION (the version the chart's
# appVersion and `hptrain version` carry; tests/deploy/version_test.py checks they agree).
#
# usage: scripts/images.sh [IMAGE...] [--tag TAG] [--push REGISTRY] [--build-arg NAME=VALUE]...
#                          [--dry-run]
#   IMAGE        runtime, runtime-cuda or controller; all three when none is named
#   --tag        the images' tag (default: the contents of VERSION)
#   --push       name the images REGISTRY/hptrain/<image>:TAG and push them after building
#                (e.g. --push registry.example.com/ml); the chart's image.repository and
#                runtime.image.repository are then REGISTRY/hptrain/controller and .../runtime
#   --build-arg  passed to every build (e.g. CUDA_ARCHITECTURES=90 for runtime-cuda)
#   --dry-run    print the commands instead of running them; no container engine needed
#
# The engine is docker, else podman (whichever is on the PATH). Each Dockerfile's build context
# is filtered by deploy/docker/<image>.Dockerfile.dockerignore: BuildKit finds it beside the
# Dockerfile, podman is given it with --ignorefile.
# Exit status: 0 built (and pushed), 2 bad usage, 1 no engine or a failed build or push.
# Only bash builtins run besides the engine, so the tests can put a stand-in engine on the PATH.
set -euo pipefail

readonly kImages=(runtime runtime-cuda controller)
me=scripts/images.sh

usage() {
  printf '%s\n' \
    "usage: $me [IMAGE...] [--tag TAG] [--push REGISTRY] [--build-arg NAME=VALUE]... [--dry-run]" \
    "  IMAGE        runtime, runtime-cuda or controller (default: all three)" \
    "  --tag        image tag (default: the contents of VERSION)" \
    "  --push       tag as REGISTRY/hptrain/IMAGE:TAG and push after building" \
    "  --build-arg  passed to every build" \
    "  --dry-run    print the engine commands without running them"
}

fail_usage() {  # one line naming the problem, exit 2
  echo "$me: $1 (see $me --help)" >&2
  exit 2
}

script_dir=.
[[ ${BASH_SOURCE[0]} != */* ]] || script_dir=${BASH_SOURCE[0]%/*}
cd "$script_dir/.."
if [ ! -f VERSION ]; then
  echo "$me: VERSION not found in $PWD" >&2
  exit 1
fi
read -r version <VERSION || true

images=()
tag=$version
registry=""
build_args=()
dry_run=0
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --dry-run) dry_run=1 ;;
    --tag | --push | --build-arg)
      [ $# -ge 2 ] && [ -n "$2" ] || fail_usage "$1 needs a value"
      case $1 in
        --tag) tag=$2 ;;
        --push) registry=${2%/} ;;
        --build-arg) build_args+=(--build-arg "$2") ;;
      esac
      shift ;;
    --tag=* | --push=* | --build-arg=*)
      value=${1#*=}
      [ -n "$value" ] || fail_usage "${1%%=*} needs a value"
      case $1 in
        --tag=*) tag=$value ;;
        --push=*) registry=${value%/} ;;
        --build-arg=*) build_args+=(--build-arg "$value") ;;
      esac ;;
    -*) fail_usage "unknown flag $1" ;;
    *)
      known=0
      for image in "${kImages[@]}"; do [ "$1" = "$image" ] && known=1; done
      [ $known = 1 ] || fail_usage "unknown image \"$1\" (runtime, runtime-cuda or controller)"
      images+=("$1") ;;
  esac
  shift
done
[ ${#images[@]} -gt 0 ] || images=("${kImages[@]}")

# Docker's rule for a tag; a VERSION that breaks it would fail every build late.
[[ $tag =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] ||
  fail_usage "tag \"$tag\" is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*)"
if [ -n "$registry" ]; then
  [[ $registry != *://* ]] ||
    fail_usage "--push takes a registry host and path, not a URL: $registry"
  [[ $registry =~ ^[a-z0-9][a-z0-9._:/-]*$ ]] ||
    fail_usage "--push \"$registry\" is not a registry name (lowercase host[:port][/path])"
fi
for arg in "${build_args[@]}"; do
  [ "$arg" = --build-arg ] || [[ $arg == [A-Za-z_]*=* ]] ||
    fail_usage "--build-arg takes NAME=VALUE, not \"$arg\""
done

engine=""
if command -v docker >/dev/null 2>&1; then
  engine=docker
elif command -v podman >/dev/null 2>&1; then
  engine=podman
elif [ $dry_run = 1 ]; then
  engine=docker
else
  echo "$me: neither docker nor podman is on the PATH; install one (or use --dry-run)" >&2
  exit 1
fi


# A client without a daemon, or docker without buildx, would fail each build with a longer story.
if [ $dry_run = 0 ]; then
  if ! "$engine" info >/dev/null 2>&1; then
    echo "$me: $engine is installed but \`$engine info\` fails: is its daemon running?" >&2
    exit 1
  fi
  if [ $engine = docker ] && ! docker buildx version >/dev/null 2>&1; then
    echo "$me: docker has no buildx (BuildKit), which the Dockerfiles need;" \
      "install docker-buildx" >&2
    exit 1
  fi
fi

run() {  # prints the command; runs it unless --dry-run
  echo "+ $*"
  [ $dry_run = 1 ] || "$@"
}

# The Dockerfiles start with `# syntax=docker/dockerfile:1`, which needs BuildKit (the default
# from Docker 23 on; this turns it on for older ones).
[ $engine = podman ] || export DOCKER_BUILDKIT=1
names=()
for image in "${images[@]}"; do
  dockerfile=deploy/docker/$image.Dockerfile
  [ -f "$dockerfile" ] || { echo "$me: $dockerfile not found" >&2; exit 1; }
  name=hptrain/$image:$tag
  [ -z "$registry" ] || name=$registry/$name
  ignore=()
  [ $engine = docker ] || ignore=(--ignorefile "$dockerfile.dockerignore")
  run "$engine" build --file "$dockerfile" "${ignore[@]}" --tag "$name" \
    --label "org.opencontainers.image.version=$tag" "${build_args[@]}" .
  names+=("$name")
done
if [ -n "$registry" ]; then
  for name in "${names[@]}"; do run "$engine" push "$name"; done
fi
if [ $dry_run = 1 ]; then
  echo "images: dry run, nothing built: ${names[*]}"
else
  echo "images: built${registry:+ and pushed} ${names[*]}"
fi
