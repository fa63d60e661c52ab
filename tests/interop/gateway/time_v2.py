"""Interop: the official MCP Python SDK v2 client (`mcp` 2.x) in its default "auto" mode
against `forkless gateway` fronting `mcp-server-time` (stdio, from PyPI).

A gateway serves the session revisions only, so the client's 2026-07-28 probe is refused
(400, -32022, naming the revisions served) and it falls back to `initialize`. Then: list
tools (must list `get_current_time` and `convert_time`), call `get_current_time` for
UTC and check the answer names that zone.

Usage: .peers/py2/bin/python tests/interop/gateway/time_v2.py URL
Prints `PASS time (python v2) ...` or `FAIL time (python v2): reason`; exit 0/1.
"""

import json
import sys

import anyio
from mcp import Client

NAME = "time (python v2)"


def fail(why: str) -> None:
    print(f"FAIL {NAME}: {why}", flush=True)
    sys.exit(1)


async def main(url: str) -> None:
    with anyio.fail_after(60):
        async with Client(url, mode="auto", read_timeout_seconds=30) as client:
            version = client.protocol_version
            if version == "2026-07-28":
                fail("negotiated 2026-07-28 through a gateway that serves the session revisions only")
            names = [t.name for t in (await client.list_tools()).tools]
            if not {"get_current_time", "convert_time"} <= set(names):
                fail(f"tools/list: {names}")
            result = await client.call_tool("get_current_time", {"timezone": "UTC"})
            if result.is_error:
                fail(f"get_current_time returned isError: {result.content}")
            answer = json.loads(result.content[0].text)
            if answer.get("timezone") != "UTC":
                fail(f"get_current_time answered {answer}")
    print(f"PASS {NAME}: protocol {version}, tools {names}, time {answer.get('datetime')}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: time_v2.py URL", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report any failure as FAIL
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        fail(f"{type(e).__name__}: {e}")
