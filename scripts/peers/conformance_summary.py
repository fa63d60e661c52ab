#!/usr/bin/env python3
"""Summarise a `conformance server -o DIR` run (@modelcontextprotocol/conformance 0.1.16).

The runner writes DIR/server-<scenario>-<timestamp>/checks.json per scenario: a JSON
array of checks {id, name, description, status, errorMessage?, details?, ...} with
status SUCCESS | FAILURE | WARNING | INFO. A scenario fails when any check is FAILURE.

Exit status: 0 when no *active* scenario failed and every expected scenario produced
results; 1 otherwise. Pending scenarios (the suite's own "pending" list) are reported
but never fail the run.

Usage: conformance_summary.py DIR [--expect NAME ...] [--pending NAME ...]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

# `conformance server --suite pending` in 0.1.16 (not exposed by `list`; from the
# package source: the `pending` array in dist/index.js).
DEFAULT_PENDING = ["json-schema-2020-12", "server-sse-polling"]


def load(dir_: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in sorted(glob.glob(os.path.join(dir_, "server-*", "checks.json"))):
        base = os.path.basename(os.path.dirname(path))
        m = re.match(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$", base)
        name = m.group(1) if m else base[len("server-") :]
        try:
            with open(path, encoding="utf-8") as f:
                out[name] = json.load(f)
        except (OSError, ValueError) as e:
            out[name] = [{"id": name, "name": name, "status": "FAILURE", "errorMessage": f"unreadable checks.json: {e}"}]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--expect", nargs="*", default=[], help="scenarios that must have results")
    ap.add_argument("--pending", nargs="*", default=None, help="scenarios that never fail the run")
    a = ap.parse_args()
    pending = set(DEFAULT_PENDING if a.pending is None else a.pending)
    env_pending = os.environ.get("CONFORMANCE_PENDING")
    if env_pending is not None:
        pending = {p for p in env_pending.replace(",", " ").split() if p}

    results = load(a.dir)
    names = list(dict.fromkeys(a.expect + list(results)))
    active_failed: list[str] = []
    pending_failed: list[str] = []
    missing: list[str] = []
    n_pass = 0
    rows = []
    for name in names:
        checks = results.get(name)
        kind = "pending" if name in pending else "active"
        if checks is None:
            missing.append(name)
            rows.append(("MISSING", name, kind, 0, 0, 0))
            continue
        s = sum(c.get("status") == "SUCCESS" for c in checks)
        f = sum(c.get("status") == "FAILURE" for c in checks)
        w = sum(c.get("status") == "WARNING" for c in checks)
        if f:
            (pending_failed if kind == "pending" else active_failed).append(name)
            verdict = "FAIL"
        else:
            verdict = "PASS"
            n_pass += 1
        rows.append((verdict, name, kind, s, f, w))

    width = max((len(r[1]) for r in rows), default=10)
    print(f"\n=== forkless conformance summary ({a.dir}) ===")
    print(f"{'result':8} {'scenario':{width}} {'suite':8} checks: ok/fail/warn")
    for verdict, name, kind, s, f, w in rows:
        print(f"{verdict:8} {name:{width}} {kind:8} {s}/{f}/{w}")

    def detail(status: str, label: str) -> None:
        items = [(n, c) for n in names for c in results.get(n, []) if c.get("status") == status]
        if not items:
            return
        print(f"\n{label}:")
        for n, c in items:
            msg = c.get("errorMessage") or c.get("description") or ""
            print(f"  [{n}] {c.get('id')}: {msg}")

    detail("FAILURE", "Failed checks")
    detail("WARNING", "Warnings (do not fail the run)")
    if missing:
        print(f"\nScenarios without results (runner crashed or was cut short): {', '.join(missing)}")
    if pending_failed:
        print(f"\nPending scenarios failing (informational): {', '.join(pending_failed)}")

    n_fail = len(active_failed) + len(missing)
    print()
    print(f"conformance: {n_pass} passed, {n_fail} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
