#!/usr/bin/env bash
# Debian packages the tests need beyond the machine's running services, installed with
# apt-get only when missing (idempotent):
#
#   redis-server   the lost-suffix tests start private Redis processes on free ports
#                  (crates/forkless-store-redis/tests/lost_suffix.rs)
#   haproxy        the many-node tests put forkless serve processes behind a real load
#                  balancer (crates/forkless/tests/cluster.rs)
#   chromium       the report tests render `check --report` and `chaos --report` pages in a
#                  real headless browser (crates/forkless/tests/report.rs)
#
# PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) themselves are the machine's.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v haproxy >/dev/null || need+=(haproxy)
command -v chromium >/dev/null || need+=(chromium)
[[ ${#need[@]} -eq 0 ]] && exit 0

sudo=()
[[ $(id -u) -ne 0 ]] && sudo=(sudo)
echo "[system] installing: ${need[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}"
