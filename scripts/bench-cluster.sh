#!/usr/bin/env bash
# The cluster's figures (issues 13 and 14), in one run: `forkless serve` release builds on
# PostgreSQL and on Redis, one and three nodes behind HAProxy (round-robin, no stickiness),
# against the embedded default (redb, batched) on one node, direct and behind the same HAProxy.
#
#   echo-sse, echo-json  16 connections, a session each (created through the balancer, so on
#                        three nodes two calls in three reach another node than the owner and
#                        are forwarded), one `tools/call echo` in flight each: requests/s, p50,
#                        p99, and on PostgreSQL the database transactions per request.
#   cross-resume         a session and its 10-notification stream on node a, resumed with
#                        Last-Event-ID on node b (or on a, for comparison): latency per resume
#                        from the GET to the last replayed event, p50 and p99 of 200.
#
# Nothing is pinned: the nodes, HAProxy, the database and the load share the machine's cores,
# so compare figures within one run only.
#
# Usage: scripts/bench-cluster.sh [SECONDS]      (default 10 s per echo run)
#   POSTGRES (default postgres://postgres@127.0.0.1:5432) and REDIS (default
#   redis://127.0.0.1:6379) name the servers; each run gets a fresh database or key prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
pg="${POSTGRES:-postgres://postgres@127.0.0.1:5432}"
redis="${REDIS:-redis://127.0.0.1:6379}"
command -v haproxy >/dev/null || { echo "haproxy is not installed (bash scripts/system-packages.sh)" >&2; exit 1; }
cargo build --release -q -p forkless -p forkless-bench
work=$(mktemp -d)
pids=()
stop() { kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; pids=(); }
cleanup() {
  stop
  redis-cli -u "$redis" --scan --pattern 'fk_bench_cluster*' | xargs -r -n 500 redis-cli -u "$redis" del >/dev/null
  psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS fk_bench_cluster" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ready() { until curl -s -o /dev/null "http://127.0.0.1:$1/healthz"; do sleep 0.1; done; }
run=0

# start STORE NODES ANSWER: NODES `forkless serve` on a fresh store; sets `ports`.
start() {
  local store=$1 n=$2 answer=$3 url i p
  run=$((run + 1))
  case $store in
    redb) url="" ;;
    postgres)
      psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS fk_bench_cluster" -c "CREATE DATABASE fk_bench_cluster"
      url="$pg/fk_bench_cluster" ;;
    redis) url="$redis#fk_bench_cluster$run" ;;
  esac
  ports=()
  for i in $(seq 1 "$n"); do
    p=$(port)
    ports+=("$p")
    if [ "$store" = redb ]; then
      RUST_LOG=warn target/release/forkless serve --listen "127.0.0.1:$p" --answer "$answer" \
        --data-dir "$work/redb$run" >/dev/null &
    else
      RUST_LOG=warn target/release/forkless serve --listen "127.0.0.1:$p" --answer "$answer" \
        --store "$url" --node-id "n$i" --advertise "http://127.0.0.1:$p" >/dev/null &
    fi
    pids+=($!)
  done
  for p in "${ports[@]}"; do ready "$p"; done
}

# balance: HAProxy in front of `ports`; sets `lb`.
balance() {
  local p cfg="$work/haproxy$run.cfg"
  lb=$(port)
  {
    printf 'global\n  maxconn 2000\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n'
    printf '  timeout server 120s\n  option http-server-close\n  retries 3\n  option redispatch 1\n'
    printf 'frontend fe\n  bind 127.0.0.1:%s\n  default_backend nodes\nbackend nodes\n  balance roundrobin\n' "$lb"
    for p in "${ports[@]}"; do printf '  server n%s 127.0.0.1:%s\n' "$p" "$p"; done
  } >"$cfg"
  haproxy -db -f "$cfg" >/dev/null 2>&1 &
  pids+=($!)
  until curl -s -o /dev/null "http://127.0.0.1:$lb/"; do sleep 0.1; done
}

commits() {
  psql "$pg/fk_bench_cluster" -Atc \
    "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'fk_bench_cluster'"
}

# echo LABEL STORE ANSWER PORT: the echo load at PORT; on PostgreSQL, transactions per request.
echo_load() {
  local label=$1 store=$2 answer=$3 at=$4 before after out ops flag=""
  [ "$answer" = sse ] && flag=--sse
  [ "$store" = postgres ] && before=$(commits)
  out=$(target/release/forkless-bench load --url "http://127.0.0.1:$at/mcp" --load echo --clients 16 \
    --seconds "$seconds" --session-per-client $flag)
  echo "echo-$answer $label: $out"
  if [ "$store" = postgres ]; then
    after=$(commits)
    ops=$(grep -o 'ops: [0-9]*' <<<"$out" | grep -o '[0-9]*')
    echo "echo-$answer $label: database transactions per request: $(python3 -c "print(round(($after - $before) / max($ops, 1), 2))")"
  fi
}

for answer in sse json; do
  start redb 1 "$answer"
  echo_load "redb, one node, direct" redb "$answer" "${ports[0]}"
  balance
  echo_load "redb, one node, HAProxy" redb "$answer" "$lb"
  stop
  for store in postgres redis; do
    for n in 1 3; do
      start "$store" "$n" "$answer"
      balance
      echo_load "$store, $n node(s), HAProxy" "$store" "$answer" "$lb"
      stop
    done
  done
done

start redb 1 sse
out=$(target/release/forkless-bench load --url "http://127.0.0.1:${ports[0]}/mcp" --load cross-resume --count 10)
echo "cross-resume redb, one node: $out"
stop
for store in postgres redis; do
  start "$store" 2 sse
  a="http://127.0.0.1:${ports[0]}/mcp"
  b="http://127.0.0.1:${ports[1]}/mcp"
  out=$(target/release/forkless-bench load --url "$a" --session-at "$a" --load cross-resume --count 10)
  echo "cross-resume $store, same node: $out"
  out=$(target/release/forkless-bench load --url "$b" --session-at "$a" --load cross-resume --count 10)
  echo "cross-resume $store, other node: $out"
  stop
done
