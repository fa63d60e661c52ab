# Sourced by the scripts that run `forkless-bench serve` targets one after the other
# (bench-syscalls.sh, bench-tls.sh): the release build, CPU pinning (servers on CPU 0, the
# load on CPU 1; FORKLESS_BENCH_NO_PIN=1 for none), a scratch directory, and starting and
# stopping one server at a time. The caller sets $name (for messages) before sourcing.
cargo build --release -q -p forkless-bench
bench=target/release/forkless-bench
server_cpu=(taskset -c 0)
load_cpu=(taskset -c 1)
if [[ -n "${FORKLESS_BENCH_NO_PIN:-}" ]]; then server_cpu=(); load_cpu=(); fi
# shellcheck source=scripts/bench-scratch.sh
source scripts/bench-scratch.sh

# The rmcp reference (bench/rmcp-echo, its own package and target directory), built on first
# use by a script that starts the `rmcp` target.
rmcp=bench/rmcp-echo/target/release/rmcp-echo
build_rmcp() {
  CARGO_TARGET_DIR=bench/rmcp-echo/target cargo build --release -q --manifest-path bench/rmcp-echo/Cargo.toml
}

# Start `forkless-bench serve --target TARGET --answer sse [FLAGS…]` (or, for the target
# `rmcp`, rmcp's stateful server) on the server CPU; sets $server and $url (from its
# `listening on URL` line).
start() {
  local target=$1
  shift
  if [[ "$target" == rmcp ]]; then
    "${server_cpu[@]}" "$rmcp" --listen 127.0.0.1:0 --mode stateful >"$work/serve.log" 2>&1 &
  else
    "${server_cpu[@]}" "$bench" serve --target "$target" --answer sse --listen 127.0.0.1:0 "$@" >"$work/serve.log" 2>&1 &
  fi
  server=$!
  for _ in $(seq 100); do
    url=$(awk '/listening on/ { print $3 }' "$work/serve.log")
    [[ -n "$url" ]] && return 0
    sleep 0.05
  done
  echo "$name: $target did not start: $(cat "$work/serve.log")" >&2
  exit 1
}

stop() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=""
}
