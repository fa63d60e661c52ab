#!/usr/bin/env bash
# The whole test suite: what a new user runs, and exactly what CI runs (.ci/run calls this).
#
# 0. Installs the Debian packages the tests need when missing (scripts/system-packages.sh).
# 1. Installs the official MCP peers (Python SDK v1 and v2, TypeScript SDK v1 and v2, the conformance
#    suite and the Node.js 22 it needs) into the git-ignored .peers/ folder; idempotent.
# 2. Runs every Rust test: unit, property and model-check tests of the core and stores,
#    end-to-end tests over real sockets, crash/restart tests over real processes, interop
#    with the SDKs and the conformance suite. Benches run once each in test mode.
# 3. Ends with one line totalling every test binary: "tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh
bash scripts/peers/install.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
