#!/usr/bin/env bash
# deploy/docker/runtime-deps.sh, the step that decides what the runtime images install: on a
# binary of this build it names the packages of the libraries the binary links (yaml-cpp,
# libstdc++, libc), finds no unowned library, and fails on a missing file. And the package lists
# put OpenBLAS behind libtorch's libblas.so.3.
# Usage: runtime_deps_test.sh SOURCE_DIR BINARY. Exit 77 (skip) without ldd/readelf/dpkg-query.
set -euo pipefail
src=$1
binary=$2
for tool in ldd readelf dpkg-query; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed"
    exit 77
  fi
done
script="$src/deploy/docker/runtime-deps.sh"
passed=0
failed=0
check() {  # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAILED: $name"
    failed=$((failed + 1))
  fi
}

packages=$("$script" "$binary")
echo "packages for $(basename "$binary"): $(echo $packages)"
check "names libc6" grep -qx libc6 <<<"$packages"
check "names libstdc++6" grep -qx 'libstdc++6' <<<"$packages"
check "names the yaml-cpp runtime package" grep -q '^libyaml-cpp[0-9.]*$' <<<"$packages"
check "names no -dev package" bash -c '! grep -q -- "-dev$" <<<"$1"' _ "$packages"
unowned=$("$script" --unowned "$binary")
check "finds no unowned library" test -z "$unowned"
check "fails on a missing file" bash -c '! "$1" /nonexistent/binary 2>/dev/null' _ "$script"
check "fails without arguments" bash -c '! "$1" 2>/dev/null' _ "$script"

# OpenBLAS, not the reference BLAS, behind libtorch's libblas.so.3: the developer list installs
# it, and so does the runtime image's last stage (after its last FROM), which then checks it.
check "install-deps.sh installs OpenBLAS" \
  grep -Eq '^[^#]*\blibopenblas0-pthread\b' "$src/scripts/install-deps.sh"
runtime_stage=$(awk '/^FROM /{stage=""} {stage=stage $0 "\n"} END{printf "%s", stage}' \
  "$src/deploy/docker/runtime.Dockerfile")
check "the runtime image installs OpenBLAS" grep -Eq '^[^#]*\blibopenblas0-pthread\b' \
  <<<"$runtime_stage"
check "the runtime image checks the BLAS it loads" grep -q "version | grep -q '^blas: openblas'" \
  <<<"$runtime_stage"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
