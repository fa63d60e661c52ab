#!/usr/bin/env bash
# What a forwarded request costs (owner routing, docs/shared-stores.md): two `forkless serve`
# nodes (release builds) on one fresh PostgreSQL database, each advertising its address.
# The same echo load (`forkless-bench load`, 16 connections sharing one session, SSE answers)
# runs twice in one go: sent to the session's owner (node a), and sent to node b, which
# forwards every call to node a. For each run it prints requests per second, the latency
# percentiles, and the database transactions per request (pg_stat_database).
#
# Usage: scripts/bench-forward.sh [POSTGRES_BASE_URL] [SECONDS]
#   default postgres://postgres@127.0.0.1:5432, 10 s per run.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-postgres://postgres@127.0.0.1:5432}"
seconds="${2:-10}"
db="forkless_bench_forward"
cargo build --release -q -p forkless -p forkless-bench
psql "$base/postgres" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
url="$base/$db"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pa=$(port); pb=$(port)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for spec in "a $pa" "b $pb"; do
  set -- $spec
  RUST_LOG=warn target/release/forkless serve --listen "127.0.0.1:$2" --store "$url" \
    --node-id "$1" --advertise "http://127.0.0.1:$2" >/dev/null &
  pids+=($!)
done
for p in $pa $pb; do
  until curl -s -o /dev/null "http://127.0.0.1:$p/healthz"; do sleep 0.1; done
done
commits() { psql "$url" -Atc "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$db'"; }
run() { # name, load url
  local before after out
  before=$(commits)
  out=$(target/release/forkless-bench load --url "$2" --session-at "http://127.0.0.1:$pa/mcp" \
    --load echo --clients 16 --seconds "$seconds" --sse)
  after=$(commits)
  echo "$1: $out"
  echo "$1: database transactions: $((after - before))"
}
run "to the owner (a)" "http://127.0.0.1:$pa/mcp"
run "via node b (forwarded)" "http://127.0.0.1:$pb/mcp"
curl -s "http://127.0.0.1:$pb/metrics" | grep '^forkless_forwarded_requests_total'
