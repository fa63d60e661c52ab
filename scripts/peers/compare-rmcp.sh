#!/usr/bin/env bash
# One rmcp service (crates/forkless-rmcp/examples/counter/service.rs) under rmcp's own
# Streamable HTTP transport (StreamableHttpService with its LocalSessionManager, example
# `counter_rmcp`) and under forkless (forkless-rmcp, example `counter`, in-memory store),
# side by side, as docs/peers.md records:
#
# 1. `forkless check --progress` against each (the service numbers its stream by progress,
#    which rmcp routes to the request's stream);
# 2. `forkless-bench load --load notify` against each: 16 concurrent
#    `start-notification-stream` calls of 1,000 progress notifications, for --seconds (5).
#
# Builds release binaries. Writes $COMPARE_OUT (default target/compare-rmcp)/<side>.check.json
# and prints one line per side:
# `compare-rmcp: <side>: P PASS, F FAIL, U UNSUPPORTED; N notifications/s`.
#
# Usage: scripts/peers/compare-rmcp.sh [--seconds N]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
out="${COMPARE_OUT:-$root/target/compare-rmcp}"
seconds=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) shift; seconds="${1:?--seconds needs a number}" ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-rmcp.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
cargo build --quiet --release -p forkless -p forkless-bench >&2
cargo build --quiet --release -p forkless-rmcp --examples >&2
bin="$root/target/release"
mkdir -p "$out"

# shellcheck source=compare-lib.sh
source "$here/compare-lib.sh"

run_side() { # name url
  local name=$1 url=$2
  "$bin/forkless" check "$url" --json --progress >"$out/$name.check.json" 2>/dev/null || true
  local verdicts load rate
  verdicts=$(verdicts "$out/$name.check.json")
  load=$("$bin/forkless-bench" load --url "$url" --load notify --clients 16 --count 1000 --seconds "$seconds")
  echo "$load" >"$out/$name.load.txt"
  rate=$(throughput "$load")
  echo "compare-rmcp: $name: $verdicts; ${rate:-?} notifications/s"
}

start() { # example args… ; sets $url and $pid
  local log="$out/$1.log"
  "$bin/examples/$1" "${@:2}" >"$log" 2>&1 &
  pid=$!
  local i
  for i in $(seq 1 100); do
    if grep -q "listening on" "$log"; then
      url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$log" | head -1)
      return 0
    fi
    sleep 0.1
  done
  echo "compare-rmcp: $1 did not start" >&2
  return 1
}

start counter_rmcp --listen "127.0.0.1:$(free_port)"
run_side rmcp "$url"
kill "$pid" 2>/dev/null || true

start counter --listen "127.0.0.1:$(free_port)" --memory
run_side forkless "$url"
kill "$pid" 2>/dev/null || true
