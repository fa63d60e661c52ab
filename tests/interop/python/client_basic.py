#!/usr/bin/env python3
"""Interop: the official MCP Python SDK (v1) client against a Streamable HTTP server.

Steps: initialize; tools/list (must list `long-task`); tools/call `long-task`
{steps: 5, interval: 10} with a progress callback, asserting progress 1..5 (total 5)
arrives in order before the result; if the server lists `echo`, call it too.

Usage: [MCP_BEARER_TOKEN=...] .peers/py/bin/python tests/interop/python/client_basic.py URL
Prints `PASS client_basic (python) ...` or `FAIL client_basic (python): reason`;
exit status 0 on pass, 1 on failure, 2 on usage error.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback

import anyio
import mcp.types as types
from mcp import ClientSession

try:  # mcp >= 1.24
    from mcp.client.streamable_http import streamable_http_client as _http_client
except ImportError:  # pragma: no cover - older 1.x
    from mcp.client.streamable_http import streamablehttp_client as _http_client

NAME = "client_basic (python)"
TIMEOUT_S = 30


class Fail(Exception):
    pass


try:
    BaseExceptionGroup  # Python >= 3.11
except NameError:  # pragma: no cover - Python 3.10 (anyio depends on the backport there)
    from exceptiongroup import BaseExceptionGroup


def describe(e: BaseException) -> str:
    """One line for an exception, unwrapping anyio/asyncio exception groups."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    if isinstance(e, Fail):
        return str(e)
    return f"{type(e).__name__}: {e}"


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise Fail(msg)


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


def connect(url: str):
    """The SDK's Streamable HTTP client; with MCP_BEARER_TOKEN set, every request carries it
    (a server requiring OAuth)."""
    token = os.environ.get("MCP_BEARER_TOKEN")
    if not token:
        return _http_client(url)
    headers = {"Authorization": f"Bearer {token}"}
    if "headers" in inspect.signature(_http_client).parameters:
        return _http_client(url, headers=headers)
    import httpx

    return _http_client(url, http_client=httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)))


async def run(url: str) -> str:
    progress: list[tuple[float, float | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async with connect(url) as (read, write, get_session_id):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            names = [t.name for t in tools.tools]
            check("long-task" in names, f"tools/list lacks long-task: {names}")

            result = await session.call_tool("long-task", {"steps": 5, "interval": 10}, progress_callback=on_progress)
            check(not result.isError, f"long-task returned isError: {texts(result)}")
            check(len(result.content) > 0, "long-task returned no content")
            values = [p for p, _ in progress]
            check(values == [1, 2, 3, 4, 5], f"progress values {values}, expected [1, 2, 3, 4, 5]")
            totals = {t for _, t in progress}
            check(totals == {5}, f"progress totals {sorted(totals, key=str)}, expected 5")

            echo = ""
            if "echo" in names:
                r = await session.call_tool("echo", {"text": "hello forkless"})
                check(not r.isError and any("hello forkless" in t for t in texts(r)), f"echo returned {texts(r)}")
                echo = ", echo ok"
            return (
                f"protocol {init.protocolVersion}, session {get_session_id()}, "
                f"{len(names)} tools, progress {values}{echo}, result {texts(result)}"
            )


def main() -> int:
    if len(sys.argv) != 2 or not sys.argv[1].startswith(("http://", "https://")):
        print(f"usage: {sys.argv[0]} URL   (e.g. http://127.0.0.1:8080/mcp)", file=sys.stderr)
        return 2
    try:
        summary = anyio.run(_with_timeout, sys.argv[1])
    except BaseException as e:  # noqa: BLE001 - report anything as a failure
        if not isinstance(e, Fail):
            traceback.print_exc()
        print(f"FAIL {NAME}: {describe(e)}")
        return 1
    print(f"PASS {NAME}: {summary}")
    return 0


async def _with_timeout(url: str) -> str:
    try:
        with anyio.fail_after(TIMEOUT_S):
            return await run(url)
    except TimeoutError:
        raise Fail(f"timed out after {TIMEOUT_S}s") from None


if __name__ == "__main__":
    sys.exit(main())
