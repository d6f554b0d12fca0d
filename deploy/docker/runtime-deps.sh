#!/usr/bin/env bash
# Prints the Debian/Ubuntu packages that provide the shared libraries the given binaries link
# directly (their DT_NEEDED entries), one per line, sorted: what a runtime image must
# `apt-get install` (apt brings their own dependencies). With --unowned it prints instead the
# libraries no package owns (e.g. copied-in vendor libraries), which the image must copy itself.
# Needs ldd, readelf (binutils) and dpkg-query.
#
# Usage: runtime-deps.sh [--unowned] BINARY...
# Libraries the container runtime injects at run time (the NVIDIA driver's) may be missing at
# build time; they are skipped with a note. Any other missing library is an error (exit 1).
set -euo pipefail

mode=packages
if [ "${1:-}" = "--unowned" ]; then
  mode=unowned
  shift
fi
if [ $# -eq 0 ]; then
  echo "usage: $0 [--unowned] BINARY..." >&2
  exit 2
fi
injected=" ${HPTRAIN_INJECTED_LIBS:-libcuda.so.1 libnvidia-ml.so.1} "

# Owner package of one file; dpkg records /lib and /usr/lib paths as installed (merged-/usr
# systems resolve them to the same file), so try the path, its resolved form, with and
# without /usr.
owner() {
  local lib=$1 real candidate
  real=$(readlink -f "$lib")
  for candidate in "$lib" "$real" "/usr$lib" "${lib#/usr}" "/usr$real" "${real#/usr}"; do
    if out=$(dpkg-query -S "$candidate" 2>/dev/null); then
      # "libfoo1:amd64: /usr/lib/..." -> libfoo1 (the first owner; diversions are listed last)
      printf '%s\n' "$out" | grep -v '^diversion' | head -n 1 | cut -d: -f1
      return 0
    fi
  done
  return 1
}

status=0
libs=()
for binary in "$@"; do
  if [ ! -f "$binary" ]; then
    echo "$0: $binary: no such file" >&2
    exit 1
  fi
  needed=" $(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ') "
  while read -r name arrow path _; do
    [[ "$needed" == *" $name "* ]] || continue
    if [ "$arrow" = "=>" ] && [ "$path" = "not" ]; then
      if [[ "$injected" == *" $name "* ]]; then
        echo "$0: $name: not found, injected at run time (skipped)" >&2
      else
        echo "$0: $binary needs $name, which is not installed" >&2
        status=1
      fi
    elif [ "$arrow" = "=>" ] && [ "${path:0:1}" = "/" ]; then
      libs+=("$path")
    fi
  done < <(ldd "$binary")
done
[ $status -eq 0 ] || exit $status

for lib in $(printf '%s\n' "${libs[@]}" | sort -u); do
  if pkg=$(owner "$lib"); then
    if [ "$mode" = packages ]; then echo "$pkg"; fi
  elif [ "$mode" = unowned ]; then
    echo "$lib"
  fi
done | sort -u
