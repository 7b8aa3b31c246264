"""The aiohttp application: routes, typed app keys and the lifetimes they hold (STYLE §§ 1, 8).

`make_app(settings)` is the composition root of the HTTP bridge: one `cleanup_ctx` opens the one
`aiohttp.ClientSession` for the upstream, the `UpstreamPool`, the requestState key ring and the
`Engine`, and closes them in reverse order after `yield`. `make_front_app(settings, engine)` mounts
the same front and health routes around a given engine, for tests and embedding.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Final, Protocol

import aiohttp
import structlog
from aiohttp import web

from config.settings import Settings, UpstreamSettings
from proxy.dispatch import Engine
from proxy.front_http import ENGINE_KEY, FrontEngine, HttpFront
from proxy.health import Readiness
from proxy.keys import load_keyring
from proxy.logs import scrub_aiohttp_server_logs
from proxy.metrics import CONTENT_TYPE, BridgeMetrics
from proxy.upstream.base import STDIO, InboundHandler, JsonObject, PooledSession, SessionOpener, TransportInfo
from proxy.upstream.negotiation import NegotiatingOpener
from proxy.upstream.pool import UpstreamPool
from proxy.upstream.stdio_spares import SpareProcesses
from proxy.upstream.transport import HttpTransport
from translators.errors import UpstreamUnavailable

_log = structlog.get_logger("proxy.app")
UPSTREAM_KEEPALIVE_S: Final = 4.0


class ServedEngine(FrontEngine, Protocol):
    """An engine the HTTP app can serve: requests plus a readiness answer for `/readyz`."""

    def is_ready(self) -> bool: ...


SETTINGS_KEY: Final = web.AppKey("settings", Settings)
READINESS_KEY: Final = web.AppKey("readiness", ServedEngine)
POOL_KEY: Final = web.AppKey("upstream_pool", UpstreamPool)
RUNTIME_ENGINE_KEY: Final = web.AppKey("engine", Engine)
METRICS_KEY: Final = web.AppKey("metrics", BridgeMetrics)
READINESS_PROBE_KEY: Final = web.AppKey("readiness_probe", Readiness)
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
METRICS_PATH: Final = "/metrics"


async def _healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    """Ready when the requestState keys are loaded and the upstream answers (`proxy.health`)."""
    probe = request.app.get(READINESS_PROBE_KEY)
    if probe is not None:
        report = await probe.report()
        body = {"status": "ready" if report.ready else "unavailable", "checks": report.checks}
        return web.json_response(body, status=200 if report.ready else 503)
    engine = request.app.get(READINESS_KEY)
    if engine is not None and engine.is_ready():
        return web.json_response({"status": "ready"})
    return web.json_response({"status": "starting"}, status=503)


async def _metrics(request: web.Request) -> web.Response:
    """Prometheus text exposition of `BridgeMetrics` (names in docs/operations.md)."""
    body = request.app[METRICS_KEY].render().encode()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _count_responses(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count every HTTP response by status (aiohttp's own 400s for oversized headers excepted)."""
    metrics = request.app[METRICS_KEY]
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        metrics.observe_http(exc.status)
        raise
    metrics.observe_http(response.status)
    return response


def _header_limits(settings: Settings) -> dict[str, int]:
    """aiohttp's request-head limits (its parser answers 400 beyond them)."""
    front = settings.front
    return {"max_line_size": front.max_header_line_bytes, "max_field_size": front.max_header_field_bytes,
            "max_headers": front.max_headers}


def _base_app(settings: Settings, keepalive_s: float) -> web.Application:
    scrub_aiohttp_server_logs()
    app = web.Application(middlewares=[_count_responses], handler_args=_header_limits(settings))
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = BridgeMetrics()
    HttpFront(settings.front, settings.identity, keepalive_s=keepalive_s).add_routes(app)
    app.router.add_get(HEALTH_PATH, _healthz)
    app.router.add_get(READY_PATH, _readyz)
    app.router.add_get(METRICS_PATH, _metrics)
    return app


def make_front_app(
    settings: Settings, engine: ServedEngine, *, keepalive_s: float | None = None
) -> web.Application:
    """The front and health routes around an existing engine (no upstream lifetimes)."""
    app = _base_app(settings, settings.front.sse_keepalive_s if keepalive_s is None else keepalive_s)
    app[ENGINE_KEY] = engine
    app[READINESS_KEY] = engine
    return app


