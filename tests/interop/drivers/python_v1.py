#!/usr/bin/env python3
"""A client driver for `forkless check --client`: the official MCP Python SDK v1 (`mcp` 1.x).

Connects to URL, calls the tool `numbers` {count: 8} once with the SDK's defaults, and prints
what it received, one JSON object per line: `{"notification": METHOD, "params": ...}` for each
notification, then `{"result": ...}` or `{"error": "..."}`.

Usage: .peers/py/bin/python tests/interop/drivers/python_v1.py URL
"""

import json
import sys
from datetime import timedelta

import anyio
from mcp import ClientSession

try:  # mcp >= 1.24
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # pragma: no cover - older 1.x
    from mcp.client.streamable_http import streamablehttp_client as http_client


def emit(obj) -> None:
    print(json.dumps(obj), flush=True)


def describe(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


async def main(url: str) -> None:
    async def on_log(params) -> None:
        emit({"notification": "notifications/message", "params": params.model_dump(mode="json")})

    try:
        async with http_client(url) as (read, write, *_):
            async with ClientSession(read, write, logging_callback=on_log) as session:
                await session.initialize()
                result = await session.call_tool(
                    "numbers", {"count": 8}, read_timeout_seconds=timedelta(seconds=5)
                )
                emit({"result": result.model_dump(mode="json")})
    except BaseException as e:  # noqa: BLE001 - whatever the SDK raises is what we report
        emit({"error": describe(e)})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
