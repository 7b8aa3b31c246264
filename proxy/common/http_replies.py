"""The HTTP front's replies: JSON (`json_reply`, `engine_reply`, `rejection`) and SSE streams
(`SseSink`, `streamed`), and what the per-POST summary log line reports (`Exchange`).

An SSE stream commits only when it must: `SseSink` is the `NotificationSink` of one request whose
reply may carry notifications: a bounded buffer drained by a writer task. The stream commits to
`text/event-stream` when the first notification arrives or a keep-alive is due, so an engine answer
that comes first (often an error) is still sent as JSON with its proper HTTP status. Closing the
stream cancels the request. `streamed` runs one piece of work with such a sink (the reverse
direction's requests, the modern stdio relay).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog
from aiohttp import web

from translators.auth.oauth import ChallengeReply
from translators.wire import fast_json
from translators.wire.errors import BridgeError, http_status_for
from translators.wire.jsonrpc import JsonObject, to_error_response
from translators.wire.sse import encode_event


class Exchange:
    """What the access log line (`front_request_finished`, proxy/observe/access.py) reports about
    one request."""

    __slots__ = (
        "client_era",
        "code",
        "front_request_id",
        "method",
        "mode",
        "name",
        "principal",
        "result_type",
        "started",
    )

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.front_request_id: int | str | None = None
        self.method: str | None = None
        self.name: str | None = None  # tool / prompt name, resource URI without its query
        self.principal: str | None = None  # the caller's digest
        self.client_era = "modern"
        self.code: int | None = None
        self.result_type: str | None = None
        self.mode = "json"

    def answered(self, message: JsonObject) -> None:
        """Note the JSON-RPC answer: its error code, or its result's `resultType`."""
        error = message.get("error")
        self.code = error.get("code") if isinstance(error, dict) else None
        result = message.get("result")
        kind = result.get("resultType") if isinstance(result, dict) else None
        self.result_type = kind if isinstance(kind, str) else None

    def outcome(self, status: int | None, cancelled: bool) -> str:
        """`complete`, `input_required`, `task`, `error` (with `code`), `cancelled`, `accepted`, or
        where the answer came from when the bridge did not read it (`legacy`, `relayed`,
        `forwarded`, with the HTTP status)."""
        if cancelled:
            return "cancelled"
        if self.code is not None or (status is not None and status >= 400):
            return "error"
        if self.mode in ("legacy", "relayed", "forwarded", "accepted"):
            return self.mode
        if self.result_type in ("input_required", "task"):
            return self.result_type
        return "complete"


class SentOnce(web.Response):
    """A reply that lets go of its body once written. aiohttp keeps a keep-alive connection's last
    response until the connection's next request, and a client whose call is held (its
    `InputRequiredResult` answered) idles there until it retries: a few KB per held call."""

    async def write_eof(self, data: bytes = b"") -> None:
        await super().write_eof(data)
        self._body = None


def json_reply(message: JsonObject, status: int, exchange: Exchange) -> web.Response:
    """`message` as compact UTF-8 JSON (`\\u` escapes only where a string holds a lone surrogate,
    an echoed id, say)."""
    exchange.answered(message)
    body = fast_json.dumps(message)
    return SentOnce(body=body, status=status, content_type="application/json")


def rejection(
    exc: BridgeError, front_request_id: Any, exchange: Exchange, status: int | None = None
) -> web.Response:
    return json_reply(to_error_response(exc, front_request_id), status or exc.http_status, exchange)


def engine_reply(message: JsonObject, exchange: Exchange) -> web.Response:
    if isinstance(message, ChallengeReply):  # an upstream 401 / 403 step-up, passed through
        response = json_reply(message, message.status, exchange)
        response.headers["WWW-Authenticate"] = message.www_authenticate
        return response
    error = message.get("error")
    status = http_status_for(error.get("code", 0)) if isinstance(error, dict) else 200
    return json_reply(message, status, exchange)


SSE_KEEPALIVE_S: Final = 15.0
SSE_QUEUE_LIMIT: Final = 256
_SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
_KEEPALIVE: Final = b": keep-alive\n\n"
_log = structlog.get_logger("proxy.http_front")


