"""A scriptable in-process legacy (2025-11-25) Streamable HTTP server for upstream-client tests.

Serve `FakeLegacy().app` with pytest-aiohttp's `aiohttp_server`; the endpoint is `/mcp`. Knobs on
the instance choose JSON or SSE replies, priming events and `retry`, 405 on GET or DELETE, a hanging
initialize, a wrong protocol version, garbage bodies. `tools[name]` scripts a `tools/call`: the
script gets a `FakeCall` that can push (on the call's POST stream or on the session's GET stream),
notify, send raw SSE data, drop the connection (the stream stays resumable with `Last-Event-ID`),
and returns the result (or raises `FakeRpcError`). `expire()` ends sessions (later requests: 404).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import web

from translators.protocol.eras import LEGACY_VERSION
from translators.wire.jsonrpc import JsonObject
from translators.wire.sse import encode_event

ToolScript = Callable[["FakeCall"], Awaitable[JsonObject]]
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class FakeRpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message}


class FakeStream:
    """One SSE stream with every event kept, so a dropped connection can be resumed."""

    def __init__(self, stream_id: str, *, with_ids: bool = True) -> None:
        self.stream_id = stream_id
        self.with_ids = with_ids
        self.events: list[tuple[str, str]] = []
        self.finished = False
        self.connected = False
        self._epoch = 0  # bumped to drop the current connection
        self._cut = 0  # events before this index go out on the connection being dropped
        self._changed = asyncio.Condition()

    async def add(self, data: str) -> None:
        async with self._changed:
            self.events.append((f"{self.stream_id}:{len(self.events)}", data))
            self._changed.notify_all()

    async def finish(self) -> None:
        async with self._changed:
            self.finished = True
            self._changed.notify_all()

    async def drop(self, *, wait_connected: bool = True) -> None:
        """Close the current connection after the events added so far (wait for one to exist
        first)."""
        async with self._changed:
            if wait_connected:
                await self._changed.wait_for(lambda: self.connected)
            self._cut = len(self.events)
            self._epoch += 1
            self._changed.notify_all()

    def _ready(self, index: int, epoch: int) -> bool:
        return index < len(self.events) or self.finished or self._epoch != epoch

    def index_of(self, event_id: str) -> int | None:
        ids = [event_id_ for event_id_, _ in self.events]
        return ids.index(event_id) if event_id in ids else None

    async def pump(self, resp: web.StreamResponse, start: int, retry_ms: int | None) -> None:
        """Write events from `start` until finished or dropped (events stay stored for replay)."""
        async with self._changed:
            epoch, index, first = self._epoch, start, True
            self.connected = True
            self._changed.notify_all()
        try:
            while True:
                async with self._changed:
                    await self._changed.wait_for(partial(self._ready, index, epoch))
                    dropped = self._epoch != epoch
                    end = self._cut if dropped else len(self.events)
                    batch, index, done = self.events[index:end], max(index, end), self.finished
                for event_id, data in batch:
                    wire_id = event_id if self.with_ids else None
                    await resp.write(
                        encode_event(data, event_id=wire_id, retry=retry_ms if first else None)
                    )
                    first = False
                if dropped or (done and index == len(self.events)):
                    return
        except ConnectionError:
            return
        finally:
            self.connected = False


class FakeSession:
    def __init__(self, session_id: str, init_params: JsonObject) -> None:
        self.session_id = session_id
        self.init_params = init_params
        self.initialized = False
        self.get_stream: FakeStream | None = None
        self.streams: dict[str, FakeStream] = {}
        self.pending: dict[int, asyncio.Future[JsonObject]] = {}
        self.notifications: list[JsonObject] = []
        self.responses: list[JsonObject] = []  # the client's answers to pushes
        self.tasks: set[asyncio.Task[None]] = set()
        self.push_ids = itertools.count(100)

    def find(self, event_id: str) -> tuple[FakeStream, int] | None:
        for stream in [*self.streams.values(), *([self.get_stream] if self.get_stream else [])]:
            index = stream.index_of(event_id)
            if index is not None:
                return stream, index
        return None


class FakeCall:
    """What a tool script can do while it runs."""

    def __init__(
        self, server: FakeLegacy, session: FakeSession, message: JsonObject, stream: FakeStream
    ) -> None:
        self.server = server
        self.session = session
        self.request_id = message["id"]
        self.params: JsonObject = message.get("params") or {}
        self.stream = stream

    @property
    def arguments(self) -> JsonObject:
        arguments: JsonObject = self.params.get("arguments") or {}
        return arguments

    def _target(self, on_get: bool) -> FakeStream:
        target = self.session.get_stream if on_get else self.stream
        if target is None:
            raise AssertionError("no GET stream is open for this push")
        return target

    async def push(
        self, method: str, params: JsonObject | None = None, *, on_get: bool = False
    ) -> JsonObject:
        """Send a server->client request and wait for the client's response message."""
        push_id = next(self.session.push_ids)
        answer: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self.session.pending[push_id] = answer
        message: JsonObject = {"jsonrpc": "2.0", "id": push_id, "method": method}
        if params is not None:
            message["params"] = params
        await self._target(on_get).add(json.dumps(message))
        return await answer

    async def notify(
        self, method: str, params: JsonObject | None = None, *, on_get: bool = False
    ) -> None:
        await self._target(on_get).add(
            json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}})
        )

    async def send_raw(self, data: str) -> None:
        await self.stream.add(data)

    async def drop_connection(self) -> None:
        await self.stream.drop()


