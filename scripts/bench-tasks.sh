#!/usr/bin/env bash
# The task benchmarks (2026-07-28 tasks extension) on every store: creation latency p50/p99,
# tasks/get per second and server CPU per tasks/get at 16 connections, and the server CPU
# that polling 10,000 live tasks at their suggested interval costs. Figures and how to read
# them: docs/benchmarks.md ("Tasks").
#
#   scripts/bench-tasks.sh                 memory and redb (the durable default)
#   FORKLESS_BENCH_POSTGRES=postgres://postgres@127.0.0.1:5432/bench_tasks \
#   FORKLESS_BENCH_REDIS=redis://127.0.0.1:6379/0#bench_tasks scripts/bench-tasks.sh   (and those)
#
# CPU split on a 2-core machine: the server on CPU 0 (`taskset -c 0`), the load on CPU 1.
# Results: target/bench-tasks/<store>.json and a markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p forkless -p forkless-bench >&2
out=target/bench-tasks
mkdir -p "$out"
pin_server=(); pin_load=()
if command -v taskset >/dev/null && [[ "$(nproc)" -ge 2 ]]; then
  pin_server=(taskset -c 0); pin_load=(taskset -c 1)
fi
stores=(memory redb)
[[ -n "${FORKLESS_BENCH_POSTGRES:-}" ]] && stores+=("$FORKLESS_BENCH_POSTGRES")
[[ -n "${FORKLESS_BENCH_REDIS:-}" ]] && stores+=("$FORKLESS_BENCH_REDIS")
echo "| store | create p50 µs | create p99 µs | tasks/get per s | get p50 µs | get p99 µs | CPU µs per get | live tasks | poll interval ms | polls per s | server CPU polling (share of a core) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for store in "${stores[@]}"; do
  data=$(mktemp -d)
  name=${store%%:*}
  log="$out/$name.log"
  args=(serve --listen 127.0.0.1:0 --revisions all --max-tasks 20000 --max-tasks-per-principal 20000)
  case "$store" in
    memory) args+=(--store memory) ;;
    redb) args+=(--data-dir "$data") ;;
    *) args+=(--store "$store") ;;
  esac
  RUST_LOG=warn "${pin_server[@]}" target/release/forkless "${args[@]}" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$log" && break; sleep 0.05; done
  url=$(grep -o 'http://[^ ]*/mcp' "$log" | head -1)
  "${pin_load[@]}" target/release/forkless-bench tasks --url "$url" --pid "$pid" "$@" >"$out/$name.json"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$data"
  python3 - "$name" "$out/$name.json" <<'PY'
import json, sys
n, f = sys.argv[1], json.load(open(sys.argv[2]))
cpu = f.get("get_cpu_us"); share = f.get("poll_cpu_share")
print(f"| {n} | {f['create_p50_us']:.0f} | {f['create_p99_us']:.0f} | {f['get_per_s']:.0f} | {f['get_p50_us']:.0f} | {f['get_p99_us']:.0f} | "
      f"{cpu:.1f} | {f['live']} | {f['poll_interval_ms']} | {f['polls_per_s']:.0f} | {share:.3f} |" if cpu is not None and share is not None else
      f"| {n} | {f['create_p50_us']:.0f} | {f['create_p99_us']:.0f} | {f['get_per_s']:.0f} | {f['get_p50_us']:.0f} | {f['get_p99_us']:.0f} | – | {f['live']} | {f['poll_interval_ms']} | {f['polls_per_s']:.0f} | – |")
PY
done
