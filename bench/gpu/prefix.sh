#!/usr/bin/env bash
# Builds .gpu-prefix/: the Debian 12 packages that the runtime build needs on a GPU machine that
# has CUDA, libtorch (pip) and a compiler but none of our -dev packages and no network. The
# prefix travels to that machine with the working tree; bench/gpu/build.sh builds against it.
#
#   bench/gpu/prefix.sh [PREFIX=.gpu-prefix]
#
# Runs on Debian 12 (apt-get download needs no root; apt-get update does). Downloads the packages
# below with `apt-get download`, extracts them with `dpkg -x`, merges /lib into /usr/lib, makes
# absolute symlinks relative, rewrites pkg-config files to be relocatable (prefix=${pcfiledir}/..),
# trims docs, man pages and static libraries (GTest/GMock/benchmark_main keep theirs: they only
# ship static), then checks that protoc, grpc_cpp_plugin and every carried shared library find
# all their libraries inside the prefix or in glibc/libstdc++/libgcc_s. Not included: libtorch,
# CUDA and NCCL (the machine's own are used).
# Exit status: 0 prefix complete, 1 a download failed or a library does not resolve.
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix=${1:-.gpu-prefix}
debs=${HPTRAIN_GPU_DEBS:-/tmp/hptrain-gpu-debs}

packages=(
  # gRPC + protobuf (libraries, headers, CMake config, protoc and the gRPC plugin)
  libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler
  libabsl-dev libabsl20220623
  libre2-dev libre2-9 libc-ares-dev libc-ares2 libssl-dev libssl3 zlib1g-dev zlib1g
  # Gloo and what libgloo links (hiredis, ibverbs with libnl)
  libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200
  # HTTP (metrics, dashboards), YAML job specs, JSON
  libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1
  libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  # pkg-config for cpp-httplib (the device image may have none)
  pkgconf-bin libpkgconf3
)

