#!/usr/bin/env bash
# Put one stdio MCP server (@modelcontextprotocol/server-everything) behind three gateways
# and compare them, as docs/peers.md records:
#
#   forkless      forkless gateway (per-session, durable default store)
#   forkless-memory  the same on the in-memory store (what the others keep: nothing)
#   supergateway  supergateway 4.0.0 --outputTransport streamableHttp --stateful (npm)
#   mcp-proxy     mcp-proxy 0.13.0 --transport streamablehttp server mode (PyPI)
#
# For each: `forkless check` with the server's progress-numbered tool
# (--progress --tool trigger-long-running-operation), then the echo load of forkless-bench
# (16 connections on one session, tools/call echo, 10 s): requests per second and p99; then
# the memory of the gateway's whole process tree per session (16 sessions opened, each
# initialized, resident set size before and after, divided by 16).
#
# Installs what it needs (scripts/peers/install.sh --only stdio --only gateways --only
# mcp-proxy) and builds release binaries. Writes $COMPARE_OUT (default
# target/compare-gateways)/<gateway>.check.json and prints one line per gateway:
# `compare-gateways: <gateway>: P PASS, F FAIL, U UNSUPPORTED; R req/s, p99 L ms; M MiB per session`.
#
# Usage: scripts/peers/compare-gateways.sh [--seconds N]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
out="${COMPARE_OUT:-$root/target/compare-gateways}"
seconds=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) shift; seconds="${1:?--seconds needs a number}" ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-gateways.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

bash "$here/install.sh" --only stdio --only gateways --only mcp-proxy >&2
cargo build --quiet --release -p forkless -p forkless-bench >&2
forkless="$root/target/release/forkless"
bench="$root/target/release/forkless-bench"
everything="$root/.peers/stdio/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
mkdir -p "$out"

# shellcheck source=compare-lib.sh
source "$here/compare-lib.sh"

# The resident set of a process and all its descendants, in KiB.
tree_rss() {
  local pid=$1 total=0 kid
  total=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
  for kid in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
    total=$((total + $(tree_rss "$kid")))
  done
  echo "$total"
}

wait_up() { # url
  local i
  for i in $(seq 1 100); do
    if curl -s -o /dev/null -X POST -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
      --data '{"jsonrpc":"2.0","id":0,"method":"ping"}' "$1"; then return 0; fi
    sleep 0.1
  done
  echo "compare-gateways: $1 did not come up" >&2
  return 1
}

# Open one session: initialize, then notifications/initialized.
open_session() { # url
  local sid
  sid=$(curl -s -D - -o /dev/null -X POST -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"compare","version":"0"}}}' \
    "$1" | awk 'tolower($1) == "mcp-session-id:" { print $2 }' | tr -d '\r')
  curl -s -o /dev/null -X POST -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
    -H "mcp-session-id: $sid" -H 'mcp-protocol-version: 2025-11-25' \
    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$1"
}

run_one() { # name url pid
  local name=$1 url=$2 pid=$3
  wait_up "$url"
  "$forkless" check "$url" --json --progress --tool trigger-long-running-operation \
    --args '{"steps":"$count","duration":"$seconds"}' >"$out/$name.check.json" 2>/dev/null || true
  local verdicts
  verdicts=$(verdicts "$out/$name.check.json")
  local load
  load=$("$bench" load --url "$url" --clients 16 --seconds "$seconds" --any-answer --echo-arg message)
  local rps p99
  rps=$(throughput "$load")
  p99=$(sed -n 's/.*p99_us: Some(\([0-9.]*\)).*/\1/p' <<<"$load")
  p99=$(python3 -c "print(f'{float(\"${p99:-0}\") / 1000:.1f}')")
  local before after i
  before=$(tree_rss "$pid")
  for i in $(seq 1 16); do open_session "$url"; done
  sleep 1
  after=$(tree_rss "$pid")
  local per
  per=$(python3 -c "print(f'{($after - $before) / 16 / 1024:.1f}')")
  echo "compare-gateways: $name: $verdicts; ${rps:-?} req/s, p99 ${p99:-?} ms; $per MiB per session"
  echo "$load" >"$out/$name.load.txt"
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

port=$(free_port)
data=$(mktemp -d)
"$forkless" gateway --listen "127.0.0.1:$port" --data-dir "$data" -- node "$everything" stdio >/dev/null 2>"$out/forkless.log" &
pid=$!
run_one forkless "http://127.0.0.1:$port/mcp" "$pid"
stop "$pid"
rm -rf "$data"

port=$(free_port)
"$forkless" gateway --listen "127.0.0.1:$port" --store memory -- node "$everything" stdio >/dev/null 2>"$out/forkless-memory.log" &
pid=$!
run_one forkless-memory "http://127.0.0.1:$port/mcp" "$pid"
stop "$pid"

port=$(free_port)
node "$root/.peers/gateways/node_modules/supergateway/dist/index.js" --stdio "node $everything stdio" \
  --outputTransport streamableHttp --stateful --port "$port" --logLevel none >/dev/null 2>"$out/supergateway.log" &
pid=$!
run_one supergateway "http://127.0.0.1:$port/mcp" "$pid"
stop "$pid"

port=$(free_port)
"$root/.peers/mcp-proxy/bin/mcp-proxy" --host 127.0.0.1 --port "$port" -- node "$everything" stdio \
  >/dev/null 2>"$out/mcp-proxy.log" &
pid=$!
run_one mcp-proxy "http://127.0.0.1:$port/mcp" "$pid"
stop "$pid"
