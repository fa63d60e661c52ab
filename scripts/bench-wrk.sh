#!/usr/bin/env bash
# SSE-answered `tools/call` echo against `forkless serve` with wrk, as issue 11 measured it:
# the memory store and the durable default (redb, batched) in alternating pairs, unpinned,
# one session shared by every connection. Prints each pair's requests/s, p99 and ratio, and
# the median ratio. Figures: docs/benchmarks.md.
#
#   scripts/bench-wrk.sh [PAIRS] [SECONDS] [CONNECTIONS]     (defaults: 4 pairs, 6 s, 16)
#
# Needs wrk (Debian: apt-get install wrk) and curl; builds target/release/forkless.
set -euo pipefail
cd "$(dirname "$0")/.."

pairs=${1:-4}
seconds=${2:-6}
conns=${3:-16}
port=${FORKLESS_WRK_PORT:-18080}
for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "bench-wrk: $tool is not installed (apt-get install $tool)" >&2; exit 2; }
done
cargo build --release -q -p forkless
bin=target/release/forkless
# shellcheck source=scripts/bench-scratch.sh
source scripts/bench-scratch.sh

url="http://127.0.0.1:$port/mcp"
headers=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-06-18')

# Inside a measurement (a subshell): stop its server, say why, give up.
fail() {
  kill "$server" 2>/dev/null || true
  echo "bench-wrk: $*" >&2
  exit 1
}

# One measurement: start the server on STORE, open a session, run wrk; prints "REQS P99".
measure() {
  local store=$1
  rm -rf "$work/data"
  "$bin" serve --listen "127.0.0.1:$port" --store "$store" --data-dir "$work/data" >"$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
  done
  local sid
  sid=$(curl -s -D - -o /dev/null -X POST "$url" "${headers[@]}" \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench-wrk","version":"1"}}}' |
    tr -d '\r' | awk 'tolower($1) == "mcp-session-id:" { print $2 }')
  [[ -n "$sid" ]] || fail "no session from $store: $(tail -3 "$work/serve.log")"
  curl -s -o /dev/null -X POST "$url" "${headers[@]}" -H "mcp-session-id: $sid" \
    -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  cat >"$work/echo.lua" <<LUA
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.headers["mcp-session-id"] = "$sid"
wrk.headers["mcp-protocol-version"] = "2025-06-18"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}'
LUA
  local out
  out=$(wrk -t2 -c"$conns" -d"${seconds}s" --latency -s "$work/echo.lua" "$url") || fail "wrk failed on $store"
  if grep -q "Non-2xx" <<<"$out"; then fail "$store answered errors: $out"; fi
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  echo "$(awk '/Requests\/sec/ { print $2 }' <<<"$out") $(awk '$1 == "99%" { print $2 }' <<<"$out")"
}

echo "pair  memory req/s (p99)  redb req/s (p99)  ratio"
ratios=()
for i in $(seq "$pairs"); do
  read -r mem mem_p99 < <(measure memory)
  read -r durable durable_p99 < <(measure redb)
  ratio=$(awk -v a="$durable" -v b="$mem" 'BEGIN { printf "%.2f", a / b }')
  ratios+=("$ratio")
  printf "%4d  %10.0f (%s)  %10.0f (%s)  %sx\n" "$i" "$mem" "$mem_p99" "$durable" "$durable_p99" "$ratio"
done
printf "median ratio over %d pairs, %d connections: %sx\n" "$pairs" "$conns" \
  "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END { print (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2 }')"
