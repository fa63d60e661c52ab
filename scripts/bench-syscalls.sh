#!/usr/bin/env bash
# Where a request's time goes besides instructions (issue 45): for the bare hyper echo, rmcp's
# stateful server and forkless (memory store), the SSE-answered `tools/call` echo at 16
# connections from `forkless-bench load`, one after the other in one run, and forkless's
# ratios to both. Per request: system calls by kind
# (strace -c, in a run of its own since tracing slows the server), and context switches and
# server CPU (perf stat, untraced). Servers on CPU 0, the load on CPU 1. Figures:
# docs/benchmarks.md ("System calls and context switches per request").
#
#   scripts/bench-syscalls.sh [SECONDS]      (default 5)
#   FORKLESS_BENCH_NO_PIN=1 scripts/bench-syscalls.sh     (servers and load on any CPU)
#
# Needs perf and strace (Debian: linux-perf, strace); builds target/release/forkless-bench.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-5}
for tool in perf strace taskset; do
  command -v "$tool" >/dev/null || { echo "bench-syscalls: $tool is not installed" >&2; exit 2; }
done
name=bench-syscalls
# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh

# The load's completed requests.
load() {
  "${load_cpu[@]}" "$bench" load --url "$url" --sse --clients 16 --seconds "$seconds" |
    sed -n 's/.*ops: \([0-9]*\),.*/\1/p'
}


build_rmcp
declare -A rate cpu
echo "| server | requests/s | CPU µs/request | context switches/request | system calls/request (by kind) |"
echo "|---|---:|---:|---:|---|"
for target in hyper rmcp forkless; do
  # Untraced: throughput, CPU and context switches.
  start "$target"
  perf stat -x, -e context-switches,task-clock -p "$server" -o "$work/perf.csv" -- sleep "$((seconds + 1))" &
  perf=$!
  sleep 0.2
  ops=$(load)
  wait "$perf" || true
  stop
  switches=$(awk -F, '$3 == "context-switches" { print $1 }' "$work/perf.csv")
  clock_ms=$(awk -F, '$3 == "task-clock" { print $1 }' "$work/perf.csv")
  # Traced: system calls by kind.
  start "$target"
  strace -c -f -q -o "$work/strace.txt" -p "$server" &
  tracer=$!
  sleep 0.3
  traced=$(load)
  kill -INT "$tracer" 2>/dev/null || true
  wait "$tracer" 2>/dev/null || true
  stop
  calls=$(awk -v n="$traced" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {
      if ($4 / n >= 0.005) printf "%s%s %.2f", (k++ ? ", " : ""), $NF, $4 / n }' "$work/strace.txt")
  total=$(awk -v n="$traced" '$NF == "total" { printf "%.2f", $4 / n }' "$work/strace.txt")
  awk -v t="$target" -v ops="$ops" -v s="$seconds" -v sw="$switches" -v ms="$clock_ms" -v total="$total" -v calls="$calls" 'BEGIN {
      printf "| %s | %d | %.1f | %.3f | %s: %s |\n", t, ops / s, ms * 1000 / ops, sw / ops, total, calls }'
  rate[$target]=$((ops / seconds))
  cpu[$target]=$(awk -v ms="$clock_ms" -v ops="$ops" 'BEGIN { printf "%.2f", ms * 1000 / ops }')
done
awk -v f="${rate[forkless]}" -v h="${rate[hyper]}" -v r="${rate[rmcp]}" \
    -v fc="${cpu[forkless]}" -v hc="${cpu[hyper]}" 'BEGIN {
  printf "\nforkless: %.2fx hyper'"'"'s requests/s (target >= 0.7), %.2fx rmcp'"'"'s (>= 2), %.2fx hyper'"'"'s CPU per request (<= 1.6)\n",
    f / h, f / r, fc / hc }'
