#!/usr/bin/env python3
"""Reference MCP server built on the official Python SDK v1 (low-level `Server` +
`StreamableHTTPSessionManager` + an in-memory `EventStore`).

It exists to validate the interop clients and the conformance tooling while the
forkless Rust server is being written, and as an executable version of
docs/conformance-fixtures.md. It serves:

* the forkless interop tools: `echo {text}`, `start-notification-stream
  {interval, count}`, `start-background-stream {interval, count}` (on the
  standalone GET stream, for `forkless check`), `long-task {steps, interval}`;
* every fixture the conformance suite (@modelcontextprotocol/conformance 0.1.16,
  `--suite all`) asks of a server: test_* tools, test://... resources, test_*
  prompts, completion, logging, subscriptions, `test_reconnection`;
* DNS-rebinding protection (Host/Origin must be localhost / 127.0.0.1 / [::1]).

Usage:
    .peers/py/bin/python tests/interop/python/reference_server.py [--port 0] [--json-response]

Prints `READY http://127.0.0.1:<port>/mcp` on stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import logging
import socket
import sys
from typing import Any

import anyio
import mcp.types as types
import uvicorn
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyUrl

# 1x1 red PNG and a 16-sample silent 8 kHz mono WAV.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
WAV_B64 = "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YRAAAAAAAAAAAAAAAAAAAAAAAAAA"

log = logging.getLogger("reference_server")

# Tasks of `start-background-stream`, kept referenced until they finish.
BACKGROUND: set[asyncio.Task[None]] = set()


class InMemoryEventStore(EventStore):
    """Keeps every event; ids are a global decimal counter (unique per process)."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self._events: list[tuple[EventId, StreamId, types.JSONRPCMessage | None]] = []
        self._index: dict[EventId, int] = {}

    async def store_event(self, stream_id: StreamId, message: types.JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._counter))
        self._index[event_id] = len(self._events)
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        pos = self._index.get(last_event_id)
        if pos is None:
            log.warning("replay: unknown Last-Event-ID %r", last_event_id)
            return None
        stream_id = self._events[pos][1]
        for event_id, sid, message in self._events[pos + 1 :]:
            if sid == stream_id and message is not None:  # skip priming rows
                await send_callback(EventMessage(message, event_id))
        return stream_id


