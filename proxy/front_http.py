"""The modern Streamable HTTP endpoint, strictly 2026-07-28 (2026-07-28/basic/transports/streamable-
http.mdx).

One POST carries one JSON-RPC message. In order: Host and Origin (403), method (405), media type
(415), body size (413), then the validation ladder of `translators.inbound`; a rejection is a
JSON-RPC error echoing the request id with the error's HTTP status. A notification is accepted
with 202. A valid request becomes a `FrontRequest` for the engine.

The reply is JSON, or SSE when the client accepts it and the request can produce notifications
(a progress token, a log level, or `subscriptions/listen`). A streamed reply commits to
`text/event-stream` only when the first notification arrives or a keep-alive is due, so an
engine answer that comes first (often an error) still gets JSON and its proper HTTP status.
Closing the stream cancels the handler task, and with it `engine.handle` (the engine turns that
into an upstream cancel). No `Mcp-Session-Id` is ever sent; `Last-Event-ID` is ignored.

A legacy client's request (`initialize` without modern `_meta`, an `Mcp-Session-Id`, a legacy
`MCP-Protocol-Version`, a batch) goes to `proxy.legacy_relay` instead, after the Host and Origin
checks; the modern path is unchanged.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import structlog
from aiohttp import web
from structlog.contextvars import bound_contextvars

from config.settings import FrontSettings, IdentitySettings
from proxy.context import FrontRequest, NotificationSink, NullSink
from proxy.legacy_relay import LegacyRelay
from proxy.modern_relay import ModernUpstream
from proxy.principal import principal_of
from translators import eras
from translators.era_detection import is_legacy_client
from translators.errors import BridgeError, ClientFault, InvalidRequest, http_status_for
from translators.forward_proof import ProofRejected
from translators.inbound import (
    ModernRoute,
    check_envelope,
    decode_json,
    fold_headers,
    message_id,
    validate_request,
)
from translators.jsonrpc import JsonObject, to_error_response
from translators.oauth import ChallengeReply
from translators.sse import encode_event

SSE_KEEPALIVE_S: Final = 15.0
SSE_QUEUE_LIMIT: Final = 256
_SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
_KEEPALIVE: Final = b": keep-alive\n\n"
_TRACE_HEADERS: Final = ("traceparent", "tracestate", "baggage")
_log = structlog.get_logger("proxy.front_http")


class FrontEngine(Protocol):
    """What the front needs from the engine (`proxy.dispatch.Engine`)."""

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> JsonObject: ...


class ClusterHop(Protocol):
    """Forwarding between replicas (`proxy.cluster.forward.Forwarder`), when a cluster is
    configured."""

    def check_inbound(self, request: web.Request, body: bytes) -> object | None: ...

    def owner_elsewhere(self, route: ModernRoute) -> str | None: ...

    async def forward(
        self,
        request: web.Request,
        body: bytes,
        route: ModernRoute,
        owner: str,
        *,
        on_unreachable: Callable[[web.Request, ModernRoute, Any], Awaitable[web.StreamResponse]]
        | None = None,
    ) -> web.StreamResponse: ...


ENGINE_KEY: Final = web.AppKey("front_engine", FrontEngine)
HOP_KEY: Final = web.AppKey("cluster_hop", ClusterHop)


class _Exchange:
    """What the summary log line reports about one POST."""

    __slots__ = ("code", "front_request_id", "method", "mode", "started")

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.front_request_id: int | str | None = None
        self.method: str | None = None
        self.code: int | None = None
        self.mode = "json"


def _json_text(message: JsonObject) -> str:
    """Compact JSON that UTF-8 can carry; with `\\u` escapes when a string holds a lone surrogate
    (an echoed id, say)."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":"))
    return text


def _json_bytes(message: JsonObject) -> bytes:
    return _json_text(message).encode()


def _json_reply(message: JsonObject, status: int, exchange: _Exchange) -> web.Response:
    error = message.get("error")
    exchange.code = error.get("code") if isinstance(error, dict) else None
    body = _json_bytes(message)
    return web.Response(body=body, status=status, content_type="application/json")


