#!/usr/bin/env python3
"""Interop: the official MCP Python SDK v2 client (`mcp` 2.x) in its default "auto" mode
against `forkless gateway` fronting `@modelcontextprotocol/server-everything`, a server
neither side wrote (over stdio, or over Streamable HTTP with `--upstream`).

A gateway serves the session revisions by default, so the client's 2026-07-28 probe is
refused and it falls back to `initialize`. Then, as `everything.py` does with v1: `tools/list`; `echo`;
`trigger-long-running-operation` {duration: 1, steps: 5} with a progress callback (progress
1..5 in order before the result); `trigger-sampling-request`, answered by this client's
sampling callback; `toggle-simulated-logging`, then one log message (the server's log
messages name no request: they come on the standalone stream).

With `--current` (a gateway run with `--revisions all`), the client must take 2026-07-28,
each request served statelessly on a backend of its own: `tools/list`, `echo` and the
progress of the long-running operation (a backend's own requests and its log messages
outside a request have no stream in that revision, so sampling and logging are not asked).

Usage: .peers/py2/bin/python tests/interop/gateway/everything_v2.py URL [--current]
Prints `PASS everything (python v2) ...` or `FAIL everything (python v2): reason`; exit 0/1.
"""

import sys

import anyio
import mcp.types as types
from mcp import Client

NAME = "everything (python v2)"
SAMPLED = "an answer from the forkless test client"


def fail(why: str) -> None:
    print(f"FAIL {NAME}: {why}", flush=True)
    sys.exit(1)


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


async def main(url: str, current: bool) -> None:
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

    with anyio.fail_after(60):
        async with Client(
            url, mode="auto", read_timeout_seconds=30, sampling_callback=on_sampling, logging_callback=on_log
        ) as client:
            version = client.protocol_version
            if current and version != "2026-07-28":
                fail(f"negotiated {version} through a gateway that offers 2026-07-28")
            if not current and version == "2026-07-28":
                fail("negotiated 2026-07-28 through a gateway that serves the session revisions only")
            names = [t.name for t in (await client.list_tools()).tools]
            for want in ("echo", "trigger-long-running-operation", "trigger-sampling-request"):
                if want not in names:
                    fail(f"tools/list lacks {want}: {names}")
            r = await client.call_tool("echo", {"message": "hello forkless"})
            if r.is_error or not any("hello forkless" in t for t in texts(r)):
                fail(f"echo returned {texts(r)}")
            r = await client.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 5}, progress_callback=on_progress
            )
            if r.is_error or progress != [1, 2, 3, 4, 5]:
                fail(f"long-running operation: error {r.is_error}, progress {progress}, expected 1..5")
            if current:
                print(f"PASS {NAME}: protocol {version}, {len(names)} tools, progress {progress}", flush=True)
                return
            r = await client.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
            if r.is_error or not any(SAMPLED in t for t in texts(r)):
                fail(f"sampling result {texts(r)}")
            await client.call_tool("toggle-simulated-logging", {})
            with anyio.fail_after(20):
                await got_log.wait()
            await client.call_tool("toggle-simulated-logging", {})
    print(
        f"PASS {NAME}: protocol {version}, {len(names)} tools, progress {progress}, sampling answered, "
        f"log '{logs[0].level}' received",
        flush=True,
    )


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--current"):
        print(f"usage: {sys.argv[0]} URL [--current]", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1], len(sys.argv) == 3)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report anything as a failure
        fail(f"{type(e).__name__}: {e}")
