#!/usr/bin/env bash
# What TLS costs (issue 42): the SSE-answered `tools/call` echo at 16 connections from
# `forkless-bench load`, for the bare hyper echo and forkless (memory store), each in
# plaintext HTTP/1.1, TLS HTTP/1.1 and TLS HTTP/2 (ALPN), one after the other in one run.
# Per row: requests/s and server CPU µs per request (perf stat task-clock), and the ratio to
# the same server's plaintext figures; the last column compares forkless's TLS cost with
# hyper's (1.00: TLS costs forkless exactly what it costs hyper). Servers on CPU 0, the load
# on CPU 1. The certificate is made for the run (openssl). Figures: docs/benchmarks.md
# ("TLS").
#
#   scripts/bench-tls.sh [SECONDS]      (default 5)
#   FORKLESS_BENCH_NO_PIN=1 scripts/bench-tls.sh     (servers and load on any CPU)
#
# Needs perf, taskset and openssl; builds target/release/forkless-bench.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-5}
for tool in perf taskset openssl; do
  command -v "$tool" >/dev/null || { echo "bench-tls: $tool is not installed" >&2; exit 2; }
done
name=bench-tls
# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh

# A certificate for 127.0.0.1 (the address the servers announce), trusted by the load.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost -addext basicConstraints=critical,CA:FALSE \
  -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
tls=(--tls-cert "$work/tls.crt" --tls-key "$work/tls.key")

# One row: TARGET MODE (plain, tls-h1, tls-h2); prints "ops cpu_ms".
measure() {
  local target=$1 mode=$2 flags=()
  case "$mode" in
    plain) start "$target" ;;
    tls-h1) start "$target" "${tls[@]}"; flags=(--ca-file "$work/tls.crt" --http1) ;;
    tls-h2) start "$target" "${tls[@]}"; flags=(--ca-file "$work/tls.crt") ;;
  esac
  perf stat -x, -e task-clock -p "$server" -o "$work/perf.csv" -- sleep "$((seconds + 1))" &
  local perf=$!
  sleep 0.2
  local ops
  ops=$("${load_cpu[@]}" "$bench" load --url "$url" --sse --clients 16 --seconds "$seconds" "${flags[@]}" |
    sed -n 's/.*ops: \([0-9]*\),.*/\1/p')
  wait "$perf" || true
  stop
  echo "$ops $(awk -F, '$3 == "task-clock" { print $1 }' "$work/perf.csv")"
}

declare -A ops cpu
for target in hyper forkless; do
  for mode in plain tls-h1 tls-h2; do
    read -r o c < <(measure "$target" "$mode")
    ops[$target.$mode]=$o
    cpu[$target.$mode]=$c
  done
done

echo "| server | connection | requests/s | CPU µs/request | rate vs own plaintext | CPU vs own plaintext | TLS cost vs hyper's (rate, CPU) |"
echo "|---|---|---:|---:|---:|---:|---|"
for target in hyper forkless; do
  for mode in plain tls-h1 tls-h2; do
    awk -v t="$target" -v m="$mode" -v s="$seconds" \
      -v o="${ops[$target.$mode]}" -v c="${cpu[$target.$mode]}" \
      -v po="${ops[$target.plain]}" -v pc="${cpu[$target.plain]}" \
      -v ho="${ops[hyper.$mode]}" -v hc="${cpu[hyper.$mode]}" \
      -v hpo="${ops[hyper.plain]}" -v hpc="${cpu[hyper.plain]}" 'BEGIN {
        us = c * 1000 / o; pus = pc * 1000 / po; hus = hc * 1000 / ho; hpus = hpc * 1000 / hpo
        rate = o / po; cpu = us / pus; hrate = ho / hpo; hcpu = hus / hpus
        cost = (t == "hyper" || m == "plain") ? "-" : sprintf("%.2f, %.2f", rate / hrate, cpu / hcpu)
        printf "| %s | %s | %d | %.1f | %.2fx | %.2fx | %s |\n", t, m, o / s, us, rate, cpu, cost }'
  done
done