def _sse_event(message: JsonObject) -> bytes:
    return encode_event(fast_json.dumps(message).decode(), event="message")


class SseSink:
    """The `NotificationSink` of one streamed reply: a bounded buffer drained by a writer task.

    `send` never blocks and never raises; past the limit notifications are dropped and counted."""

    def __init__(
        self, request: web.Request, owner: asyncio.Task[Any], keepalive_s: float, limit: int
    ) -> None:
        self._request = request
        self._owner = owner
        self._keepalive_s = keepalive_s
        self._limit = limit
        self._pending: deque[JsonObject] = deque()
        self._wakeup = asyncio.Event()
        self._final: JsonObject | None = None
        self._closed = False
        self.dropped = 0
        self.stream: web.StreamResponse | None = None

    def send(self, notification: JsonObject) -> None:
        if self._closed:
            return
        if len(self._pending) >= self._limit:
            self.dropped += 1
            return
        self._pending.append(notification)
        self._wakeup.set()

    def finish(self, response: JsonObject) -> None:
        """The final response: written as the last event, or returned as JSON if nothing was
        sent."""
        self._closed = True
        self._final = response
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True

    async def run(self) -> web.StreamResponse | None:
        """Writer task: returns the finished stream, or None when the reply should be plain JSON."""
        try:
            return await self._write_all()
        except ConnectionResetError:
            _log.debug("front_stream_closed_by_client")
            self._closed = True
            self._owner.cancel()  # closing the stream cancels the request
            return self.stream

    async def _write_all(self) -> web.StreamResponse | None:
        while True:
            woke = await self._wait()
            if self.stream is None and self._final is not None and not self._pending:
                return None
            stream = self.stream or await self._commit()
            if not woke:
                await stream.write(_KEEPALIVE)
                continue
            await self._drain(stream)
            if self._final is not None:
                await stream.write(_sse_event(self._final))
                await stream.write_eof()
                return stream

    async def _wait(self) -> bool:
        try:
            async with asyncio.timeout(self._keepalive_s):
                await self._wakeup.wait()
        except TimeoutError:
            return False
        self._wakeup.clear()
        return True

    async def _commit(self) -> web.StreamResponse:
        self.stream = web.StreamResponse(status=200, headers=_SSE_HEADERS)
        await self.stream.prepare(self._request)
        return self.stream

    async def _drain(self, stream: web.StreamResponse) -> None:
        while self._pending:
            notification = self._pending.popleft()
            try:
                event = _sse_event(notification)
            except (TypeError, ValueError):
                _log.warning(
                    "front_notification_unserializable",
                    notification_method=notification.get("method"),
                )
                continue
            await stream.write(event)


def _media_types(header: str) -> set[str]:
    return {part.split(";", 1)[0].strip().lower() for part in header.split(",")}


def accepts_sse(accept: str | None) -> bool:
    """Whether an Accept header admits `text/event-stream`."""
    return accept is not None and bool(
        _media_types(accept) & {"text/event-stream", "text/*", "*/*"}
    )


Send = Callable[[JsonObject], None]


async def streamed(
    request: web.Request, keepalive_s: float, work: Callable[[Send], Awaitable[JsonObject]]
) -> tuple[web.StreamResponse | None, JsonObject]:
    """Run `work` with a `send` onto the reply's stream; the finished stream (None when nothing
    was sent: answer the response as JSON) and the JSON-RPC response. Closing the stream cancels
    the handler's task, and with it `work`."""
    owner = asyncio.current_task()
    assert owner is not None  # aiohttp runs every handler in a task
    sink = SseSink(request, owner, keepalive_s, SSE_QUEUE_LIMIT)
    writer = asyncio.create_task(sink.run())
    try:
        response = await work(sink.send)
    except BaseException:
        sink.close()
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        raise
    sink.finish(response)
    return await writer, response


__all__ = [
    "SSE_KEEPALIVE_S",
    "SSE_QUEUE_LIMIT",
    "Exchange",
    "Send",
    "SseSink",
    "accepts_sse",
    "engine_reply",
    "json_reply",
    "rejection",
    "streamed",
]
