#!/usr/bin/env bash
# The whole test suite: what a new user runs, and exactly what CI runs (.ci/run calls this).
#
# 0. Installs the Debian packages the tests need when missing (scripts/system-packages.sh).
# 1. Installs the official MCP peers (Python SDK v1 and v2, TypeScript SDK v1 and v2, the conformance
#    suite and the Node.js 22 it needs) into the git-ignored .peers/ folder; idempotent.
# 2. Runs every Rust test: unit, property and model-check tests of the core and stores,
#    end-to-end tests over real sockets, crash/restart tests over real processes, interop
#    with the SDKs and the conformance suite. Benches run once each in test mode.
# 3. Ends with one line totalling every test binary: "tests: N passed, M failed", and, when
#    tests returned early for want of a service (never under CI, where they fail instead),
#    ", K skipped: <what was missing>".
#
# CI is on when the CI variable is true, 1 or yes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh
bash scripts/peers/install.sh
# A fresh clone builds from nothing, so incremental state (about 1.4 GB) is only weight there.
case "$(printf %s "${CI:-}" | tr '[:upper:]' '[:lower:]')" in
    true | 1 | yes) export CI=true CARGO_INCREMENTAL=0 ;;
esac
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt 6000000 ]; then
    echo "warning: $((free_kb / 1024)) MiB free here; the build and the tests need about 5 GiB" >&2
fi
log=$(mktemp)
export FORKLESS_SKIPPED
FORKLESS_SKIPPED=$(mktemp)
trap 'rm -f "$log" "$FORKLESS_SKIPPED"' EXIT
status=0
# Arguments (say `-p forkless-store-postgres`) narrow the run; by default, every crate.
if [ "$#" -eq 0 ]; then set -- --workspace; fi
cargo test "$@" --all-targets --no-fail-fast 2>&1 | tee "$log" || status=$?
skipped=$(sort "$FORKLESS_SKIPPED" | uniq -c | sort -rn | awk '{ n = $1; $1 = ""; printf "%s%d for%s", (NR > 1 ? ", " : ""), n, $0 }')
awk -v skipped_file="$FORKLESS_SKIPPED" -v skipped="$skipped" '
    /^test result:/ { p += $4; f += $6 }
    END {
        k = 0
        while ((getline line < skipped_file) > 0) k++
        printf "tests: %d passed, %d failed", p - k, f
        if (k > 0) printf ", %d skipped: %s", k, skipped
        printf "\n"
    }' "$log"
exit "$status"
