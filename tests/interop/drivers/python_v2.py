#!/usr/bin/env python3
"""A client driver for `forkless check --client`: the official MCP Python SDK v2 (`mcp` 2.x),
in its default mode (`auto`).

Connects to URL, calls the tool `numbers` {count: 8} once, and prints what it received, one
JSON object per line: `{"notification": METHOD, "params": ...}` for each notification, then
`{"result": ...}` or `{"error": "..."}`.

Usage: .peers/py2/bin/python tests/interop/drivers/python_v2.py URL
"""

import json
import sys

import anyio
from mcp import Client


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
        async with Client(url, read_timeout_seconds=5, logging_callback=on_log) as client:
            result = await client.call_tool("numbers", {"count": 8})
            emit({"result": result.model_dump(mode="json")})
    except BaseException as e:  # noqa: BLE001 - whatever the SDK raises is what we report
        emit({"error": describe(e)})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
