#!/usr/bin/env bash
# The whole test suite: what a new user runs, and exactly what CI runs (.ci/run calls this).
#
# 1. Installs the official MCP peers (Python SDK v1, TypeScript SDK v1, the conformance
#    suite and the Node.js 22 it needs) into the git-ignored .peers/ folder; idempotent.
# 2. Runs every Rust test: unit, property and model-check tests of the core and stores,
#    end-to-end tests over real sockets, interop with the SDKs, the conformance suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/peers/install.sh
cargo test --workspace --all-targets
