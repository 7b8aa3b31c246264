"""A scriptable in-process legacy HTTP+SSE server (the 2024-11-05 transport) for upstream-client
tests.

Serve `FakeSse().app` with pytest-aiohttp's `aiohttp_server`: `GET /sse` opens a stream whose first
event is `endpoint` (`/messages?session=N`, or `endpoint` when set); `POST /messages` answers 202
and puts the reply on the session's stream; `POST /sse` answers 405, as SDK servers do. `requests`
holds every message POSTed; `tools[name]` scripts a `tools/call` (it gets the `FakeSseSession` and
the request id, and returns the result); `drop(session)` ends a stream; knobs: `get_status`,
`post_status`, `endpoint`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from translators.wire.jsonrpc import JsonObject
from translators.wire.sse import encode_event

ToolScript = Callable[["FakeSseSession", Any], Awaitable[JsonObject]]


class FakeSseSession:
    """One SSE connection: what goes out on it, and what came in for it."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.received: list[JsonObject] = []
        self.answered: dict[Any, JsonObject] = {}  # push id -> the client's response
        self.answer_arrived = asyncio.Event()

    def send(self, message: JsonObject | list[JsonObject], event: str = "message") -> None:
        self.outbox.put_nowait(encode_event(json.dumps(message), event=event))

    def drop(self) -> None:
        self.outbox.put_nowait(None)


class FakeSse:
    def __init__(self, protocol_version: str = "2025-11-25") -> None:
        self.protocol_version = protocol_version
        self.sessions: dict[int, FakeSseSession] = {}
        self.tools: dict[str, ToolScript] = {}
        self.get_status = 200
        self.post_status = 202
        self.endpoint: str | None = None  # default: /messages?session=N
        self._numbers = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self.app = web.Application()
        self.app.router.add_get("/sse", self._stream)
        self.app.router.add_post("/sse", self._not_allowed)
        self.app.router.add_post("/messages", self._message)

    async def _not_allowed(self, request: web.Request) -> web.Response:
        return web.Response(status=405, text="Method Not Allowed")

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        if self.get_status != 200:
            return web.Response(status=self.get_status)
        session = FakeSseSession(next(self._numbers))
        self.sessions[session.number] = session
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        endpoint = (
            self.endpoint if self.endpoint is not None else f"/messages?session={session.number}"
        )
        await response.write(encode_event(endpoint, event="endpoint"))
        while (chunk := await self._next(request, session)) is not None:
            await response.write(chunk)
        return response

    @staticmethod
    async def _next(request: web.Request, session: FakeSseSession) -> bytes | None:
        """The next chunk for the stream; None once dropped or once the client went away."""
        while request.transport is not None and not request.transport.is_closing():
            try:
                return await asyncio.wait_for(session.outbox.get(), 0.05)
            except TimeoutError:
                continue
        return None

    async def _message(self, request: web.Request) -> web.Response:
        session = self.sessions.get(int(request.query.get("session", "0")))
        if session is None or self.post_status == 404:
            return web.Response(status=404, text="Could not find session")
        message = await request.json()
        session.received.append(message)
        if self.post_status != 202:
            return web.Response(status=self.post_status)
        task = asyncio.get_running_loop().create_task(self._handle(session, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.Response(status=202, text="Accepted")

    async def _handle(self, session: FakeSseSession, message: JsonObject) -> None:
        method, request_id = message.get("method"), message.get("id")
        if method is None:
            session.answered[request_id] = message
            session.answer_arrived.set()
        elif method == "initialize":
            session.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": self.protocol_version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "fake-sse", "version": "1"},
                    },
                }
            )
        elif method == "tools/call" and message["params"]["name"] in self.tools:
            result = await self.tools[message["params"]["name"]](session, request_id)
            session.send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif request_id is not None:
            session.send({"jsonrpc": "2.0", "id": request_id, "result": {}})


__all__ = ["FakeSse", "FakeSseSession"]