mkdir -p "$debs"
missing=()
for p in "${packages[@]}"; do
  compgen -G "$debs/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "prefix: downloading ${#missing[@]} packages into $debs"
  if ! (cd "$debs" && apt-get download -q "${missing[@]}" >/dev/null); then
    echo "prefix: apt-get download failed; running apt-get update and retrying"
    apt-get update -qq
    (cd "$debs" && apt-get download -q "${missing[@]}" >/dev/null)
  fi
fi

rm -rf "$prefix"
mkdir -p "$prefix"
for p in "${packages[@]}"; do
  deb=$(compgen -G "$debs/${p}_*.deb" | sort | tail -1)
  dpkg -x "$deb" "$prefix"
done

# Debian 12 is usr-merged, but some packages still install into /lib: move it under /usr/lib.
if [[ -d $prefix/lib ]]; then
  cp -a "$prefix/lib/." "$prefix/usr/lib/"
  rm -rf "${prefix:?}/lib"
fi
# Absolute symlinks (/lib/x86_64-linux-gnu/libz.so.1.2.13) would point at the machine's files:
# make them relative inside the prefix.
while IFS= read -r link; do
  target=$(readlink "$link")
  target=${target#/}
  target=usr/${target#usr/}
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$prefix/$target")" "$link"
done < <(find "$prefix" -type l -lname '/*')

# Trim: documentation, and static archives nothing links (only GTest, GMock and benchmark_main
# come without a shared library).
rm -rf "$prefix"/usr/share/{doc,man,info,lintian,bug,gdb} "$prefix"/usr/src
find "$prefix" -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' \
  ! -name 'libbenchmark_main.a' -delete
# Of the programs, the build runs protoc, grpc_cpp_plugin and pkgconf. gRPC's other language
# plugins and its "unsecure" libraries are never used, but gRPC's CMake targets file checks that
# they exist: keep empty files in their place (5 MB less to carry).
for f in "$prefix"/usr/bin/grpc_*_plugin \
  "$prefix"/usr/lib/x86_64-linux-gnu/lib{grpc_unsecure,grpc++_unsecure}.so.*.*; do
  [[ $f == */grpc_cpp_plugin ]] || : >"$f"
done
[[ -e $prefix/usr/bin/pkg-config ]] || ln -s pkgconf "$prefix/usr/bin/pkg-config"

# Debian 12's Gloo headers use uint8_t & co. without <cstdint>, which GCC 12's libstdc++ pulled
# in through other headers and GCC 13's (the GPU machine's) does not: add the include.
while IFS= read -r h; do
  grep -qE '#include <(cstdint|stdint\.h|cinttypes)>' "$h" ||
    sed -i '0,/^#pragma once/s//#pragma once\n\n#include <cstdint>/' "$h"
done < <(grep -rlE '\bu?int(8|16|32|64)_t\b' "$prefix/usr/include/gloo")

# pkg-config files say prefix=/usr: make them relative to their own directory, so that
# `pkg-config --cflags cpp-httplib` points into the prefix wherever it lies.
while IFS= read -r pc; do
  rel=$(realpath -m --relative-to="$(dirname "$pc")" "$prefix/usr")
  # re2.pc has no prefix variable of its own.
  grep -q '^prefix=' "$pc" || sed -i "1i prefix=/usr" "$pc"
  # shellcheck disable=SC2016  # ${prefix} is pkg-config's variable, not the shell's
  sed -i -E -e "s#^prefix=/usr/?\$#prefix=\${pcfiledir}/$rel#" \
    -e 's#(=|-I|-L)/usr(/|$)#\1${prefix}\2#g' "$pc"
done < <(find "$prefix" -name '*.pc')
# pkg-config files that name /usr by any other spelling would escape the prefix.
if grep -l -E '(^|[ =])/usr' -r "$prefix" --include='*.pc'; then
  echo "prefix: the pkg-config files above still name /usr" >&2
  exit 1
fi

# Resolution check: every ELF program/library in the prefix, with only the prefix on the library
# path, must find its libraries there or in the base system every glibc 2.39 machine has.
libpath="$PWD/$prefix/usr/lib/x86_64-linux-gnu:$PWD/$prefix/usr/lib"
base='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64|linux-vdso)\.so'
bad=0
while IFS= read -r elf; do
  file -b "$elf" | grep -q '^ELF' || continue
  while read -r lib _ path _; do
    [[ $lib =~ $base ]] && continue
    if [[ $path == "not" ]]; then
      echo "prefix: $elf: $lib not found" >&2
      bad=1
    elif [[ $path != "$PWD/$prefix/"* ]]; then
      echo "prefix: $elf: $lib resolves outside the prefix ($path)" >&2
      bad=1
    fi
  done < <(LD_LIBRARY_PATH=$libpath ldd "$elf" 2>/dev/null | grep '=>')
done < <(find "$prefix/usr/bin" "$prefix/usr/lib" -type f \( -perm -u+x -o -name '*.so*' \))
if ((bad)); then
  echo "prefix: some libraries do not resolve inside the prefix (add their packages above)" >&2
  exit 1
fi

# The programs run from the prefix: generate one of our protos with protoc and the gRPC plugin.
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
LD_LIBRARY_PATH=$libpath "$prefix/usr/bin/protoc" --proto_path=. --cpp_out="$gen" \
  --grpc_out="$gen" --plugin=protoc-gen-grpc="$prefix/usr/bin/grpc_cpp_plugin" \
  proto/hptrain/v1/coordinator.proto
echo "prefix: $(LD_LIBRARY_PATH=$libpath "$prefix/usr/bin/protoc" --version) and grpc_cpp_plugin" \
  "generated $(find "$gen" -name '*.cc' | wc -l) files"

# Configure check: a CPU-only, torch-less configure with this machine's /usr hidden from CMake's
# searches must find every dependency in the prefix, and no compile or link line may name /usr or
# /lib (build.sh passes the same arguments, from prefix_env.sh, on the GPU machine).
(
  # shellcheck source=bench/gpu/prefix_env.sh
  source bench/gpu/prefix_env.sh "$prefix"
  cmake -S . -B "$gen/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHPTRAIN_TORCH=OFF \
    -DHPTRAIN_CUDA=OFF -DCMAKE_IGNORE_PREFIX_PATH=/usr "${HPTRAIN_PREFIX_CMAKE_ARGS[@]}" \
    >"$gen/configure.log" 2>&1
) || { tail -20 "$gen/configure.log" >&2; echo "prefix: configure check failed" >&2; exit 1; }
grep -E '^(gRPC|absl|yaml-cpp|GTest|benchmark|nlohmann_json)_DIR:|^(GLOO_LIBRARY|Protobuf_LIBRARY_RELEASE|Protobuf_PROTOC_EXECUTABLE|OPENSSL_SSL_LIBRARY|ZLIB_LIBRARY_RELEASE|pkgcfg_lib_CPP_HTTPLIB_cpp-httplib):' \
  "$gen/build/CMakeCache.txt" | sed 's/^/prefix:   /'
leaks=$(grep -oE '(^|[ ;:"=]|-I|-L|-isystem )/(usr|lib)/[^ ;:"]*' "$gen/build/build.ninja" |
  grep -vE '/usr/bin/(cmake|ctest|c\+\+|g\+\+|cc|gcc)$|/usr/share/cmake-' | sort -u || true)
if [[ -n $leaks ]]; then
  echo "prefix: the configured build still uses files outside the prefix:" >&2
  echo "$leaks" | head -20 >&2
  exit 1
fi
echo "prefix: configure check passed (every dependency resolved into $prefix)"

bytes=$(du -sb "$prefix" | cut -f1)
echo "prefix: $prefix holds $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB" \
  "($bytes bytes; carry it as \"${prefix#./}\")"
