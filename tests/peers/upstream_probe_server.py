#!/usr/bin/env python3
"""A tiny legacy (MCP 2025-11-25) server for the upstream client's integration tests.

Written with FastMCP from `mcp` 1.x (run it from `.venv-legacy`), it exercises every kind of
server-to-client traffic the bridge's upstream client must carry, where the real SDK sends it:

- tool `echo(text)`: plain call;
- tool `ask_name()`: `elicitation/create` (the SDK relates it to the call: POST stream);
- tool `sample_haiku(topic)`: `sampling/createMessage` (unrelated: the session's GET stream);
- tool `list_my_roots()`: `roots/list` (unrelated: the GET stream);
- tool `poll_echo(text)`: closes its own SSE stream early, then answers (needs `--resumable`,
  which turns on an in-memory event store and `retry`, so the client must resume with
  GET + Last-Event-ID).

Usage:
    python tests/peers/upstream_probe_server.py --port 8932 [--resumable]   # 127.0.0.1:8932/mcp
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from pydantic import BaseModel

RETRY_MS = 50


class MemoryEventStore(EventStore):
    """Every event of every stream, in order, so a stream can be replayed after any of its ids."""

    def __init__(self) -> None:
        self.events: list[tuple[EventId, StreamId, types.JSONRPCMessage | None]] = []

    async def store_event(
        self, stream_id: StreamId, message: types.JSONRPCMessage | None
    ) -> EventId:
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        ids = [event_id for event_id, _, _ in self.events]
        if last_event_id not in ids:
            return None
        start = ids.index(last_event_id)
        stream_id = self.events[start][1]
        for event_id, event_stream, message in self.events[start + 1 :]:
            if event_stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


class Name(BaseModel):
    name: str


def build(resumable: bool) -> FastMCP:
    store = MemoryEventStore() if resumable else None
    mcp = FastMCP(
        name="upstream-probe",
        host="127.0.0.1",
        event_store=store,
        retry_interval=RETRY_MS if resumable else None,
    )

    @mcp.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    async def ask_name(ctx: Context) -> str:
        """Ask the user's name (elicitation on the call's POST stream)."""
        result = await ctx.elicit("What is your name?", schema=Name)
        if result.action == "accept":
            return f"Hello {result.data.name}"
        return f"no name ({result.action})"

    @mcp.tool()
    async def sample_haiku(topic: str, ctx: Context) -> str:
        """Ask the client's model for a haiku (sampling, unrelated to the call: GET stream)."""
        prompt = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text=f"Haiku: {topic}")
        )
        result = await ctx.session.create_message(messages=[prompt], max_tokens=60)
        content = result.content
        return content.text if isinstance(content, types.TextContent) else "(not text)"

    @mcp.tool()
    async def list_my_roots(ctx: Context) -> str:
        """List the client's roots (roots/list, unrelated to the call: GET stream)."""
        result = await ctx.session.list_roots()
        return ",".join(str(root.uri) for root in result.roots)

    @mcp.tool()
    async def poll_echo(text: str, ctx: Context) -> str:
        """Close this call's SSE stream early, then answer (the client must resume)."""
        await ctx.close_sse_stream()
        await asyncio.sleep(0.2)
        return text

    return mcp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="HTTP port (binds 127.0.0.1 only)")
    parser.add_argument(
        "--resumable", action="store_true", help="event store + retry: streams can be resumed"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr)
    mcp = build(args.resumable)
    mcp.settings.port = args.port
    mcp.settings.log_level = args.log_level.upper()
    mcp.run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
