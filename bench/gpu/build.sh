#!/usr/bin/env bash
# CUDA build for the GPU machine: CUDA toolkit, pip torch and pip NCCL there, every other
# dependency from the carried prefix (bench/gpu/prefix.sh). Configures BUILD_DIR with Ninja,
# Release, sm_90, and builds only the given targets.
#
#   bench/gpu/build.sh [TARGET...]
#
# Environment: BUILD_DIR (build-gpu), HPTRAIN_GPU_PREFIX (.gpu-prefix), PYTHON (python3),
# JOBS (16). Targets that the configured build does not define (a test whose source is not
# there yet) are reported and skipped; the others are built with `ninja -k 0`, so one broken
# target does not stop the rest. Prints the seconds of each phase. The programs need the prefix
# and NCCL on LD_LIBRARY_PATH: source BUILD_DIR/env.sh, or run them as BUILD_DIR/run-env CMD....
# Exit status: 0 every requested target built, 1 configure failed or a target failed to build
# or was not defined, 2 the machine lacks nvcc / torch / NCCL.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build=${BUILD_DIR:-build-gpu}
prefix=${HPTRAIN_GPU_PREFIX:-.gpu-prefix}
python=${PYTHON:-python3}
jobs=${JOBS:-16}
default_targets=(
  hptrain kernels_quantize_cuda_test kernels_cast_cuda_test kernels_topk_cuda_test
  kernels_update_cuda_test optim_device_test comm_nccl_test sync_device_codecs_test
  nccl_allreduce_check hptrain-kernels-cuda-benchmark integration_cuda_training_test
  exchange_bucket_bench sync_device_strategies_test sync_device_scale_test
  hptrain_python_package integration_python_test
)
if (($#)); then targets=("$@"); else targets=("${default_targets[@]}"); fi

phase_start=$SECONDS
phase() {  # phase NAME: print the seconds since the previous phase
  echo "build: phase $1: $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

if [[ ! -d $prefix/usr/lib ]]; then
  echo "build: no dependency prefix at $prefix (run bench/gpu/prefix.sh where apt works)" >&2
  exit 2
fi
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [[ ! -x $nvcc ]]; then
  echo "build: no nvcc at $nvcc (set CUDACXX)" >&2
  exit 2
fi
if ! torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>&1); then
  echo "build: $python cannot import torch: $torch_prefix" >&2
  exit 2
fi
# NCCL from the pip package nvidia-nccl-cu13 (nvidia/nccl/{include,lib}). Its library is
# libnccl.so.2 without an unversioned link: make one in the build directory for find_library.
nccl_root=$("$python" -c 'import nvidia.nccl, os; f = getattr(nvidia.nccl, "__file__", None); print(os.path.dirname(f) if f else list(nvidia.nccl.__path__)[0])' 2>/dev/null)
if [[ -z $nccl_root || ! -f $nccl_root/include/nccl.h ]]; then
  nccl_root=""
  for d in /usr/local/cuda /usr; do  # a system NCCL, if the pip one is missing
    [[ -f $d/include/nccl.h ]] && nccl_root=$d && break
  done
fi
if [[ -z $nccl_root ]]; then
  echo "build: no NCCL (pip nvidia-nccl-cu13 or nccl.h under /usr/local/cuda, /usr)" >&2
  exit 2
fi
nccl_lib=""
for f in "$nccl_root"/lib/libnccl.so "$nccl_root"/lib/libnccl.so.2 "$nccl_root"/lib64/libnccl.so \
  "$nccl_root"/lib/x86_64-linux-gnu/libnccl.so; do
  [[ -e $f ]] && nccl_lib=$f && break
done
if [[ -z $nccl_lib ]]; then
  echo "build: nccl.h in $nccl_root/include but no libnccl.so(.2) beside it" >&2
  exit 2
fi
mkdir -p "$build/nccl-link"
build=$(cd "$build" && pwd)
# Both names: the link step looks for libnccl.so, the programs' run path for libnccl.so.2.
ln -sfn "$(realpath "$nccl_lib")" "$build/nccl-link/libnccl.so"
ln -sfn "$(realpath "$nccl_lib")" "$build/nccl-link/libnccl.so.2"
nccl_lib_dir=$(dirname "$(realpath "$nccl_lib")")

# shellcheck source=bench/gpu/prefix_env.sh
HPTRAIN_EXTRA_PREFIX_PATH=$torch_prefix source bench/gpu/prefix_env.sh "$prefix"
export LD_LIBRARY_PATH=$nccl_lib_dir:$LD_LIBRARY_PATH
# The programs need LD_LIBRARY_PATH (their run path covers only their direct libraries, not
# what those load); python3 and torch must not get it (the prefix's libssl/libz would shadow the
# machine's). So: env.sh to source, and run-env to wrap one command.
cat >"$build/env.sh" <<EOF
# Environment for running the programs of $build (written by bench/gpu/build.sh).
export PATH=$PATH
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH
EOF
cat >"$build/run-env" <<EOF
#!/bin/sh
# run-env CMD...: runs CMD with the environment of env.sh (written by bench/gpu/build.sh).
. "$build/env.sh"
exec "\$@"
EOF
chmod +x "$build/run-env"
echo "build: torch $torch_prefix, NCCL $nccl_lib, nvcc $("$nvcc" --version | tail -1)"
phase probe

# The pip libtorch carries a Gloo of its own, whose symbols it may export: Debian's libgloo goes
# first among every program's libraries, so that our Gloo calls all bind to the one whose headers
# we compiled against.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DHPTRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc" \
  "${HPTRAIN_PREFIX_CMAKE_ARGS[@]}" \
  -DHPTRAIN_PYTHON="$(command -v "$python")" \
  -DNCCL_LIBRARY="$build/nccl-link/libnccl.so" -DNCCL_INCLUDE_DIR="$nccl_root/include" \
  "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--no-as-needed,$hptrain_prefix/lib/libgloo.so" \
  >"$build/configure.log" 2>&1
configured=$?
phase configure
if ((configured != 0)); then
  echo "build: configure failed; the errors:" >&2
  grep -A8 -E 'CMake Error' "$build/configure.log" | head -60 >&2
  exit 1
fi

known=$(ninja -C "$build" -t targets all 2>/dev/null | cut -d: -f1)
present=()
absent=()
for t in "${targets[@]}"; do
  if grep -qxF "$t" <<<"$known"; then present+=("$t"); else absent+=("$t"); fi
done
((${#absent[@]})) && echo "build: not defined in this build, skipped: ${absent[*]}"

# Two passes: the targets without libtorch first, so that the kernel and NCCL checks have their
# programs even if the slow libtorch part runs out of time.
first=()
second=()
for t in "${present[@]}"; do
  case $t in
    hptrain | integration_* | sync_device_strategies_test) second+=("$t") ;;
    *) first+=("$t") ;;
  esac
done
status=0
for pass in first second; do
  declare -n group=$pass
  ((${#group[@]})) || continue
  echo "build: ninja -j$jobs -k 0 ${group[*]}"
  ninja -C "$build" -j"$jobs" -k 0 "${group[@]}" || status=1
  phase "build ($pass pass)"
done
built=()
failed=()
for t in "${present[@]}"; do
  out=$(find "$build/bin" "$build/tests" -maxdepth 1 -name "$t" -type f -perm -u+x 2>/dev/null)
  if [[ -n $out ]]; then built+=("$t"); else failed+=("$t"); fi
done
echo "build: built ${#built[@]}: ${built[*]}"
((${#failed[@]})) && echo "build: FAILED ${#failed[@]}: ${failed[*]}"
((${#absent[@]})) && status=1
exit "$status"
