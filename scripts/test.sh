#!/usr/bin/env bash
# The whole test suite: what a new user runs, and exactly what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets
