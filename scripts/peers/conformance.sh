#!/usr/bin/env bash
# Run the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# scripts/peers/node/package-lock.json) in server mode, `--suite all`, against URL.
#
# Usage: scripts/peers/conformance.sh URL [extra conformance-server args...]
#   e.g. scripts/peers/conformance.sh http://127.0.0.1:8080/mcp
#        scripts/peers/conformance.sh http://127.0.0.1:8080/mcp --scenario tools-list
#
# - Uses Node 22 from .peers/node22 (first on PATH for this command only); runs
#   scripts/peers/install.sh first (fast no-op when already installed).
# - URL must be a localhost / 127.0.0.1 / [::1] URL (the dns-rebinding scenario
#   fails on any other host).
# - Results: $CONFORMANCE_OUT (default target/conformance/run-<UTC timestamp>/):
#   conformance.log (runner output) and server-<scenario>-<ts>/checks.json.
# - Prints a per-scenario summary and exits 1 if any active scenario has a FAILURE
#   check (pending scenarios json-schema-2020-12 and server-sse-polling are reported
#   but do not fail the run; override with CONFORMANCE_PENDING="a b"), 2 on usage or
#   runner errors.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
peers="${FORKLESS_PEERS_DIR:-$root/.peers}"

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  [[ $# -lt 1 ]] && exit 2 || exit 0
fi
url="$1"; shift
[[ "$url" =~ ^https?:// ]] || { echo "conformance.sh: URL must start with http:// or https://, got '$url'" >&2; exit 2; }

"$here/install.sh" --only node22 --only node >&2

node22="$peers/node22/bin"
cli="$peers/node/node_modules/@modelcontextprotocol/conformance/dist/index.js"
[[ -x "$node22/node" && -f "$cli" ]] || { echo "conformance.sh: peers missing after install" >&2; exit 2; }

out="${CONFORMANCE_OUT:-$root/target/conformance/run-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"

run_node() { PATH="$node22:$PATH" node "$@"; }

# The scenario names `--suite all` will run, to notice scenarios that produced no result.
mapfile -t expected < <(run_node "$cli" list --server | sed -n 's/^  - \([^ ]*\).*/\1/p')
[[ ${#expected[@]} -gt 0 ]] || { echo "conformance.sh: could not list server scenarios" >&2; exit 2; }

# Only check the server when running the whole suite (a single --scenario run is the caller's business).
whole_suite=1
for a in "$@"; do [[ "$a" == --scenario || "$a" == --scenario=* ]] && whole_suite=0; done

echo "conformance: $(run_node "$cli" --version) with node $(run_node --version) against $url" >&2
echo "conformance: results in $out" >&2
set +e
run_node "$cli" server --url "$url" --suite all -o "$out" "$@" 2>&1 | tee "$out/conformance.log"
rc=${PIPESTATUS[0]}
set -e
# Runner exit: 0 = no FAILURE check, 1 = some FAILURE check (pending included); anything else = crash.
if [[ $rc -ne 0 && $rc -ne 1 ]]; then
  echo "conformance.sh: runner exited with $rc (see $out/conformance.log)" >&2
  exit 2
fi

expect_args=()
[[ $whole_suite -eq 1 ]] && expect_args=(--expect "${expected[@]}")
python3 "$here/conformance_summary.py" "$out" "${expect_args[@]}"
