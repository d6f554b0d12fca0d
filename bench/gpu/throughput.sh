#!/usr/bin/env bash
# Single-worker GPU training throughput: hptrain (one worker, spec.device cuda, synthetic data)
# against a plain PyTorch loop with the same model, batch and optimizer (torch_loop.py).
#
#   bench/gpu/throughput.sh [BUILD_DIR=build-gpu] [OUT_DIR=BUILD_DIR/throughput]
#
# Environment: STEPS (timed steps, 1500), SHORT_STEPS (100), PYTHON (python3), MODELS
# ("lenet5:64 resnet20:128", model:batch pairs), RUN_TIMEOUT (seconds per run, 150), DEVICE
# (cuda; cpu runs both sides on the CPU, to check the script on a machine without a GPU),
# PRECISION (fp32; bf16 or fp16: hptrain with spec.precision, against PyTorch AMP with the same
# model and batch, bench/peers/amp_peer.py, instead of torch_loop.py).
#
# hptrain samples/s is steady state: each model runs twice, for SHORT_STEPS and for
# SHORT_STEPS + STEPS steps, and the rate is STEPS · batch over the difference of the two runs'
# training seconds (the run summary's steps / samples_per_second, i.e. time inside training
# steps), so start-up, cuDNN autotuning and the first steps cancel, as far as they take the same
# time in both runs: cuDNN's autotuning of ResNet-20 took 4.8 s in one run and 4.5 s in another on
# an H100, which 300 timed steps (2.7 s) could not absorb; 1500 do. PyTorch's is the median over
# windows after warm-up steps (torch_loop.py). Peak GPU memory: for both, the largest per-process
# used_memory that `nvidia-smi --query-compute-apps` reported while polling every 100 ms (CUDA
# context included, so the two are comparable); for PyTorch also torch.cuda.max_memory_allocated
# (tensors only). Writes OUT_DIR/throughput.json (throughput-bf16.json etc. with PRECISION) and
# the runs' logs; prints a table.
# Exit status: 0 all runs finished, 1 a run failed, 2 no GPU or no hptrain binary.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build=${1:-build-gpu}
out=${2:-$build/throughput}
steps=${STEPS:-1500}
short=${SHORT_STEPS:-100}
python=${PYTHON:-python3}
models=${MODELS:-lenet5:64 resnet20:128}
run_timeout=${RUN_TIMEOUT:-150}
device=${DEVICE:-cuda}
precision=${PRECISION:-fp32}
ptag=""  # file names: fp32's as before, the others' with the precision
[[ $precision != fp32 ]] && ptag="-$precision"
mkdir -p "$out"
hptrain=$build/bin/hptrain
if [[ ! -x $hptrain ]]; then
  echo "throughput: no $hptrain (build it with bench/gpu/build.sh)" >&2
  exit 2
