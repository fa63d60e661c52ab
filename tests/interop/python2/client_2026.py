#!/usr/bin/env python3
"""Interop: the official MCP Python SDK v2 client (`mcp` 2.x) pinned to 2026-07-28, and in
auto mode (which must choose 2026-07-28 now that the server answers `server/discover`).

In each mode: list tools (must list `long-task`), call `long-task` {steps: 3, interval: 10}
with a progress callback (progress 1..3, total 3, in order, before the result), call
`test_logging_tool` with `log_level="info"` (its three log messages arrive) and without an
opt-in (none arrive), and call `test_elicitation` with an elicitation callback: the server's
one input API answers it with an `InputRequiredResult`, the SDK asks the callback and retries,
and the tool reports the callback's answer.

Usage: .peers/py2/bin/python tests/interop/python2/client_2026.py URL
Prints `PASS client_2026 (python v2) ...` or `FAIL client_2026 (python v2): reason`; exit 0/1.
"""

import sys

import anyio
import mcp_types as types
from mcp import Client

NAME = "client_2026 (python v2)"


def fail(why: str) -> None:
    print(f"FAIL {NAME}: {why}", flush=True)
    sys.exit(1)


async def run(url: str, mode: str) -> str:
    progress: list[tuple[float, float | None]] = []
    logs: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async def on_log(params) -> None:
        logs.append(str(params.data))

    asked: list[str] = []

    async def on_elicit(context, params) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async with Client(
        url, mode=mode, logging_callback=on_log, elicitation_callback=on_elicit, read_timeout_seconds=30
    ) as client:
        if client.protocol_version != "2026-07-28":
            fail(f"{mode}: negotiated {client.protocol_version}, expected 2026-07-28")
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        if "long-task" not in names:
            fail(f"{mode}: tools/list lacks long-task: {names}")
        result = await client.call_tool("long-task", {"steps": 3, "interval": 10}, progress_callback=on_progress)
        if result.is_error:
            fail(f"{mode}: long-task returned isError: {result.content}")
        if [p for p, _ in progress] != [1, 2, 3] or {t for _, t in progress} != {3}:
            fail(f"{mode}: progress {progress}, expected 1..3 of 3")
        quiet = await client.call_tool("test_logging_tool", {})
        if quiet.is_error or logs:
            fail(f"{mode}: logs without an opt-in: {logs}")
        elicited = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        text = " ".join(getattr(c, "text", "") for c in elicited.content)
        if elicited.is_error or asked != ["Who are you?"] or "action=accept" not in text or "ada@example.com" not in text:
            fail(f"{mode}: elicitation round trip: asked {asked}, answered {text!r}")
    async with Client(url, mode=mode, logging_callback=on_log, log_level="info", read_timeout_seconds=30) as client:
        loud = await client.call_tool("test_logging_tool", {})
        if loud.is_error or len(logs) != 3:
            fail(f"{mode}: with log_level=info, {len(logs)} log messages: {logs}")
    return f"{mode}: {len(names)} tools, progress {[p for p, _ in progress]}, logs {len(logs)}, elicited once"


async def main(url: str) -> None:
    summaries = []
    for mode in ["2026-07-28", "auto"]:
        with anyio.fail_after(60):
            summaries.append(await run(url, mode))
    print(f"PASS {NAME}: " + "; ".join(summaries), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: client_2026.py URL", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report any failure as FAIL
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        fail(f"{type(e).__name__}: {e}")
