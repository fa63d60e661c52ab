#!/usr/bin/env bash
# What `forkless gateway --upstream` costs (issue 40): the `tools/call` echo against an HTTP
# MCP server called directly, and through the gateway in front of it, one after the other in
# one run. The upstream is the bare hyper echo of `forkless-bench` (SSE answers; it answers
# `initialize` too), so the figures are the gateway's own cost, not an SDK's; or, with
# UPSTREAM `ts` or `python`, the official SDK's reference server of `tests/interop/` (its
# `echo` tool; SSE answers; needs scripts/peers/install.sh), what a user fronts. The gateway
# runs on the memory store and on the durable default. For each: requests/s and latency at
# 1 and 16 connections (one session shared by the connections), from `forkless-bench load`;
# for an SDK upstream also a progress-streaming tool (`start-notification-stream`, 200
# notifications per call, 1 and 16 calls at once): notifications/s.
# The upstream on CPU 0, the load on CPU 1, the gateway on GATEWAY_CPU (default 0: it takes
# its CPU from the upstream's core; 1: beside the load, so the upstream keeps its core, as a
# gateway on a machine or container of its own would). FORKLESS_BENCH_NO_PIN=1: no pinning.
#
# With ROUNDS above 1 it then alternates the upstream directly and the gateway (memory store)
# ROUNDS times at each connection count, and prints each pair's ratio and their mean: an
# upstream whose own rate moves from run to run (Node's does, twofold) is then compared
# with itself at the same moment.
#
#   [GATEWAY_CPU=1] scripts/bench-upstream.sh [SECONDS [UPSTREAM [ROUNDS]]]   (default 5 hyper 1; UPSTREAM hyper|ts|python)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
kind=${2:-hyper}
rounds=${3:-1}
cargo build --release -q -p forkless -p forkless-bench
bench=target/release/forkless-bench
server_cpu=(taskset -c 0)
gateway_cpu=(taskset -c "${GATEWAY_CPU:-0}")
load_cpu=(taskset -c 1)
if [[ -n "${FORKLESS_BENCH_NO_PIN:-}" ]] || ! command -v taskset >/dev/null; then server_cpu=(); gateway_cpu=(); load_cpu=(); fi
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
  RUST_LOG=warn "${gateway_cpu[@]}" target/release/forkless gateway --listen "127.0.0.1:$p" --store "$1" \
    --data-dir "$work/data-$p" --upstream "$upstream" >/dev/null 2>&1 &
  pids+=($!)
  url="http://127.0.0.1:$p/mcp"
  until curl -s -o /dev/null "http://127.0.0.1:$p/healthz"; do sleep 0.05; done
}

# The loads: the echo at 1 and 16 connections; against an SDK server also the progress stream.
loads=("echo 1" "echo 16")
[[ $kind == hyper ]] || loads+=("notify 1" "notify 16")
load() { # url, load, clients
  "${load_cpu[@]}" "$bench" load --url "$1" --load "$2" --clients "$3" --count 200 --seconds "$seconds" --sse
}
run() { # name, url
  local spec
  for spec in "${loads[@]}"; do
    set -- "$1" "$2" $spec
    echo "| $1 | $3 | $4 | $(load "$2" "$3" "$4") |"
  done
}

echo "| server | load | connections | forkless-bench load |"
echo "|---|---|---:|---|"
run "$name directly" "$upstream"
gateway memory
run "gateway --upstream, memory store" "$url"
gateway redb
run "gateway --upstream, durable default (redb, batched)" "$url"

(( rounds > 1 )) || exit 0
# The throughput of one load run (requests/s, or notifications/s for notify).
rate() { # url, load, clients
  load "$@" | sed -n 's/.*throughput: \([0-9.]*\),.*/\1/p'
}
gateway memory
echo
echo "| load | connections | round | upstream directly, per second | gateway (memory store), per second | ratio |"
echo "|---|---:|---:|---:|---:|---:|"
for spec in "${loads[@]}"; do
  set -- $spec
  ratios=()
  for round in $(seq "$rounds"); do
    direct=$(rate "$upstream" "$1" "$2")
    through=$(rate "$url" "$1" "$2")
    ratio=$(awk -v d="$direct" -v g="$through" 'BEGIN { printf "%.2f", g / d }')
    ratios+=("$ratio")
    printf '| %s | %d | %d | %.0f | %.0f | %s |\n' "$1" "$2" "$round" "$direct" "$through" "$ratio"
  done
  printf '%s\n' "${ratios[@]}" | awk -v l="$1" -v c="$2" '{ s += $1; n++ } END { printf "| %s | %d | mean | | | **%.2f** |\n", l, c, s / n }'
done
