#!/usr/bin/env python3
"""Interop: the official MCP Python SDK (v1) client against `forkless gateway` fronting
`@modelcontextprotocol/server-everything` (stdio), a server neither side wrote.

Steps: initialize; tools/list (must list `echo`, `trigger-long-running-operation`,
`trigger-sampling-request`); `echo`; `trigger-long-running-operation` {duration: 1,
steps: 5} with a progress callback, asserting progress 1..5 in order before the result;
`trigger-sampling-request`, answered by this client's sampling callback, asserting the
child saw the answer; `toggle-simulated-logging`, then waiting for one log message on
the standalone stream (the child's log messages name no request).

Usage: .peers/py/bin/python tests/interop/gateway/everything.py URL
Prints `PASS everything (python) ...` or `FAIL everything (python): reason`;
exit status 0 on pass, 1 on failure, 2 on usage error.
"""

from __future__ import annotations

import sys
import traceback

import anyio
import mcp.types as types
from mcp import ClientSession

try:  # mcp >= 1.24
    from mcp.client.streamable_http import streamable_http_client as _http_client
except ImportError:  # pragma: no cover - older 1.x
    from mcp.client.streamable_http import streamablehttp_client as _http_client

NAME = "everything (python)"
TIMEOUT_S = 40
SAMPLED = "an answer from the forkless test client"


class Fail(Exception):
    pass


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise Fail(msg)


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


async def run(url: str) -> str:
    progress: list[float] = []
    logs: list[types.LoggingMessageNotificationParams] = []
    got_log = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_sampling(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=SAMPLED), model="forkless-test"
        )

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)
        got_log.set()

    async with _http_client(url) as (read, write, get_session_id):
        async with ClientSession(read, write, sampling_callback=on_sampling, logging_callback=on_log) as session:
            init = await session.initialize()
            check(init.serverInfo.name.startswith("mcp-servers/everything"), f"serverInfo {init.serverInfo}")
            names = [t.name for t in (await session.list_tools()).tools]
            for want in ("echo", "trigger-long-running-operation", "trigger-sampling-request"):
                check(want in names, f"tools/list lacks {want}: {names}")

            r = await session.call_tool("echo", {"message": "hello forkless"})
            check(not r.isError and any("hello forkless" in t for t in texts(r)), f"echo returned {texts(r)}")

            r = await session.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 5}, progress_callback=on_progress
            )
            check(not r.isError, f"long-running operation returned isError: {texts(r)}")
            check(progress == [1, 2, 3, 4, 5], f"progress {progress}, expected [1, 2, 3, 4, 5]")

            r = await session.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
            check(not r.isError and any(SAMPLED in t for t in texts(r)), f"sampling result {texts(r)}")

            await session.call_tool("toggle-simulated-logging", {})
            with anyio.fail_after(20):
                await got_log.wait()
            await session.call_tool("toggle-simulated-logging", {})
            return (
                f"protocol {init.protocolVersion}, session {get_session_id()}, {len(names)} tools, "
                f"progress {progress}, sampling answered, log '{logs[0].level}' received"
            )


def main() -> int:
    if len(sys.argv) != 2 or not sys.argv[1].startswith(("http://", "https://")):
        print(f"usage: {sys.argv[0]} URL", file=sys.stderr)
        return 2
    try:
        summary = anyio.run(_with_timeout, sys.argv[1])
    except BaseException as e:  # noqa: BLE001 - report anything as a failure
        if not isinstance(e, Fail):
            traceback.print_exc()
        print(f"FAIL {NAME}: {type(e).__name__}: {e}")
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
