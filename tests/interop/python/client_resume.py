#!/usr/bin/env python3
"""Interop: resume a POST SSE stream with the official MCP Python SDK (v1) client's
own resumption-token API.

1. Connect, initialize, call `start-notification-stream` {interval: 20, count: 30}
   with `ClientMessageMetadata(on_resumption_token_update=...)`; the server sends 30
   `notifications/message` whose text ends in `#1` .. `#30`, then the result.
2. As soon as `#10` has been received *and* the SDK has reported the resumption token
   for that event, cut the connection: leave the transport context (the HTTP
   connections are closed; no DELETE, the session stays alive).
3. Open a new transport with the same `Mcp-Session-Id` (and negotiated
   `MCP-Protocol-Version`), and re-send the request with
   `ClientMessageMetadata(resumption_token=<last token>)`; the SDK turns this into
   `GET` + `Last-Event-ID: <token>` and maps the replayed response to the new request.
4. Assert every #N (1..30) was received exactly once and in order across both
   connections, and that the final tools/call result arrived (not isError).

Why a relay between the transport and the ClientSession: the SDK reports the token
of an event only *after* it has handed the event's message to the session (see
`mcp/client/streamable_http.py: _handle_sse_event`), so "the last message I saw" and
"the last token I was told" can be one event apart. The relay records messages as
the transport hands them over and pairs the cut with the token callback, so the token
we resume from is exactly the cursor of the last message we count as received.
Messages that arrive after the cut are dropped (they were "lost with the connection")
and must be replayed by the server.

Usage: .peers/py/bin/python tests/interop/python/client_resume.py URL [--cut-after 10]
       [--tool NAME --args JSON [--progress]]   (another tool emitting #1..#30: with
       --progress, numbered by its progress notifications, e.g. a stdio server's behind a gateway)
Prints `PASS client_resume (python) ...` or `FAIL client_resume (python): reason`;
exit 0 on pass, 1 on failure, 2 on usage error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import traceback
from typing import Any

import anyio
import httpx
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession
from mcp.shared.message import ClientMessageMetadata, SessionMessage

try:  # mcp >= 1.24
    from mcp.client.streamable_http import streamable_http_client as _http_client

    _NEW_API = True
except ImportError:  # pragma: no cover - older 1.x
    from mcp.client.streamable_http import streamablehttp_client as _http_client

    _NEW_API = False

NAME = "client_resume (python)"
COUNT = 30
INTERVAL_MS = 20
TIMEOUT_S = 30
NUM_RE = re.compile(r"#(\d+)(?!.*#\d)", re.S)  # the last "#N" in the text


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


# What the call is: the demo's numbered stream by default; --tool, --args and --progress
# name another (a stdio server's progress-numbered tool behind a gateway).
TOOL = {"name": "start-notification-stream", "arguments": {"interval": INTERVAL_MS, "count": COUNT}, "progress": False}


def notification_number(item: SessionMessage | Exception) -> int | None:
    """N of a notifications/message whose data text ends in #N (or, with --progress, of a
    notifications/progress whose progress is N), else None."""
    if not isinstance(item, SessionMessage):
        return None
    root = item.message.root
    if TOOL["progress"]:
        if isinstance(root, types.JSONRPCNotification) and root.method == "notifications/progress":
            value = (root.params or {}).get("progress")
            return int(value) if isinstance(value, (int, float)) and value == int(value) else None
        return None
    if not isinstance(root, types.JSONRPCNotification) or root.method != "notifications/message":
        return None
    data: Any = (root.params or {}).get("data")
    m = NUM_RE.search(data if isinstance(data, str) else str(data))
    return int(m.group(1)) if m else None


class Recorder:
    """Sits between the SDK transport's read stream and the ClientSession."""

    def __init__(self, cut_after: int | None) -> None:
        self.cut_after = cut_after
        self.numbers: list[int] = []
        self.tokens: list[str] = []
        self.cut_token: str | None = None
        self.cut = anyio.Event()

    async def relay(
        self,
        src: MemoryObjectReceiveStream[SessionMessage | Exception],
        dst: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        async with dst:
            async for item in src:
                if self.cut.is_set():
                    continue  # arrived after the cut: treat as lost with the connection
                n = notification_number(item)
                if n is not None:
                    self.numbers.append(n)
                await dst.send(item)

    async def on_token(self, token: str) -> None:
        # The transport calls this right after handing the event's message (if any)
        # to the relay. Yield so a relay that was woken with that message records it
        # first (asyncio runs ready tasks FIFO), then pair the token with it.
        for _ in range(3):
            await anyio.sleep(0)
        self.tokens.append(token)
        if self.cut_after is not None and not self.cut.is_set() and self.cut_after in self.numbers:
            self.cut_token = token
            self.cut.set()


def call_request() -> types.ClientRequest:
    params = {"name": TOOL["name"], "arguments": TOOL["arguments"]}
    if TOOL["progress"]:
        params["_meta"] = {"progressToken": "client-resume"}
    return types.ClientRequest(types.CallToolRequest(params=types.CallToolRequestParams.model_validate(params)))


async def phase1(url: str, cut_after: int) -> tuple[Recorder, str, str, bool]:
    """Start the call, cut after #cut_after. Returns (recorder, session id, protocol version, finished)."""
    rec = Recorder(cut_after)
    finished = False
    kwargs = {"terminate_on_close": False}
    async with _http_client(url, **kwargs) as (read, write, get_session_id):
        fwd_send, fwd_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(rec.relay, read, fwd_send)
            async with ClientSession(fwd_recv, write) as session:
                init = await session.initialize()
                session_id = get_session_id()
                check(session_id is not None, "server did not assign an Mcp-Session-Id")

                async def call() -> None:
                    nonlocal finished
                    await session.send_request(
                        call_request(),
                        types.CallToolResult,
                        metadata=ClientMessageMetadata(on_resumption_token_update=rec.on_token),
                    )
                    finished = True
                    rec.cut.set()

                async with anyio.create_task_group() as call_tg:
                    call_tg.start_soon(call)
                    await rec.cut.wait()
                    call_tg.cancel_scope.cancel()
            tg.cancel_scope.cancel()
    # Leaving the transport context cancelled its tasks and closed its httpx client,
    # i.e. the POST (and standalone GET) connections were cut mid-stream.
    return rec, str(session_id), str(init.protocolVersion), finished


async def phase2(url: str, session_id: str, protocol_version: str, token: str) -> tuple[Recorder, types.CallToolResult]:
    rec = Recorder(None)
    headers = {"mcp-session-id": session_id, "mcp-protocol-version": protocol_version}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0, read=300.0)) as http:
        if _NEW_API:
            ctx = _http_client(url, http_client=http, terminate_on_close=False)
        else:  # pragma: no cover
            ctx = _http_client(url, headers=headers, terminate_on_close=False)
        async with ctx as (read, write, _):
            fwd_send, fwd_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            async with anyio.create_task_group() as tg:
                tg.start_soon(rec.relay, read, fwd_send)
                # No initialize: the session already exists on the server.
                async with ClientSession(fwd_recv, write) as session:
                    result = await session.send_request(
                        call_request(),
                        types.CallToolResult,
                        metadata=ClientMessageMetadata(resumption_token=token, on_resumption_token_update=rec.on_token),
                    )
                tg.cancel_scope.cancel()
        # Clean up the session (best effort).
        try:
            await http.delete(url)
        except httpx.HTTPError:
            pass
    return rec, result


