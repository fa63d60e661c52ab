#!/usr/bin/env python3
"""Interop: the official MCP Python SDK v2 client (`mcp` 2.x) in its default mode (`auto`:
`server/discover`, falling back to the 2025 `initialize`) calling a 20-step tool whose
connection is cut after the fifth progress notification, as a user of the SDK would meet it.

1. Connect in the default mode, print the negotiated revision (`REVISION 2025-11-25` or
   `REVISION 2026-07-28`), call `long-task` {steps: 20, interval: 40} with a progress callback.
2. After progress 5, print `CUT` on stdout: the harness drops every open connection between
   the client and the server (the server keeps running).
3. PASS when the call ends with its result and progress 1..20, each exactly once, in order;
   FAIL otherwise (with what the SDK reported). A session revision resumes the cut stream; in
   2026-07-28 a cut loses the call (no resumption, by the revision's design).

Usage: .peers/py2/bin/python tests/interop/python2/client_auto_cut.py URL
Prints `PASS client_auto_cut (python v2) ...` or `FAIL client_auto_cut (python v2): reason`.
"""

import sys

import anyio
from mcp import Client

NAME = "client_auto_cut (python v2)"
STEPS = 20
CUT_AFTER = 5


def done(verdict: str, why: str) -> None:
    print(f"{verdict} {NAME}: {why}", flush=True)
    sys.exit(0 if verdict == "PASS" else 1)


async def main(url: str) -> None:
    progress: list[float] = []
    cut = False

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        nonlocal cut
        progress.append(value)
        if value == CUT_AFTER and not cut:
            cut = True
            print("CUT", flush=True)

    async with Client(url, read_timeout_seconds=30) as client:
        print(f"REVISION {client.protocol_version}", flush=True)
        try:
            with anyio.fail_after(30):
                result = await client.call_tool(
                    "long-task", {"steps": STEPS, "interval": 40}, progress_callback=on_progress
                )
        except Exception as e:  # what the SDK raises when the call is lost
            done("FAIL", f"the call failed after progress {progress}: {type(e).__name__}: {e}")
    if not cut:
        done("FAIL", f"never cut (progress {progress})")
    if result.is_error:
        done("FAIL", f"an error result: {result.content}")
    if progress != [float(i) for i in range(1, STEPS + 1)]:
        done("FAIL", f"progress {progress}, expected 1..{STEPS} exactly once")
    done("PASS", f"progress 1..{STEPS} exactly once and the result across the cut")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
