#!/usr/bin/env python3
"""Interop: the official MCP Python SDK v2 client (`mcp` 2.x) reading a tool call's stream
while the server is killed with SIGKILL and restarted.

1. Connect (`mcp.Client` in `mode="legacy"`: the 2025 session handshake, whose streams are
   resumable; in 2026-07-28 there is no resumption, and a crash loses the call), call
   `start-notification-stream`
   {interval: 50, count: 30}; the server sends numbered notifications/message `#1`..`#30`.
2. After `#10`, print `CUT` on stdout: the harness kills the server (`kill -9`) and starts it
   again on the same address and data directory. The SDK's own reconnection resumes the
   stream with `Last-Event-ID` (after the server's `retry:`).
3. The call must end promptly, well before a 30 s timeout: every notification exactly once
   and the result, or a typed JSON-RPC error (the server answers a request its restart lost
   with -32603, carrying the request's id) after the surviving notifications, each exactly
   once and in order.

Usage: python tests/interop/python2/client_crash.py URL
Prints `PASS client_crash (python v2) ...` or `FAIL client_crash (python v2): reason`;
exit 0/1.
"""

import re
import sys
import time

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError

NAME = "client_crash (python v2)"
COUNT = 30
CUT_AFTER = 10


def fail(why: str) -> None:
    print(f"FAIL {NAME}: {why}", flush=True)
    sys.exit(1)


async def main(url: str) -> None:
    numbers: list[int] = []
    cut = False

    async def on_log(params) -> None:
        nonlocal cut
        m = re.search(r"#(\d+)\s*$", str(params.data))
        if not m:
            return
        numbers.append(int(m.group(1)))
        if int(m.group(1)) == CUT_AFTER and not cut:
            cut = True
            print("CUT", flush=True)  # the harness kills and restarts the server now

    started = time.monotonic()
    outcome: tuple[str, object]
    async with Client(url, mode="legacy", logging_callback=on_log, read_timeout_seconds=30) as client:
        try:
            with anyio.fail_after(30):
                result = await client.call_tool("start-notification-stream", {"interval": 50, "count": COUNT})
            outcome = ("result", result)
        except MCPError as e:
            outcome = ("error", e)
        except TimeoutError:
            fail(f"the call did not end within 30 s (got {numbers})")
    took = time.monotonic() - started

    if not cut:
        fail(f"the server was never cut (got {numbers})")
    if len(set(numbers)) != len(numbers):
        fail(f"duplicates in {numbers}")
    if numbers != list(range(1, len(numbers) + 1)):
        fail(f"not 1..n in order: {numbers}")
    if took >= 25:
        fail(f"the call took {took:.1f} s: it waited for a timeout instead of ending")
    kind, value = outcome
    if kind == "result":
        if len(numbers) != COUNT:
            fail(f"a result after {len(numbers)} of {COUNT} notifications")
        print(f"PASS {NAME}: #1..#{COUNT} exactly once and the result, in {took:.1f} s", flush=True)
    else:
        if value.code != -32603:
            fail(f"the call failed untyped (code {value.code}): {value.message}")
        print(
            f"PASS {NAME}: #1..#{len(numbers)} exactly once, then the typed error {value.code} "
            f"({value.message}) for the lost request, in {took:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    if len(sys.argv) != 2 or not re.match(r"^https?://", sys.argv[1]):
        print("usage: client_crash.py URL", file=sys.stderr)
        sys.exit(2)
    anyio.run(main, sys.argv[1])
