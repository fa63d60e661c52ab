# Sourced by the benchmark scripts: a scratch directory ($work) and the one server they run at
# a time ($server, a pid), both gone when the script exits however it exits.
work=$(mktemp -d)
server=""
cleanup() {
  if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