def _rejection(
    exc: BridgeError, front_request_id: Any, exchange: _Exchange, status: int | None = None
) -> web.Response:
    return _json_reply(
        to_error_response(exc, front_request_id), status or exc.http_status, exchange
    )


def _engine_reply(message: JsonObject, exchange: _Exchange) -> web.Response:
    if isinstance(message, ChallengeReply):  # an upstream 401 / 403 step-up, passed through
        response = _json_reply(message, message.status, exchange)
        response.headers["WWW-Authenticate"] = message.www_authenticate
        return response
    error = message.get("error")
    status = http_status_for(error.get("code", 0)) if isinstance(error, dict) else 200
    return _json_reply(message, status, exchange)


def _sse_event(message: JsonObject) -> bytes:
    return encode_event(_json_text(message), event="message")


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


def _host_name(host: str) -> str:
    """The host part of a Host header value, lower-cased, port dropped (`[::1]:80` -> `[::1]`)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.split(":", 1)[0] if host.count(":") == 1 else host


def _lower_headers(request: web.Request) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        headers.setdefault(
            name.lower(), value
        )  # the first line wins, as for the forwarded Authorization
    return headers


class _Gate:
    """Host and Origin checks against DNS rebinding (2026-07-28/basic/transports/streamable-http.mdx
    § Security Warning)."""

    def __init__(self, front: FrontSettings) -> None:
        hosts = {host.lower() for host in front.allowed_hosts}
        if front.host not in ("0.0.0.0", "::", ""):
            hosts.add(front.host.lower())
        self._any_host = "*" in hosts
        self._hosts = hosts | {
            f"[{host}]" for host in hosts if ":" in host and not host.startswith("[")
        }
        self._origins = {origin.lower().rstrip("/") for origin in front.allowed_origins}

    def is_allowed_host(self, host: str | None) -> bool:
        return self._any_host or (host is not None and _host_name(host) in self._hosts)

    def is_allowed_origin(self, origin: str | None) -> bool:
        if origin is None or origin.lower().rstrip("/") in self._origins:
            return True
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return (
            self._any_host or parts.hostname in self._hosts or f"[{parts.hostname}]" in self._hosts
        )


class HttpFront:
    """The aiohttp handler of the MCP endpoint; the engine comes from `request.app[ENGINE_KEY]`."""

    def __init__(
        self,
        front: FrontSettings,
        identity: IdentitySettings,
        *,
        keepalive_s: float = SSE_KEEPALIVE_S,
        queue_limit: int = SSE_QUEUE_LIMIT,
        legacy: LegacyRelay | None = None,
        modern: ModernUpstream | None = None,
    ) -> None:
        # legacy clients are relayed there (proxy.legacy_relay); None: the modern path only
        self._legacy = legacy
        self._modern = (
            modern  # a modern upstream takes modern requests untranslated (proxy.modern_relay)
        )
        self._front = front
        self._identity = identity
        self._gate = _Gate(front)
        self._keepalive_s = keepalive_s
        self._queue_limit = queue_limit

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", self._front.path, self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        exchange = _Exchange()
        try:
            response = await self._serve(request, exchange)
        except asyncio.CancelledError:
            self._log_finished(exchange, status=None, cancelled=True)
            raise
        self._log_finished(exchange, status=response.status)
        return response

    def _log_finished(
        self, exchange: _Exchange, status: int | None, cancelled: bool = False
    ) -> None:
        _log.info(
            "front_request_finished",
            request_id=exchange.front_request_id,
            method=exchange.method,
            status=status,
            code=exchange.code,
            mode=exchange.mode,
            cancelled=cancelled,
            duration_ms=round((time.monotonic() - exchange.started) * 1000, 1),
        )

    def _check_gate(self, request: web.Request, exchange: _Exchange) -> web.Response | None:
        if not self._gate.is_allowed_host(request.headers.get("Host")):
            host = request.headers.get("Host")
            message = f"Forbidden: Host {host!r} is not allowed (front.allowed_hosts)"
            return _rejection(InvalidRequest(message), None, exchange, 403)
        origin = request.headers.get("Origin")
        if not self._gate.is_allowed_origin(origin):
            message = f"Forbidden: Origin {origin!r} is not allowed (front.allowed_origins)"
            return _rejection(InvalidRequest(message), None, exchange, 403)
        return None

    def _check_transport(self, request: web.Request, exchange: _Exchange) -> web.Response | None:
        if request.method != "POST":
            message = (
                f"Method Not Allowed: the MCP endpoint accepts POST only, not {request.method}"
            )
            response = _rejection(InvalidRequest(message), None, exchange, 405)
            response.headers["Allow"] = "POST"
            return response
        if request.content_type != "application/json":
            message = (
                "Unsupported Media Type: the body must be application/json, not "
                f"{request.content_type!r}"
            )
            return _rejection(InvalidRequest(message), None, exchange, 415)
        return None

    async def _read_body(self, request: web.Request) -> bytes | None:
        """The body, or None when it exceeds `front.max_body_bytes`."""
        limit = self._front.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return None
        body = bytearray()
        async for chunk in request.content.iter_any():
            body += chunk
            if len(body) > limit:
                return None
        return bytes(body)

    async def _to_legacy(
        self, request: web.Request, exchange: _Exchange, body: bytes | None, method: str | None
    ) -> web.StreamResponse:
        assert self._legacy is not None
        exchange.mode, exchange.method = "legacy", method
        if self._modern is not None and self._modern.modern_only:
            return self._modern.legacy_refusal(None)
        principal = principal_of(_lower_headers(request), self._identity)
        with bound_contextvars(transport="http", era="legacy", principal=principal):
            return await self._legacy.handle(request, body, principal, method)

    async def _serve(self, request: web.Request, exchange: _Exchange) -> web.StreamResponse:
        legacy_head = (
            self._legacy is not None
            and request.method in ("GET", "DELETE")
            and is_legacy_client(_lower_headers(request))
        )
        rejected = self._check_gate(request, exchange) or (
            None if legacy_head else self._check_transport(request, exchange)
        )
        if rejected is not None:
            return rejected
        if legacy_head:
            return await self._to_legacy(request, exchange, None, None)
        raw = await self._read_body(request)
        if raw is None:
            limit = self._front.max_body_bytes
            too_large = InvalidRequest(
                f"Request body too large: the limit is {limit} bytes (front.max_body_bytes)"
            )
            return _rejection(too_large, None, exchange, 413)
        hop = request.app.get(HOP_KEY)
        try:
            if hop is not None and hop.check_inbound(request, raw) is not None:
                hop = None  # a forwarded request is served here, never forwarded again
        except ProofRejected:
            forged = InvalidRequest(
                "Forbidden: this request claims to come from a replica; its proof is not valid"
            )
            return _rejection(forged, None, exchange, 403)
        try:
            decoded = decode_json(raw, self._front.max_json_depth)
            if self._legacy is not None and is_legacy_client(_lower_headers(request), decoded):
                method = decoded.get("method") if isinstance(decoded, dict) else None
                return await self._to_legacy(
                    request, exchange, raw, method if isinstance(method, str) else None
                )
            exchange.front_request_id = message_id(decoded)
            if self._modern is not None and await self._modern.takes_modern():
                exchange.mode = "relayed"
                return await self._modern.relay(request, raw)
            message = check_envelope(decoded)
            exchange.method = message["method"]
            if "id" not in message:
                exchange.mode = "accepted"
                return web.Response(status=202)
            route = validate_request(message, fold_headers(request.headers.items()))
        except ClientFault as exc:
            return _rejection(exc, exchange.front_request_id, exchange)
        owner = hop.owner_elsewhere(route) if hop is not None else None
        if hop is not None and owner is not None:
            exchange.mode = "forwarded"

            async def recover_here(
                request: web.Request, route: ModernRoute, _: object
            ) -> web.StreamResponse:
                # the owner is gone: serve the retry here, where recovery may re-execute it
                return await self._dispatch(request, route, exchange, raw, owner_unreachable=True)

            with bound_contextvars(
                request_id=route.front_request_id, method=route.method, transport="http"
            ):
                return await hop.forward(request, raw, route, owner, on_unreachable=recover_here)
        return await self._dispatch(request, route, exchange, raw)

    def _front_request(
        self, request: web.Request, route: ModernRoute, *, owner_unreachable: bool = False
    ) -> FrontRequest:
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            headers.setdefault(
                name.lower(), value
            )  # the first line wins, as for the forwarded Authorization
        return FrontRequest(
            front_request_id=route.front_request_id,
            method=route.method,
            params=route.params,
            principal=principal_of(headers, self._identity),
            authorization=headers.get("authorization"),
            trace_headers={name: headers[name] for name in _TRACE_HEADERS if name in headers},
            transport="http",
            param_headers=route.param_headers,
            owner_unreachable=owner_unreachable,
        )

    async def _dispatch(
        self,
        request: web.Request,
        route: ModernRoute,
        exchange: _Exchange,
        raw: bytes,
        *,
        owner_unreachable: bool = False,
    ) -> web.StreamResponse:
        front_request = self._front_request(request, route, owner_unreachable=owner_unreachable)
        wants_notifications = (
            route.progress_token is not None
            or route.log_level is not None
            or route.method == eras.SUBSCRIPTIONS_LISTEN
        )
        sse = accepts_sse(request.headers.get("Accept"))
        if route.method == eras.SUBSCRIPTIONS_LISTEN and not sse:
            message = (
                "Not Acceptable: subscriptions/listen replies with an SSE stream; send "
                "Accept: text/event-stream"
            )
            return _rejection(InvalidRequest(message), route.front_request_id, exchange, 406)
        engine = request.app[ENGINE_KEY]
        context = {
            "request_id": route.front_request_id,
            "method": route.method,
            "transport": "http",
            "principal": front_request.principal,
        }
        with bound_contextvars(**context):
            if wants_notifications and sse:
                return await self._stream(request, engine, front_request, exchange)
            era = self._modern.era.era if self._modern is not None else None
            reply = await engine.handle(front_request, NullSink())
            if (
                self._modern is not None
                and "error" in reply
                and await self._modern.became_modern_only(era)
            ):
                # the upstream was upgraded under the bridge: the call never reached it
                exchange.mode = "relayed"
                return await self._modern.relay(request, raw)
            return _engine_reply(reply, exchange)

    async def _stream(
        self,
        request: web.Request,
        engine: FrontEngine,
        front_request: FrontRequest,
        exchange: _Exchange,
    ) -> web.StreamResponse:
        owner = asyncio.current_task()
        assert owner is not None  # aiohttp runs every handler in a task
        sink = SseSink(request, owner, self._keepalive_s, self._queue_limit)
        writer = asyncio.create_task(sink.run())
        try:
            response = await engine.handle(front_request, sink)
            sink.finish(response)
            stream = await writer
        finally:
            sink.close()
            if not writer.done():
                writer.cancel()
                with suppress(asyncio.CancelledError):
                    await writer
            if sink.dropped:
                _log.warning(
                    "front_notifications_dropped", dropped=sink.dropped, limit=self._queue_limit
                )
        if stream is None:
            return _engine_reply(response, exchange)
        exchange.mode = "sse"
        error = response.get("error")
        exchange.code = error.get("code") if isinstance(error, dict) else None
        return stream


__all__ = [
    "ENGINE_KEY",
    "HOP_KEY",
    "SSE_KEEPALIVE_S",
    "ClusterHop",
    "FrontEngine",
    "HttpFront",
    "SseSink",
    "accepts_sse",
]
