"""The modern path of the HTTP front: a validated request becomes a `FrontRequest` for the engine,
answered as JSON, or as SSE when the client accepts it and the request can produce notifications
(a progress token, a log level, or `subscriptions/listen`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Final, Protocol

import structlog
from aiohttp import web

from config.settings import IdentitySettings
from proxy.auth.principal import principal_of
from proxy.common.front_request import FrontRequest, NotificationSink, NullSink
from proxy.common.http_replies import Exchange, SseSink, accepts_sse, engine_reply, rejection
from proxy.common.log_context import log_context
from proxy.common.shown import shown_principal
from translators.protocol import eras
from translators.protocol.era_detection import Era
from translators.protocol.paths import relays_after_failure
from translators.protocol.request_validation import ModernRoute
from translators.wire.errors import InvalidRequest, ShuttingDown
from translators.wire.jsonrpc import JsonObject

_TRACE_HEADERS: Final = ("traceparent", "tracestate", "baggage")
_log = structlog.get_logger("proxy.http_front")


class FrontEngine(Protocol):
    """What the front needs from the engine (`proxy.engine.engine.Engine`)."""

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> JsonObject: ...


class EngineSource(Protocol):
    """Where the front finds its engine: the upstream it serves (`proxy.app.compose.Upstream`),
    whose runtime opens the engine at start-up (None before)."""

    @property
    def engine(self) -> FrontEngine | None: ...


Relay = Callable[[web.Request, bytes, Exchange], Awaitable[web.StreamResponse]]


class UpstreamEra(Protocol):
    """What the front reads of the upstream's era (`proxy.upstream.era.UpstreamEra`): plain
    attributes, read on every request, and the wait for a probe in flight."""

    era: Era | None
    probing: bool
    relays_modern: bool  # modern requests go to the upstream untranslated
    modern_waits: bool  # a modern request waits for a probe in flight

    def reprobe_soon(self) -> None: ...

    async def settled(self) -> None: ...


class ModernPath:
    def __init__(
        self,
        identity: IdentitySettings,
        engines: EngineSource,
        era: UpstreamEra | None,
        relay: Relay,
        keepalive_s: float,
        queue_limit: int,
    ) -> None:
        """`era`: the upstream's era, when the bridge tracks it; `relay` sends a request to the
        upstream untranslated (an engine failure from an upstream that became modern-only)."""
        self._identity = identity
        self._engines = engines
        self._era = era
        self._relay = relay
        self._keepalive_s = keepalive_s
        self._queue_limit = queue_limit

    def front_request(
        self, headers: dict[str, str], route: ModernRoute, *, owner_unreachable: bool = False
    ) -> FrontRequest:
        """`headers` are the request's, lower-cased."""
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

    async def dispatch(
        self,
        request: web.Request,
        headers: dict[str, str],
        route: ModernRoute,
        exchange: Exchange,
        raw: bytes,
        *,
        owner_unreachable: bool = False,
    ) -> web.StreamResponse:
        front_request = self.front_request(headers, route, owner_unreachable=owner_unreachable)
        exchange.principal = front_request.principal
        wants_notifications = (
            route.progress_token is not None
            or route.log_level is not None
            or route.method == eras.SUBSCRIPTIONS_LISTEN
        )
        sse = accepts_sse(headers.get("accept"))
        if route.method == eras.SUBSCRIPTIONS_LISTEN and not sse:
            message = (
                "Not Acceptable: subscriptions/listen replies with an SSE stream; send "
                "Accept: text/event-stream"
            )
            return rejection(InvalidRequest(message), route.front_request_id, exchange, 406)
        engine = self._engines.engine
        if engine is None:  # before start-up finished: not served yet
            return rejection(ShuttingDown(), route.front_request_id, exchange)
        with log_context(
            request_id=route.front_request_id,
            method=route.method,
            transport="http",
            principal=shown_principal(front_request.principal),
        ):
            if wants_notifications and sse:
                return await self._stream(request, engine, front_request, exchange)
            era = self._era
            before = era.era if era is not None else None
            reply = await engine.handle(front_request, NullSink())
            if era is not None and "error" in reply:
                await era.settled()  # the failure may have started a probe
                if relays_after_failure(before, era.era):
                    # the upstream was upgraded under the bridge: the call never reached it
                    return await self._relay(request, raw, exchange)
            return engine_reply(reply, exchange)

    async def _stream(
        self,
        request: web.Request,
        engine: FrontEngine,
        front_request: FrontRequest,
        exchange: Exchange,
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
            return engine_reply(response, exchange)
        exchange.mode = "sse"
        exchange.answered(response)
        return stream


__all__ = ["EngineSource", "FrontEngine", "ModernPath", "UpstreamEra"]
