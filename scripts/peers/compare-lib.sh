# Helpers the comparison scripts share (sourced by compare-gateways.sh and compare-rmcp.sh).

# A free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# "P PASS, F FAIL, U UNSUPPORTED" of a `forkless check --json` report.
verdicts() { # report.json
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
c = {"PASS": 0, "FAIL": 0, "UNSUPPORTED": 0}
for s in r["scenarios"]:
    c[s["verdict"]] = c.get(s["verdict"], 0) + 1
print("%d PASS, %d FAIL, %d UNSUPPORTED" % (c["PASS"], c["FAIL"], c["UNSUPPORTED"]))' "$1"
}

# The `throughput:` figure of a `forkless-bench load` result line.
throughput() { sed -n 's/.*throughput: \([0-9.]*\).*/\1/p' <<<"$1"; }