async def run(url: str, cut_after: int) -> str:
    rec1, sid, pv, finished = await phase1(url, cut_after)
    check(not finished, f"the call finished before #{cut_after} was seen (received {rec1.numbers})")
    check(rec1.cut_token is not None, f"no resumption token reported by #{cut_after} (tokens {rec1.tokens})")
    token = str(rec1.cut_token)
    rec2, result = await phase2(url, sid, pv, token)
    got = rec1.numbers + rec2.numbers
    dups = sorted({n for n in got if got.count(n) > 1})
    missing = [n for n in range(1, COUNT + 1) if n not in got]
    check(not dups, f"duplicates {dups}; before cut {rec1.numbers}, after resume {rec2.numbers}")
    check(not missing, f"missing {missing}; before cut {rec1.numbers}, after resume {rec2.numbers}")
    check(got == list(range(1, COUNT + 1)), f"out of order: {got}")
    check(not result.isError, f"final result isError: {result.content}")
    check(len(result.content) > 0, "final result has no content")
    text = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return (
        f"#1..#{COUNT} exactly once in order; {len(rec1.numbers)} before the cut "
        f"(resumed from Last-Event-ID {token!r}), {len(rec2.numbers)} after; result {text}"
    )


async def run_with_timeout(url: str, cut_after: int) -> str:
    try:
        with anyio.fail_after(TIMEOUT_S):
            return await run(url, cut_after)
    except TimeoutError:
        raise Fail(f"timed out after {TIMEOUT_S}s") from None


def main() -> int:
    ap = argparse.ArgumentParser(description="resume a POST SSE stream via the SDK's resumption token API")
    ap.add_argument("url")
    ap.add_argument("--cut-after", type=int, default=10, help="cut the connection after #N (default 10)")
    ap.add_argument("--tool", help="the tool to call (default start-notification-stream)")
    ap.add_argument("--args", help="its arguments, a JSON object; it must emit #1..#30")
    ap.add_argument("--progress", action="store_true", help="its numbered events are progress notifications")
    a = ap.parse_args()
    if a.tool:
        TOOL.update(name=a.tool, arguments=json.loads(a.args or "{}"))
    TOOL["progress"] = a.progress
    if not a.url.startswith(("http://", "https://")) or not 1 <= a.cut_after < COUNT:
        ap.print_usage(sys.stderr)
        return 2
    try:
        summary = anyio.run(run_with_timeout, a.url, a.cut_after)
    except BaseException as e:  # noqa: BLE001 - report anything as a failure
        if not isinstance(e, Fail):
            traceback.print_exc()
        print(f"FAIL {NAME}: {describe(e)}")
        return 1
    print(f"PASS {NAME}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