fi
if [[ $device == cuda ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "throughput: no NVIDIA GPU here (nvidia-smi -L failed)" >&2
  exit 2
fi
# hptrain runs with build.sh's library path (run-env); python3 without it.
wrap=()
[[ -x $build/run-env ]] && wrap=("$build/run-env")

poll_pid=""
poll_start() {  # poll_start FILE: nvidia-smi polls per-process GPU memory into FILE
  : >"$1"
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 100 \
    >"$1" 2>/dev/null &
  poll_pid=$!
}
poll_stop() {  # poll_stop FILE: stop polling, print the largest used_memory in MiB (or -)
  if [[ -n $poll_pid ]]; then
    kill "$poll_pid" 2>/dev/null
    wait "$poll_pid" 2>/dev/null
    poll_pid=""
  fi
  awk -F', *' '$2 ~ /^[0-9]+$/ && $2 > m { m = $2 } END { print (m ? m : "-") }' "$1"
}

# job_yaml MODEL BATCH: the one-worker synthetic job (bench/gpu/job_yaml.sh).
# shellcheck source=bench/gpu/job_yaml.sh
source bench/gpu/job_yaml.sh

# run_hptrain MODEL BATCH STEPS: prints "train_seconds peak_mib", or fails.
run_hptrain() {
  local model=$1 batch=$2 n=$3 tag="hptrain$ptag-$1-$3"
  local job=/tmp/hptrain-gpu-throughput-$model.yaml
  job_yaml "$model" "$batch" >"$job"
  poll_start "$out/$tag.smi"
  timeout "$run_timeout" "${wrap[@]}" "$hptrain" run "$job" --quiet --set "spec.maxSteps=$n" \
    --set "spec.precision=$precision" \
    --output-json "$out/$tag.json" >"$out/$tag.log" 2>&1
  local rc=$?
  local peak
  peak=$(poll_stop "$out/$tag.smi")
  if ((rc != 0)) || [[ ! -s $out/$tag.json ]]; then
    echo "throughput: hptrain $model $n steps failed (exit $rc), last lines of $out/$tag.log:" >&2
    tail -n 15 "$out/$tag.log" >&2
    return 1
  fi
  "$python" - "$out/$tag.json" "$batch" "$peak" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rate = s["samples_per_second"]
r = s["ranks"][0]
print("hptrain %s steps: compute %.3f s, comm %.3f s (exposed %.3f s), wall %.3f s"
      % (s["steps"], r["compute_seconds"], r["comm_seconds"], r["exposed_comm_seconds"],
         s["wall_seconds"]), file=sys.stderr)
print(s["steps"], "%.4f" % (s["steps"] * int(sys.argv[2]) / rate if rate > 0 else 0), sys.argv[3])
PY
}

failed=0
rows=()
for pair in $models; do
  model=${pair%%:*}
  batch=${pair##*:}
  echo "== $model batch $batch $precision: hptrain $short and $((short + steps)) steps, PyTorch $steps steps"
  if a=$(run_hptrain "$model" "$batch" "$short") &&
    b=$(run_hptrain "$model" "$batch" $((short + steps))); then
    read -r steps_a secs_a _ <<<"$a"
    read -r steps_b secs_b peak_h <<<"$b"
    hp_rate=$(awk -v n=$((steps_b - steps_a)) -v b="$batch" -v t="$secs_b" -v s="$secs_a" \
      'BEGIN { d = t - s; if (n > 0 && d > 0) printf "%.1f", n * b / d; else print "-" }')
    echo "   hptrain: $steps_a steps ${secs_a}s, $steps_b steps ${secs_b}s -> $hp_rate samples/s"
  else
    hp_rate=-
    peak_h=-
    failed=1
  fi
  peer=(bench/gpu/torch_loop.py)
  [[ $precision != fp32 ]] && peer=(bench/peers/amp_peer.py --precision "$precision")
  ttag=torch$ptag-$model
  poll_start "$out/$ttag.smi"
  timeout "$run_timeout" "$python" "${peer[@]}" --model "$model" --batch "$batch" \
    --steps "$steps" --warmup 30 --window 25 --device "$device" >"$out/$ttag.json" 2>"$out/$ttag.log"
  rc=$?
  peak_t=$(poll_stop "$out/$ttag.smi")
  if ((rc == 0)); then
    cat "$out/$ttag.json"
  else
    echo "throughput: ${peer[0]} $model failed (exit $rc):" >&2
    tail -n 15 "$out/$ttag.log" >&2
    failed=1
  fi
  rows+=("$model $batch $hp_rate $peak_h $peak_t")
done

"$python" - "$out" "$ptag" "$precision" "${rows[@]}" <<'PY'
import json, sys
out_dir, ptag, precision, rows = sys.argv[1], sys.argv[2], sys.argv[3], []
for line in sys.argv[4:]:
    model, batch, hp, peak_h, peak_t = line.split()
    try:
        t = json.load(open(f"{out_dir}/torch{ptag}-{model}.json"))
    except (OSError, ValueError):
        t = {}
    pt = t.get("samples_per_second")
    hp = float(hp) if hp != "-" else None
    peak = t.get("peak_memory_bytes")
    rows.append({
        "model": model, "batch": int(batch), "precision": precision,
        "hptrain_samples_per_second": hp, "torch_samples_per_second": pt,
        "ratio": hp / pt if hp and pt else None,
        "hptrain_peak_gpu_mib_nvidia_smi": int(peak_h) if peak_h != "-" else None,
        "torch_peak_gpu_mib_nvidia_smi": int(peak_t) if peak_t != "-" else None,
        "torch_max_memory_allocated_mib": peak / 2**20 if peak else None})


print("\nmodel     batch  hptrain samples/s  PyTorch samples/s  ratio  peak MiB nvidia-smi"
      " hptrain / PyTorch  PyTorch allocated MiB")
for r in rows:
    cells = [format(r["model"], "9s"), format(r["batch"], "5d")]
    for key, width, digits in (("hptrain_samples_per_second", 17, 0),
                               ("torch_samples_per_second", 17, 0), ("ratio", 5, 2),
                               ("hptrain_peak_gpu_mib_nvidia_smi", 27, 0),
                               ("torch_peak_gpu_mib_nvidia_smi", 9, 0),
                               ("torch_max_memory_allocated_mib", 21, 1)):
        v = r[key]
        cells.append(f"{v:{width}.{digits}f}" if v is not None else f"{'-':>{width}}")
    print("  ".join(cells))
json.dump(rows, open(f"{out_dir}/throughput{ptag}.json", "w"), indent=1)
print("throughput:", json.dumps(rows))
PY
exit "$failed"