class FakeLegacy:
    """The fake server: knobs, recorded traffic, and the aiohttp app."""

    def __init__(self) -> None:
        self.json_mode = False
        self.priming = True
        self.event_ids = True
        self.retry_ms: int | None = 20
        self.get_status: int | None = None  # e.g. 405: no GET stream offered
        self.resume_status: int | None = None  # status for GET with Last-Event-ID
        self.delete_status = 200
        self.protocol_version = (
            LEGACY_VERSION  # answered to initialize (an older revision, or an unknown one)
        )
        # the server capabilities answered to initialize
        self.capabilities: JsonObject = {"tools": {}}
        self.hang_initialize = False
        self.initialize_gate: asyncio.Event | None = None  # when set, initialize waits for it
        self.hang_accept = False  # never answer notifications/responses
        # like server-everything 2025.5.12: only the newest session answers requests
        self.one_session = False
        self.initialize_body: bytes | None = None  # raw (garbage) initialize reply
        self.tools: dict[str, ToolScript] = {}
        self.on_get_connect: list[JsonObject] = []  # sent on every new GET stream (e.g. roots/list)
        self.sessions: dict[str, FakeSession] = {}
        self.all_sessions: list[FakeSession] = []
        self.requests: list[
            tuple[str, str | None, dict[str, str]]
        ] = []  # (HTTP method, rpc method, headers)
        self.messages: list[JsonObject] = []  # every JSON-RPC message POSTed, in order
        self.deleted: list[str] = []
        self._ids = itertools.count(1)
        self._hold = asyncio.Event()  # never set: hanging handlers wait on it
        self._seen = asyncio.Condition()  # notified on every request and GET-stream connect
        self.get_connects = 0
        self.app = web.Application()
        self.app.router.add_route("*", "/mcp", self._handle)
        self.app.on_shutdown.append(self._shutdown)

    def rpc_methods(self, http_method: str = "POST") -> list[str | None]:
        return [rpc for verb, rpc, _ in self.requests if verb == http_method]

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait (bounded) until `predicate()` holds; re-checked after every request and GET
        connect."""
        async with asyncio.timeout(timeout), self._seen:
            await self._seen.wait_for(predicate)

    async def _notify_seen(self) -> None:
        async with self._seen:
            self._seen.notify_all()

    async def expire(self) -> None:
        """End every session: later requests with their ids get 404, open streams are dropped."""
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            await self._end(session)

    async def _end(self, session: FakeSession) -> None:
        for stream in [
            *session.streams.values(),
            *([session.get_stream] if session.get_stream else []),
        ]:
            await stream.drop(wait_connected=False)
        for task in list(session.tasks):
            task.cancel()

    async def _shutdown(self, app: web.Application) -> None:
        for session in self.all_sessions:
            await self._end(session)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read() if request.method == "POST" else b""
        message = _loads(body)
        rpc = message.get("method") if isinstance(message, dict) else None
        self.requests.append((request.method, rpc, dict(request.headers)))
        if isinstance(message, dict):
            self.messages.append(message)
        await self._notify_seen()
        if request.method == "POST" and rpc == "initialize":
            return await self._initialize(request, message)
        session = self.sessions.get(request.headers.get("Mcp-Session-Id", ""))
        if session is None:
            return web.Response(status=404 if "Mcp-Session-Id" in request.headers else 400)
        if (
            request.headers.get("MCP-Protocol-Version", self.protocol_version)
            != self.protocol_version
        ):
            return web.Response(status=400)
        if request.method == "GET":
            return await self._get(request, session)
        if request.method == "DELETE":
            return await self._delete(session)
        if not isinstance(message, dict):
            error = {"code": -32700, "message": "Parse error"}
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
        return await self._post(request, session, message)

    async def _initialize(self, request: web.Request, message: JsonObject) -> web.StreamResponse:
        if self.hang_initialize:
            await self._hold.wait()
        if self.initialize_gate is not None:
            await self.initialize_gate.wait()
        session = FakeSession(f"sess-{next(self._ids)}", message.get("params") or {})
        self.sessions[session.session_id] = session
        self.all_sessions.append(session)
        headers = {"Mcp-Session-Id": session.session_id}
        if self.initialize_body is not None:
            return web.Response(
                body=self.initialize_body, content_type="application/json", headers=headers
            )
        result = {
            "protocolVersion": self.protocol_version,
            "capabilities": self.capabilities,
            "serverInfo": {"name": "fake-legacy", "version": "1.0"},
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        if self.json_mode:
            return web.json_response(reply, headers=headers)
        resp = web.StreamResponse(headers={**SSE_HEADERS, **headers})
        await resp.prepare(request)
        await resp.write(encode_event(json.dumps(reply), event_id="init:0"))
        return resp

    async def _get(self, request: web.Request, session: FakeSession) -> web.StreamResponse:
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None:
            if self.resume_status is not None:
                return web.Response(status=self.resume_status)
            found = session.find(last_event_id)
            if found is None:
                return web.Response(status=400)
            stream, start = found[0], found[1] + 1
        else:
            if self.get_status is not None:
                return web.Response(status=self.get_status)
            if session.get_stream is not None and session.get_stream.connected:
                return web.Response(status=409)
            stream, start = FakeStream("get", with_ids=self.event_ids), 0
            session.get_stream = stream
            if self.priming:
                await stream.add("")
            for message in self.on_get_connect:
                await stream.add(json.dumps(message))
        resp = web.StreamResponse(headers={**SSE_HEADERS, "Mcp-Session-Id": session.session_id})
        await resp.prepare(request)
        self.get_connects += 1
        await self._notify_seen()
        await stream.pump(resp, start, self.retry_ms)
        return resp

    async def _delete(self, session: FakeSession) -> web.Response:
        if self.delete_status == 405:
            return web.Response(status=405)
        self.sessions.pop(session.session_id, None)
        self.deleted.append(session.session_id)
        await self._end(session)
        return web.Response(status=200)

    async def _post(
        self, request: web.Request, session: FakeSession, message: JsonObject
    ) -> web.StreamResponse:
        if "method" not in message or "id" not in message:
            return await self._accept(session, message)
        stream = FakeStream(f"s{message['id']}", with_ids=self.event_ids)
        session.streams[stream.stream_id] = stream
        call = FakeCall(self, session, message, stream)
        task = asyncio.get_running_loop().create_task(self._run(call, message))
        session.tasks.add(task)
        task.add_done_callback(session.tasks.discard)
        if self.json_mode:
            await asyncio.wait({task})
            return web.Response(body=stream.events[-1][1].encode(), content_type="application/json")
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        await stream.pump(resp, 0, self.retry_ms)
        return resp

    async def _accept(self, session: FakeSession, message: JsonObject) -> web.Response:
        if self.hang_accept:
            await self._hold.wait()
        if "method" in message:
            session.notifications.append(message)
            if message["method"] == "notifications/initialized":
                session.initialized = True
        else:
            session.responses.append(message)
            answer = session.pending.pop(message.get("id"), None)  # type: ignore[arg-type]
            if answer is not None:
                answer.set_result(message)
        return web.Response(status=202)

    async def _run(self, call: FakeCall, message: JsonObject) -> None:
        if self.priming and not self.json_mode:
            await call.stream.add("")
        try:
            result = await self._dispatch(call, message)
            reply: JsonObject = {"jsonrpc": "2.0", "id": call.request_id, "result": result}
        except FakeRpcError as exc:
            reply = {"jsonrpc": "2.0", "id": call.request_id, "error": exc.error}
        await call.stream.add(json.dumps(reply))
        await call.stream.finish()

    async def _dispatch(self, call: FakeCall, message: JsonObject) -> JsonObject:
        method = message["method"]
        if self.one_session and call.session is not self.all_sessions[-1]:
            await self._hold.wait()  # its answer went to the newest session's connection
        if method == "tools/call":
            script = self.tools.get(call.params.get("name", ""))
            if script is None:
                raise FakeRpcError(-32602, "unknown tool")
            return await script(call)
        if method == "tools/list":
            return {
                "tools": [{"name": name, "inputSchema": {"type": "object"}} for name in self.tools]
            }
        raise FakeRpcError(-32601, "Method not found")


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def text_result(text: str) -> JsonObject:
    return {"content": [{"type": "text", "text": text}]}


def echo_legacy() -> FakeLegacy:
    """A fake whose one tool `echo` answers its `text` argument."""
    fake = FakeLegacy()

    async def echo(call: FakeCall) -> JsonObject:
        return text_result(str(call.arguments.get("text", "")))

    fake.tools["echo"] = echo
    return fake


__all__ = [
    "FakeCall",
    "FakeLegacy",
    "FakeRpcError",
    "FakeSession",
    "FakeStream",
    "echo_legacy",
    "text_result",
]
