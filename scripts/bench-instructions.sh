#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: deterministic for a given binary
# and load (it counts instructions, not time), so it compares servers and commits on a shared,
# noisy machine where throughput figures drift by ±30 %. See docs/benchmarks.md.
#
#   scripts/bench-instructions.sh            hyper, forkless (memory), rmcp; JSON and SSE echo
#   scripts/bench-instructions.sh forkless   only rows whose name starts with this
#   SERVER_BIN=/path/to/old/forkless-bench scripts/bench-instructions.sh forkless
#                                            the servers of another build (before/after)
#
# Each row runs the server under callgrind twice (1 s and 5 s of `forkless-bench load`, 16
# connections, one shared session) and reports the marginal cost: the difference in
# instructions divided by the difference in requests, so start-up and shutdown cancel out.
# Kernel work (syscalls, TCP) is not counted; `strace -c` shows those per request.
set -euo pipefail
cd "$(dirname "$0")/.."
only="${1:-}"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt install valgrind)" >&2; exit 1; }
cargo build -q --release -p forkless-bench
rmcp=bench/rmcp-echo/target/release/rmcp-echo
if [[ ! -x $rmcp ]]; then
  CARGO_TARGET_DIR=bench/rmcp-echo/target cargo build -q --release --manifest-path bench/rmcp-echo/Cargo.toml
fi
out=target/bench-instructions
mkdir -p "$out"
port=19300

# run NAME SECONDS LOADFLAGS -- SERVER COMMAND...  -> prints "ops instructions"
run() {
  local name=$1 secs=$2 flags=$3; shift 4
  port=$((port + 1))
  local file=${name//\//-}
  local cg="$out/$file.$secs.callgrind" log="$out/$file.$secs.log"
  rm -f "$cg"
  taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$cg" "$@" --listen "127.0.0.1:$port" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 150); do grep -q listening "$log" && break; sleep 0.2; done
  # shellcheck disable=SC2086
  local ops
  ops=$(taskset -c 1 target/release/forkless-bench load --url "http://127.0.0.1:$port/mcp" --clients 16 \
    --seconds "$secs" $flags | grep -o 'ops: [0-9]*' | grep -o '[0-9]*')
  kill -INT "$pid"
  wait "$pid" || true
  local ir
  ir=$(callgrind_annotate "$cg" 2>/dev/null | grep "PROGRAM TOTALS" | grep -o '^[0-9,]*' | tr -d ,)
  echo "$ops $ir"
}

row() {
  local name=$1 flags=$2; shift 2
  [[ -n $only && $name != "$only"* ]] && return 0
  read -r o1 i1 < <(run "$name" 1 "$flags" -- "$@")
  read -r o2 i2 < <(run "$name" 5 "$flags" -- "$@")
  printf '%-24s %8d instructions/request  (%d -> %d requests)\n' "$name" $(((i2 - i1) / (o2 - o1))) "$o1" "$o2"
}

server=${SERVER_BIN:-target/release/forkless-bench}
row hyper/json "" "$server" serve --target hyper --answer json
row hyper/sse --sse "$server" serve --target hyper --answer sse
row forkless/memory/json "" "$server" serve --target forkless --answer json
row forkless/memory/sse --sse "$server" serve --target forkless --answer sse
row rmcp/stateless/json "" "$rmcp" --mode stateless
row rmcp/stateful/sse --sse "$rmcp" --mode stateful
