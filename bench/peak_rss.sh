#!/usr/bin/env bash
# Peak resident memory (VmHWM) of the ps and of each worker during a run:
#   bench/peak_rss.sh [JOB.yaml] [hptrain run flags...]
# Samples /proc/<pid>/status of every `hptrain ps|worker` child every 0.2 s and prints the peak
# of each when the run ends.
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-examples/fashion-mnist.yaml}
shift || true
build/bin/hptrain run "$job" --quiet "$@" >/dev/null &
launcher=$!
declare -A peak
while kill -0 "$launcher" 2>/dev/null; do
  for pid in $(pgrep -P "$launcher" || true); do
    cmd=$( (tr '\0' ' ' </proc/"$pid"/cmdline) 2>/dev/null || true)
    role=$(echo "$cmd" | awk '{print $2}')
    [ -n "$role" ] || continue
    rank=$(echo "$cmd" | sed -n 's/.*--rank \([0-9]*\).*/\1/p')
    key="$role${rank:+-$rank}"
    hwm=$( (awk '/VmHWM/ {print $2}' /proc/"$pid"/status) 2>/dev/null || true)
    [ -n "$hwm" ] || continue
    if [ "$hwm" -gt "${peak[$key]:-0}" ]; then peak[$key]=$hwm; fi
  done
  sleep 0.2
done
wait "$launcher"
for key in $(echo "${!peak[@]}" | tr ' ' '\n' | sort); do
  awk -v k="$key" -v v="${peak[$key]}" 'BEGIN { printf "%-10s %8.1f MiB\n", k, v / 1024 }'
done