TOOLS: list[types.Tool] = [
    # --- forkless interop tools -------------------------------------------------
    types.Tool(
        name="echo",
        description="Echoes the given text back as one text content item",
        inputSchema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="start-notification-stream",
        description="Sends `count` notifications/message (info) `interval` ms apart on the request's stream, "
        "data 'Periodic notification #N', then returns",
        inputSchema={
            "type": "object",
            "properties": {
                "interval": {"type": "number", "description": "milliseconds between notifications"},
                "count": {"type": "integer", "description": "number of notifications"},
            },
            "required": ["interval", "count"],
        },
    ),
    types.Tool(
        name="start-background-stream",
        description="Answers at once, then sends `count` notifications/message (info) `interval` ms apart on "
        "the session's standalone (GET) stream, data 'Background notification #N'",
        inputSchema={
            "type": "object",
            "properties": {
                "interval": {"type": "number", "description": "milliseconds between notifications"},
                "count": {"type": "integer", "description": "number of notifications"},
            },
            "required": ["interval", "count"],
        },
    ),
    types.Tool(
        name="long-task",
        description="Reports progress 1..steps (total=steps) `interval` ms apart, then returns",
        inputSchema={
            "type": "object",
            "properties": {"steps": {"type": "integer"}, "interval": {"type": "number"}},
            "required": ["steps", "interval"],
        },
    ),
    # --- conformance fixtures -----------------------------------------------------
    types.Tool(name="test_simple_text", description="Returns simple text", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="test_image_content", description="Returns an image", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="test_audio_content", description="Returns audio", inputSchema={"type": "object", "properties": {}}),
    types.Tool(
        name="test_embedded_resource", description="Returns an embedded resource", inputSchema={"type": "object", "properties": {}}
    ),
    types.Tool(
        name="test_multiple_content_types", description="Returns text, image and resource", inputSchema={"type": "object", "properties": {}}
    ),
    types.Tool(name="test_tool_with_logging", description="Logs 3 messages", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="test_tool_with_progress", description="Reports progress 0/50/100", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="test_error_handling", description="Always fails", inputSchema={"type": "object", "properties": {}}),
    types.Tool(
        name="test_sampling",
        description="Asks the client to sample",
        inputSchema={"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    ),
    types.Tool(
        name="test_elicitation",
        description="Asks the client for input",
        inputSchema={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    ),
    types.Tool(
        name="test_elicitation_sep1034_defaults",
        description="Elicitation with defaults",
        inputSchema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="test_elicitation_sep1330_enums", description="Elicitation with enum variants", inputSchema={"type": "object", "properties": {}}
    ),
    types.Tool(
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features",
        inputSchema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="test_reconnection",
        description="Closes the POST SSE stream mid-call; the result arrives after the client resumes with Last-Event-ID",
        inputSchema={"type": "object", "properties": {}},
    ),
]


def text(t: str) -> types.TextContent:
    return types.TextContent(type="text", text=t)


def build_server() -> Server:
    app: Server = Server("forkless-reference-server", version="0.0.0")

    @app.list_tools()
    async def list_tools() -> list[types.Tool]:
        return TOOLS

    @app.call_tool()
    async def call_tool(name: str, args: dict[str, Any]) -> Any:
        ctx = app.request_context
        rid = ctx.request_id
        session = ctx.session
        token = ctx.meta.progressToken if ctx.meta else None

        if name == "echo":
            return [text(str(args["text"]))]
        if name == "start-notification-stream":
            interval, count = float(args["interval"]), int(args["count"])
            for n in range(1, count + 1):
                await session.send_log_message("info", f"Periodic notification #{n}", related_request_id=rid)
                if n < count:
                    await anyio.sleep(interval / 1000)
            return [text(f"Sent {count} notifications")]
        if name == "start-background-stream":
            interval, count = float(args["interval"]), int(args["count"])

            async def background() -> None:
                # No related_request_id: the SDK routes these to the standalone GET stream.
                for n in range(1, count + 1):
                    await session.send_log_message("info", f"Background notification #{n}")
                    if n < count:
                        await anyio.sleep(interval / 1000)

            task = asyncio.get_running_loop().create_task(background())
            BACKGROUND.add(task)
            task.add_done_callback(BACKGROUND.discard)
            return [text(f"Sending {count} notifications on the standalone stream")]
        if name == "long-task":
            steps, interval = int(args["steps"]), float(args["interval"])
            for i in range(1, steps + 1):
                await anyio.sleep(interval / 1000)
                if token is not None:
                    await session.send_progress_notification(token, i, total=steps, related_request_id=rid)
            return [text(f"Completed {steps} steps")]

        if name == "test_simple_text":
            return [text("This is a simple text response for testing.")]
        if name == "test_image_content":
            return [types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")]
        if name == "test_audio_content":
            return [types.AudioContent(type="audio", data=WAV_B64, mimeType="audio/wav")]
        if name == "test_embedded_resource":
            return [
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri=AnyUrl("test://embedded-resource"),
                        mimeType="text/plain",
                        text="This is an embedded resource content.",
                    ),
                )
            ]
        if name == "test_multiple_content_types":
            return [
                text("Multiple content types test:"),
                types.ImageContent(type="image", data=PNG_B64, mimeType="image/png"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri=AnyUrl("test://mixed-content-resource"),
                        mimeType="application/json",
                        text=json.dumps({"test": "data", "value": 123}),
                    ),
                ),
            ]
        if name == "test_tool_with_logging":
            await session.send_log_message("info", "Tool execution started", related_request_id=rid)
            await anyio.sleep(0.05)
            await session.send_log_message("info", "Tool processing data", related_request_id=rid)
            await anyio.sleep(0.05)
            await session.send_log_message("info", "Tool execution completed", related_request_id=rid)
            return [text("Tool with logging executed successfully")]
        if name == "test_tool_with_progress":
            for p in (0, 50, 100):
                if token is not None:
                    await session.send_progress_notification(token, p, total=100, related_request_id=rid)
                if p != 100:
                    await anyio.sleep(0.05)
            return [text(f"Tool with progress executed successfully (token {token!r})")]
        if name == "test_error_handling":
            raise RuntimeError("This tool intentionally returns an error for testing")
        if name == "test_sampling":
            result = await session.create_message(
                messages=[types.SamplingMessage(role="user", content=text(str(args["prompt"])))],
                max_tokens=100,
                related_request_id=rid,
            )
            content = result.content
            reply = content.text if isinstance(content, types.TextContent) else json.dumps(content.model_dump() if hasattr(content, "model_dump") else str(content))
            return [text(f"LLM response: {reply}")]
        if name == "test_elicitation":
            result = await session.elicit(
                message=str(args["message"]),
                requestedSchema={
                    "type": "object",
                    "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"},
                    },
                    "required": ["username", "email"],
                },
                related_request_id=rid,
            )
            return [text(f"User response: action={result.action}, content={json.dumps(result.content)}")]
        if name == "test_elicitation_sep1034_defaults":
            result = await session.elicit(
                message="Please review and update the form fields with defaults",
                requestedSchema={
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {
                            "type": "string",
                            "description": "User status",
                            "enum": ["active", "inactive", "pending"],
                            "default": "active",
                        },
                        "verified": {"type": "boolean", "description": "Verification status", "default": True},
                    },
                    "required": [],
                },
                related_request_id=rid,
            )
            return [text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")]
        if name == "test_elicitation_sep1330_enums":
            result = await session.elicit(
                message="Please select options from the enum fields",
                requestedSchema={
                    "type": "object",
                    "properties": {
                        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {
                            "type": "string",
                            "oneOf": [
                                {"const": "value1", "title": "First Option"},
                                {"const": "value2", "title": "Second Option"},
                                {"const": "value3", "title": "Third Option"},
                            ],
                        },
                        "legacyEnum": {
                            "type": "string",
                            "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"],
                        },
                        "untitledMulti": {
                            "type": "array",
                            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                        },
                        "titledMulti": {
                            "type": "array",
                            "items": {
                                "anyOf": [
                                    {"const": "value1", "title": "First Choice"},
                                    {"const": "value2", "title": "Second Choice"},
                                    {"const": "value3", "title": "Third Choice"},
                                ]
                            },
                        },
                    },
                    "required": [],
                },
                related_request_id=rid,
            )
            return [text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")]
        if name == "json_schema_2020_12_tool":
            return [text(f"json_schema_2020_12_tool called with {json.dumps(args)}")]
        if name == "test_reconnection":
            # Send something with an event id first so the client holds a cursor,
            # then close the connection (not the stream) and finish later.
            await session.send_log_message("info", "test_reconnection: closing stream", related_request_id=rid)
            if ctx.close_sse_stream is not None:
                await ctx.close_sse_stream()
            await anyio.sleep(0.2)
            return [text("Reconnection test completed successfully")]
        raise ValueError(f"Unknown tool: {name}")

    # --- resources ------------------------------------------------------------------
    @app.list_resources()
    async def list_resources() -> list[types.Resource]:
        return [
            types.Resource(
                uri=AnyUrl("test://static-text"),
                name="static-text",
                description="A static text resource",
                mimeType="text/plain",
            ),
            types.Resource(
                uri=AnyUrl("test://static-binary"),
                name="static-binary",
                description="A static binary resource (1x1 PNG)",
                mimeType="image/png",
            ),
            types.Resource(
                uri=AnyUrl("test://watched-resource"),
                name="watched-resource",
                description="A resource that can be subscribed to",
                mimeType="text/plain",
            ),
        ]

    @app.list_resource_templates()
    async def list_templates() -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uriTemplate="test://template/{id}/data",
                name="template-data",
                description="Data for an id",
                mimeType="application/json",
            )
        ]

    @app.read_resource()
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        u = str(uri)
        if u == "test://static-text":
            return [ReadResourceContents("This is the content of the static text resource.", "text/plain")]
        if u == "test://static-binary":
            return [ReadResourceContents(base64.b64decode(PNG_B64), "image/png")]
        if u == "test://watched-resource":
            return [ReadResourceContents("Watched resource content.", "text/plain")]
        if u.startswith("test://template/") and u.endswith("/data"):
            rid = u[len("test://template/") : -len("/data")]
            body = {"id": rid, "templateTest": True, "data": f"Data for ID: {rid}"}
            return [ReadResourceContents(json.dumps(body, separators=(",", ":")), "application/json")]
        raise ValueError(f"Unknown resource: {u}")

    subscriptions: set[str] = set()

    @app.subscribe_resource()
    async def subscribe(uri: AnyUrl) -> None:
        subscriptions.add(str(uri))

    @app.unsubscribe_resource()
    async def unsubscribe(uri: AnyUrl) -> None:
        subscriptions.discard(str(uri))

    # --- prompts --------------------------------------------------------------------
    @app.list_prompts()
    async def list_prompts() -> list[types.Prompt]:
        return [
            types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
            types.Prompt(
                name="test_prompt_with_arguments",
                description="A prompt with arguments",
                arguments=[
                    types.PromptArgument(name="arg1", description="First test argument", required=True),
                    types.PromptArgument(name="arg2", description="Second test argument", required=True),
                ],
            ),
            types.Prompt(
                name="test_prompt_with_embedded_resource",
                description="A prompt with an embedded resource",
                arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)],
            ),
            types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
        ]

    @app.get_prompt()
    async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        a = arguments or {}
        if name == "test_simple_prompt":
            msgs = [types.PromptMessage(role="user", content=text("This is a simple prompt for testing."))]
        elif name == "test_prompt_with_arguments":
            msgs = [
                types.PromptMessage(
                    role="user",
                    content=text(f"Prompt with arguments: arg1='{a.get('arg1', '')}', arg2='{a.get('arg2', '')}'"),
                )
            ]
        elif name == "test_prompt_with_embedded_resource":
            msgs = [
                types.PromptMessage(
                    role="user",
                    content=types.EmbeddedResource(
                        type="resource",
                        resource=types.TextResourceContents(
                            uri=AnyUrl(a.get("resourceUri", "test://example-resource")),
                            mimeType="text/plain",
                            text="Embedded resource content for testing.",
                        ),
                    ),
                ),
                types.PromptMessage(role="user", content=text("Please process the embedded resource above.")),
            ]
        elif name == "test_prompt_with_image":
            msgs = [
                types.PromptMessage(role="user", content=types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")),
                types.PromptMessage(role="user", content=text("Please analyze the image above.")),
            ]
        else:
            raise ValueError(f"Unknown prompt: {name}")
        return types.GetPromptResult(messages=msgs)

    # --- completion, logging ------------------------------------------------------------
    @app.completion()
    async def complete(ref: Any, argument: types.CompletionArgument, context: Any) -> types.Completion:
        candidates = ["paris", "park", "party"]
        values = [v for v in candidates if v.startswith(argument.value)]
        return types.Completion(values=values, total=len(values), hasMore=False)

    @app.set_logging_level()
    async def set_level(level: types.LoggingLevel) -> None:
        log.info("logging level set to %s", level)

    return app


def make_asgi(manager: StreamableHTTPSessionManager, path: str):
    async def asgi(scope, receive, send):
        if scope["type"] == "lifespan":
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            msg = await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] == "http" and scope["path"] == path:
            await manager.handle_request(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"not found"})

    return asgi


async def main_async(args: argparse.Namespace) -> None:
    app = build_server()
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1", "localhost", "[::1]", "127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1", "http://localhost", "http://[::1]", "http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    manager = StreamableHTTPSessionManager(
        app=app,
        event_store=InMemoryEventStore(),
        json_response=args.json_response,
        security_settings=security,
        retry_interval=args.retry_ms,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(make_asgi(manager, "/mcp"), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    async with manager.run():
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            while not server.started:
                await anyio.sleep(0.02)
            print(f"READY http://{args.host}:{port}/mcp", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    p.add_argument("--json-response", action="store_true", help="answer requests with application/json instead of SSE")
    p.add_argument("--retry-ms", type=int, default=500, help="SSE retry: value sent in priming events")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main_async, args)


if __name__ == "__main__":
    main()
