#!/usr/bin/env bash
# What `forkless gateway --upstream` costs (issue 40): the `tools/call` echo against an HTTP
# MCP server called directly, and through the gateway in front of it, one after the other in
# one run. The upstream is the bare hyper echo of `forkless-bench` (SSE answers; it answers
# `initialize` too), so the figures are the gateway's own cost, not an SDK's; or, with
# UPSTREAM `ts` or `python`, the official SDK's reference server of `tests/interop/` (its
# `echo` tool; SSE answers; needs scripts/peers/install.sh), what a user fronts. The gateway
# runs on the memory store and on the durable default. For each: requests/s and latency at
# 1 and 16 connections (one session shared by the connections), from `forkless-bench load`.
# Servers on CPU 0, the load on CPU 1 (set FORKLESS_BENCH_NO_PIN=1 to not pin).
#
# With ROUNDS above 1 it then alternates the upstream directly and the gateway (memory store)
# ROUNDS times at each connection count, and prints each pair's ratio and their mean: an
# upstream whose own rate moves from run to run (Node's does, twofold) is then compared
# with itself at the same moment.
#
#   scripts/bench-upstream.sh [SECONDS [UPSTREAM [ROUNDS]]]   (default 5 hyper 1; UPSTREAM hyper|ts|python)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
kind=${2:-hyper}
rounds=${3:-1}
cargo build --release -q -p forkless -p forkless-bench
bench=target/release/forkless-bench
server_cpu=(taskset -c 0)
load_cpu=(taskset -c 1)
if [[ -n "${FORKLESS_BENCH_NO_PIN:-}" ]] || ! command -v taskset >/dev/null; then server_cpu=(); load_cpu=(); fi
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

case "$kind" in
  hyper)
    "${server_cpu[@]}" "$bench" serve --target hyper --answer sse --listen 127.0.0.1:0 >"$work/upstream.log" 2>&1 &
    pids+=($!)
    until upstream=$(awk '/listening on/ { print $3 }' "$work/upstream.log") && [[ -n "$upstream" ]]; do sleep 0.05; done
    name="upstream (hyper echo)"
    ;;
  ts | python)
    if [[ $kind == ts ]]; then program=(node tests/interop/ts/reference_server.mjs); else program=(.peers/py/bin/python tests/interop/python/reference_server.py); fi
    [[ -e ${program[1]} && ( $kind == ts || -x ${program[0]} ) ]] || { echo "the $kind SDK is not installed: run scripts/peers/install.sh" >&2; exit 1; }
    "${server_cpu[@]}" "${program[@]}" --port 0 >"$work/upstream.log" 2>&1 &
    pids+=($!)
    until upstream=$(awk '/^READY/ { print $2 }' "$work/upstream.log") && [[ -n "$upstream" ]]; do sleep 0.05; done
    name="upstream ($kind SDK reference server)"
    ;;
  *) echo "UPSTREAM is hyper, ts or python, not $kind" >&2; exit 2 ;;
esac

# Start a gateway in front of the upstream on STORE; sets $url.
gateway() {
  local p
  p=$(port)
  RUST_LOG=warn "${server_cpu[@]}" target/release/forkless gateway --listen "127.0.0.1:$p" --store "$1" \
    --data-dir "$work/data-$p" --upstream "$upstream" >/dev/null 2>&1 &
  pids+=($!)
  url="http://127.0.0.1:$p/mcp"
  until curl -s -o /dev/null "http://127.0.0.1:$p/healthz"; do sleep 0.05; done
}

run() { # name, url, clients
  local out
  out=$("${load_cpu[@]}" "$bench" load --url "$2" --load echo --clients "$3" --seconds "$seconds" --sse)
  echo "| $1 | $3 | $out |"
}

echo "| server | connections | forkless-bench load |"
echo "|---|---:|---|"
for clients in 1 16; do
  run "$name directly" "$upstream" "$clients"
done
gateway memory
for clients in 1 16; do run "gateway --upstream, memory store" "$url" "$clients"; done
gateway redb
for clients in 1 16; do run "gateway --upstream, durable default (redb, batched)" "$url" "$clients"; done

(( rounds > 1 )) || exit 0
# Requests/s of one load run against URL with CLIENTS connections.
rate() {
  "${load_cpu[@]}" "$bench" load --url "$1" --load echo --clients "$2" --seconds "$seconds" --sse |
    sed -n 's/.*throughput: \([0-9.]*\),.*/\1/p'
}
gateway memory
echo
echo "| connections | round | upstream directly, requests/s | gateway (memory store), requests/s | ratio |"
echo "|---:|---:|---:|---:|---:|"
for clients in 1 16; do
  ratios=()
  for round in $(seq "$rounds"); do
    direct=$(rate "$upstream" "$clients")
    through=$(rate "$url" "$clients")
    ratio=$(awk -v d="$direct" -v g="$through" 'BEGIN { printf "%.2f", g / d }')
    ratios+=("$ratio")
    printf '| %d | %d | %.0f | %.0f | %s |\n' "$clients" "$round" "$direct" "$through" "$ratio"
  done
  printf '%s\n' "${ratios[@]}" | awk -v c="$clients" '{ s += $1; n++ } END { printf "| %d | mean | | | **%.2f** |\n", c, s / n }'
done
