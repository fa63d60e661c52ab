#!/usr/bin/env bash
# End-to-end benchmarks: forkless against a bare hyper 1 echo (the ceiling), rmcp (the
# official Rust SDK) and the TypeScript / Python SDK v1 servers, on the same loads in one
# run. Figures and how to read them: docs/benchmarks.md.
#
#   scripts/bench.sh            full run (release builds, rmcp reference, SDK peers if installed)
#   scripts/bench.sh --quick    CI smoke: a fraction of a second per load, no rmcp build, no peers
#   scripts/bench.sh [--quick] [forkless-bench run flags, e.g. --only echo]
#
# CPU split on a 2-core machine: every server under test runs alone on CPU 0
# (`taskset -c 0`), the load generator (one thread) on CPU 1 (`taskset -c 1`).
# Results: target/bench/results.{json,md} (target/bench-quick/ for --quick).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
args=()
for a in "$@"; do
  if [[ "$a" == "--quick" ]]; then quick=1; else args+=("$a"); fi
done

pin=()
if command -v taskset >/dev/null && [[ "$(nproc)" -ge 2 ]]; then
  pin=(taskset -c 1)
else
  args+=(--no-pin)
fi

if [[ $quick == 1 ]]; then
  cargo build --release -p forkless-bench --features early-delivery
  exec "${pin[@]}" target/release/forkless-bench run --quick --out target/bench-quick "${args[@]}"
fi

cargo build --release -p forkless-bench --features early-delivery
# The rmcp reference: its own (non-workspace) package and target dir, built only here.
CARGO_TARGET_DIR=bench/rmcp-echo/target cargo build --release --manifest-path bench/rmcp-echo/Cargo.toml
peers=()
if [[ -x .peers/node22/bin/node || -x .peers/py/bin/python ]]; then
  peers=(--peers "$PWD")
else
  echo "bench: SDK peers not installed (bash scripts/peers/install.sh); running without them" >&2
fi
exec "${pin[@]}" target/release/forkless-bench run --out target/bench \
  --rmcp bench/rmcp-echo/target/release/rmcp-echo "${peers[@]}" "${args[@]}"
