#!/usr/bin/env bash
# Run `forkless check` against MCP servers built on the official SDKs with resumability
# turned on (an event store), and record what it observes. The peers are expected to fail
# some scenarios: the point is to see which, with the evidence. docs/peers.md records the
# results.
#
#   python-sdk        tests/interop/python/reference_server.py  (Python SDK v1, `mcp`),
#                     its own in-memory EventStore (a global counter as event id)
#   ts-sdk            tests/interop/ts/reference_server.mjs     (TypeScript SDK v1),
#                     its own in-memory event store (a global counter as event id)
#   ts-sdk-example    the same server with --sdk-event-store: the SDK's example
#                     InMemoryEventStore (examples/shared/inMemoryEventStore.js)
#
# Installs the peers first (scripts/peers/install.sh, idempotent) and builds forkless unless
# FORKLESS_BIN names a binary. Each report goes to $CHECK_PEERS_OUT (default
# target/check-peers)/<peer>.json; a summary per scenario is printed. Ends with one line
# per peer: `check-peers: <peer> (<sdk> <version>): P PASS, F FAIL, U UNSUPPORTED`.
#
# Exit status: 0 when every peer was probed (whatever the verdicts), 1 when a peer could not
# be started or probed.
#
# Usage: scripts/peers/check-peers.sh [--no-install] [python-sdk|ts-sdk|ts-sdk-example]...
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
out="${CHECK_PEERS_OUT:-$root/target/check-peers}"
install=1
peers=()
for arg in "$@"; do
  case "$arg" in
    --no-install) install=0 ;;
    python-sdk|ts-sdk|ts-sdk-example) peers+=("$arg") ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-peers.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done
[[ ${#peers[@]} -gt 0 ]] || peers=(python-sdk ts-sdk ts-sdk-example)

[[ $install -eq 1 ]] && bash "$here/install.sh" >&2
if [[ -z "${FORKLESS_BIN:-}" ]]; then
  cargo build --quiet -p forkless >&2
  FORKLESS_BIN="$root/target/debug/forkless"
fi
mkdir -p "$out"

py="$root/.peers/py/bin/python"
sdk_version() {
  case "$1" in
    python-sdk) "$py" -c 'import importlib.metadata as m; print("mcp (Python SDK)", m.version("mcp"))' ;;
    ts-*) node -e 'console.log("@modelcontextprotocol/sdk", require(process.argv[1]).version)' \
            "$root/.peers/node/node_modules/@modelcontextprotocol/sdk/package.json" ;;
  esac
}

server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap stop_server EXIT

status=0
summaries=()
for peer in "${peers[@]}"; do
  case "$peer" in
    python-sdk) cmd=("$py" tests/interop/python/reference_server.py --port 0) ;;
    ts-sdk) cmd=(node tests/interop/ts/reference_server.mjs --port 0) ;;
    ts-sdk-example) cmd=(node tests/interop/ts/reference_server.mjs --port 0 --sdk-event-store) ;;
  esac
  ready="$out/$peer.ready"
  : >"$ready"
  "${cmd[@]}" >"$ready" 2>"$out/$peer.stderr" &
  server_pid=$!
  url=""
  for _ in $(seq 1 200); do
    url="$(sed -n 's/^READY //p' "$ready" | head -n1)"
    [[ -n "$url" ]] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  if [[ -z "$url" ]]; then
    echo "check-peers: $peer did not start (see $out/$peer.stderr)" >&2
    status=1
    stop_server
    continue
  fi
  version="$(sdk_version "$peer")"
  echo "== $peer ($version) at $url: $FORKLESS_BIN check $url --json"
  code=0
  "$FORKLESS_BIN" check "$url" --json >"$out/$peer.json" 2>"$out/$peer.check.stderr" || code=$?
  stop_server
  if [[ $code -ne 0 && $code -ne 1 ]]; then
    echo "check-peers: forkless check could not probe $peer (exit $code):" >&2
    cat "$out/$peer.check.stderr" >&2
    status=1
    continue
  fi
  summary="$(python3 - "$out/$peer.json" "$peer" "$version" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for s in report["scenarios"]:
    print(f"  {s['name']:<20} {s['verdict']:<12} {s['evidence'][-1]}")
print(f"check-peers: {sys.argv[2]} ({sys.argv[3]}): {report['passed']} PASS, "
      f"{report['failed']} FAIL, {report['unsupported']} UNSUPPORTED")
PY
)"
  echo "${summary%$'\n'*}"
  summaries+=("${summary##*$'\n'}")
done
printf '%s\n' "${summaries[@]}"
exit "$status"