def _client(settings: Settings) -> aiohttp.ClientSession:
    # The pool bounds sessions (each keeps a GET stream open), so the connector must not: its
    # default limit of 100 connections would stall the 101st stream. Idle upstream connections are
    # dropped before common server keep-alive timeouts (uvicorn and Node close after 5 s), so a
    # request never goes out on a connection the server is closing.
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=UPSTREAM_KEEPALIVE_S),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=settings.upstream.connect_timeout_s),
    )


def http_opener(client: aiohttp.ClientSession, settings: UpstreamSettings) -> HttpTransport:
    """The pool's way to open a legacy HTTP session at `settings.url`, over the transport that
    `upstream.transport` names or that detection finds (`proxy.upstream.transport`)."""
    return HttpTransport(client, settings)


def stdio_opener(spares: SpareProcesses) -> SessionOpener:
    """The pool's way to open a legacy session: a started process (a spare if one is ready), initialized
    with the request's capabilities."""

    async def open_session(capabilities: JsonObject, headers: Mapping[str, str],
                           on_unrelated: InboundHandler) -> PooledSession:
        session = await spares.take()
        try:
            await session.initialize(capabilities, on_unrelated=on_unrelated)
        except UpstreamUnavailable:  # it died before answering (a spare may die while it waits): one more try
            session = await spares.take()
            await session.initialize(capabilities, on_unrelated=on_unrelated)
        return session

    return open_session


def _opener(client: aiohttp.ClientSession, upstream: UpstreamSettings,
            spares: SpareProcesses | None) -> tuple[SessionOpener, TransportInfo]:
    if spares is not None:
        return stdio_opener(spares), STDIO
    http = http_opener(client, upstream)
    return http, http


@asynccontextmanager
async def bridge_runtime(
    settings: Settings, metrics: BridgeMetrics | None = None
) -> AsyncIterator[tuple[Engine, UpstreamPool]]:
    """Key ring, upstream client, pool and engine for either front; closed in reverse on exit."""
    keyring, is_ephemeral = load_keyring(settings.held)
    if is_ephemeral:
        _log.warning("request_state_key_ephemeral",
                     hint="no held.keys configured: held calls will not survive a restart (see mrtr-bridge keygen)")
    upstream = settings.upstream
    spares = SpareProcesses(upstream) if upstream.command else None
    async with _client(settings) as client:
        engine: Engine  # bound just below; the pool calls back only once started
        opener, transport = _opener(client, upstream, spares)
        pool = UpstreamPool(upstream, NegotiatingOpener(opener), transport=transport,
                            on_unowned=lambda session, inbound: engine.on_unowned(session, inbound))
        engine = Engine(settings, pool, keyring, metrics=metrics)
        try:
            await pool.start()
            if spares is not None:
                spares.start()
            try:
                yield engine, pool
            finally:
                await engine.aclose()
        finally:
            await pool.aclose()
            if spares is not None:
                await spares.aclose()


async def _upstream_context(app: web.Application) -> AsyncIterator[None]:
    """The bridge runtime for the HTTP front, bound to the app's keys."""
    settings = app[SETTINGS_KEY]
    async with bridge_runtime(settings, app[METRICS_KEY]) as (engine, pool):
        app[READINESS_PROBE_KEY] = _readiness(settings, pool)
        app[POOL_KEY] = pool
        app[ENGINE_KEY] = engine
        app[READINESS_KEY] = engine
        app[RUNTIME_ENGINE_KEY] = engine
        yield


def _readiness(settings: Settings, pool: UpstreamPool) -> Readiness:
    static = settings.upstream.authorization
    headers = {"Authorization": static.get_secret_value()} if static is not None else {}
    return Readiness(pool, keys="configured" if settings.held.keys else "ephemeral", headers=headers,
                     timeout_s=settings.upstream.init_timeout_s, transport=pool.transport)


async def _on_shutdown(app: web.Application) -> None:
    """SIGTERM: long-lived listen streams end gracefully now, so in-flight requests can drain."""
    engine = app.get(RUNTIME_ENGINE_KEY)
    if engine is not None:
        engine.begin_shutdown()


def make_app(settings: Settings) -> web.Application:
    """The whole HTTP bridge for `settings`; run it with `handler_cancellation=True`."""
    app = _base_app(settings, settings.front.sse_keepalive_s)
    app.cleanup_ctx.append(_upstream_context)
    app.on_shutdown.append(_on_shutdown)
    return app


__all__ = [
    "METRICS_KEY",
    "POOL_KEY",
    "READINESS_KEY",
    "SETTINGS_KEY",
    "ServedEngine",
    "bridge_runtime",
    "http_opener",
    "make_app",
    "make_front_app",
    "stdio_opener",
]
