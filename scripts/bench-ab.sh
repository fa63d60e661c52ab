#!/usr/bin/env bash
# An A/B of the request path in one run (issue 45): forkless (memory store, the SSE-answered
# `tools/call` echo at 16 connections from `forkless-bench load`) built at BASE and at the
# working tree, alternated ROUNDS times, each run's requests/s and server CPU per request
# (perf stat), and the working tree's ratio to BASE per round and overall. Servers on CPU 0,
# the load on CPU 1 (FORKLESS_BENCH_NO_PIN=1 for none).
#
#   scripts/bench-ab.sh BASE [ROUNDS] [SECONDS]     (default 5 rounds of 4 s)
#
# BASE is built in a git worktree under .bench-ab/ (its own target directory, kept between
# runs). Needs perf and taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:?usage: scripts/bench-ab.sh BASE [ROUNDS] [SECONDS]}
rounds=${2:-5}
seconds=${3:-4}
for tool in perf taskset; do
  command -v "$tool" >/dev/null || { echo "bench-ab: $tool is not installed" >&2; exit 2; }
done
name=bench-ab
# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh
head_bench=$bench

commit=$(git rev-parse --verify "$base^{commit}")
tree=.bench-ab/tree
if [[ ! -d "$tree" ]]; then
  git worktree add -q --detach "$tree" "$commit"
else
  git -C "$tree" checkout -q --detach "$commit"
fi
echo "bench-ab: building $base ($commit) in $tree" >&2
(cd "$tree" && CARGO_TARGET_DIR="$PWD/../target" cargo build --release -q -p forkless-bench)
base_bench=.bench-ab/target/release/forkless-bench

# One run of `which` (base or head): "requests/s cpu-µs-per-request".
run() {
  bench=$1
  start forkless
  perf stat -x, -e task-clock -p "$server" -o "$work/perf.csv" -- sleep "$((seconds + 1))" &
  local perf=$!
  sleep 0.2
  local ops
  ops=$("${load_cpu[@]}" "$head_bench" load --url "$url" --sse --clients 16 --seconds "$seconds" |
    sed -n 's/.*ops: \([0-9]*\),.*/\1/p')
  wait "$perf" || true
  stop
  local ms
  ms=$(awk -F, '$3 == "task-clock" { print $1 }' "$work/perf.csv")
  awk -v ops="$ops" -v s="$seconds" -v ms="$ms" 'BEGIN { printf "%d %.2f", ops / s, ms * 1000 / ops }'
}

echo "| round | $base req/s (µs) | working tree req/s (µs) | rate ratio | CPU ratio |"
echo "|---|---:|---:|---:|---:|"
sum_rate=0
sum_cpu=0
for round in $(seq "$rounds"); do
  # Alternate which goes first, so a drifting machine does not favour one side.
  if ((round % 2)); then
    read -r br bc <<<"$(run "$base_bench")"
    read -r hr hc <<<"$(run "$head_bench")"
  else
    read -r hr hc <<<"$(run "$head_bench")"
    read -r br bc <<<"$(run "$base_bench")"
  fi
  awk -v r="$round" -v br="$br" -v bc="$bc" -v hr="$hr" -v hc="$hc" 'BEGIN {
    printf "| %d | %d (%.1f) | %d (%.1f) | %.3f | %.3f |\n", r, br, bc, hr, hc, hr / br, hc / bc }'
  sum_rate=$(awk -v a="$sum_rate" -v br="$br" -v hr="$hr" 'BEGIN { print a + hr / br }')
  sum_cpu=$(awk -v a="$sum_cpu" -v bc="$bc" -v hc="$hc" 'BEGIN { print a + hc / bc }')
done
awk -v r="$sum_rate" -v c="$sum_cpu" -v n="$rounds" 'BEGIN {
  printf "\nworking tree against base, mean of %d rounds: %.3fx the requests/s, %.3fx the CPU per request\n", n, r / n, c / n }'
