"""The aiohttp application: routes, typed app keys and the lifetimes they hold (docs/decisions.md §§
1, 6).

`make_app(settings)` is the composition root of the HTTP bridge: one `cleanup_ctx` opens the one
`aiohttp.ClientSession` for the upstream, the `UpstreamPool`, the requestState key ring and the
`Engine`, and closes them in reverse order after `yield`. `make_front_app(settings, engine)` mounts
the same front and health routes around a given engine, for tests and embedding.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Final, Protocol

import aiohttp
import structlog
from aiohttp import web

from config.settings import Settings
from proxy.app.health import Readiness, upstream_up
from proxy.app.runtime import UPSTREAM_KEEPALIVE_S, bridge_runtime, held_counts
from proxy.app.status import StatusPage, StatusSources
from proxy.auth.keys import load_keyring
from proxy.auth.oauth_passthrough import MetadataRelay, passes_challenges
from proxy.cluster.forward import Forwarder
from proxy.cluster.peers import REPLICA_PATH, PeerDirectory, replica_handler
from proxy.common.per_principal import PrincipalCounts
from proxy.common.shown import shown_uri
from proxy.engine.engine import Engine, close_reserve_s
from proxy.http_front import ENGINE_KEY, HOP_KEY, FrontEngine, HttpFront
from proxy.observe.access import upstream_name
from proxy.observe.logs import scrub_aiohttp_server_logs
from proxy.observe.metrics import BridgeMetrics
from proxy.passthrough.legacy_clients import LegacyRelay
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.stdio_relay import modern_upstream
from proxy.reverse.wiring import reverse_front
from proxy.upstream.base import (
    SessionOpener,
)
from proxy.upstream.http.outbound import upstream_client
from proxy.upstream.pool import UpstreamPool
from proxy.upstream.reachability import StartupWatch
from proxy.upstream.stdio.children import ChildProcesses

_log = structlog.get_logger("proxy.app.http_app")


class ServedEngine(FrontEngine, Protocol):
    """An engine the HTTP app can serve: requests plus a readiness answer for `/readyz`."""

    def is_ready(self) -> bool: ...


SETTINGS_KEY: Final = web.AppKey("settings", Settings)
READINESS_KEY: Final = web.AppKey("readiness", ServedEngine)
POOL_KEY: Final = web.AppKey("upstream_pool", UpstreamPool)
RUNTIME_ENGINE_KEY: Final = web.AppKey("engine", Engine)
CHILDREN_KEY: Final = web.AppKey("stdio_children", ChildProcesses)
METRICS_KEY: Final = web.AppKey("metrics", BridgeMetrics)
READINESS_PROBE_KEY: Final = web.AppKey("readiness_probe", Readiness)
# optional: replaces the transport
OPENER_KEY: Final[web.AppKey[SessionOpener]] = web.AppKey("session_opener")
LEGACY_RELAY_KEY: Final = web.AppKey("legacy_relay", LegacyRelay)
MODERN_KEY: Final = web.AppKey("modern_upstream", ModernUpstream)
# calls waiting for their client's input, counted once for both directions (held.*)
HELD_KEY: Final = web.AppKey("held_counts", PrincipalCounts)
PEERS_KEY: Final = web.AppKey("cluster_peers", PeerDirectory)
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
METRICS_PATH: Final = "/metrics"


async def _healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    """Ready when the requestState keys are loaded and the upstream answers (`proxy.app.health`)."""
    probe = request.app.get(READINESS_PROBE_KEY)
    if probe is not None:
        report = await probe.report()
        ready, checks = report.ready, dict(report.checks)
        modern = request.app.get(MODERN_KEY)
        if modern is not None:
            checks["era"] = modern.era.era or "unknown"
            # no legacy session can open: reachable means the era probe answered
            if modern.modern_only:
                ready, checks["upstream"] = True, "reachable (modern-only: relayed untranslated)"
        body = {"status": "ready" if ready else "unavailable", "checks": checks}
        return web.json_response(body, status=200 if ready else 503)
    engine = request.app.get(READINESS_KEY)
    if engine is not None and engine.is_ready():
        return web.json_response({"status": "ready"})
    return web.json_response({"status": "starting"}, status=503)


async def _metrics(request: web.Request) -> web.Response:
    """`BridgeMetrics` as Prometheus text, or OpenMetrics if `Accept` asks (docs/operations.md)."""
    body, content_type = request.app[METRICS_KEY].exposition(request.headers.get("Accept", ""))
    return web.Response(body=body, headers={"Content-Type": content_type})


async def _count_response(request: web.Request, response: web.StreamResponse) -> None:
    """Count every HTTP response by status as it is sent (aiohttp's own 400s for oversized headers
    excepted): a response signal rather than a middleware, which would wrap every handler in two
    more coroutines."""
    request.app[METRICS_KEY].observe_http(response.status)


def _header_limits(settings: Settings) -> dict[str, int]:
    """aiohttp's request-head limits (its parser answers 400 beyond them)."""
    front = settings.front
    return {
        "max_line_size": front.max_header_line_bytes,
        "max_field_size": front.max_header_field_bytes,
        "max_headers": front.max_headers,
    }


def _base_app(
    settings: Settings, keepalive_s: float, modern: ModernUpstream | None = None
) -> web.Application:
    scrub_aiohttp_server_logs()
    app = web.Application(handler_args=_header_limits(settings))
    app.on_response_prepare.append(_count_response)
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = BridgeMetrics()
    app[HELD_KEY] = held_counts(settings)
    legacy = (
        LegacyRelay(settings, observe=app[METRICS_KEY].observe_error)
        if settings.front.legacy_clients == "pass"
        else None
    )
    if legacy is not None:
        app[LEGACY_RELAY_KEY] = legacy
        app.on_cleanup.append(lambda _app: legacy.aclose())
    reverse = None
    if modern is not None:
        app[MODERN_KEY] = modern
        reverse = reverse_front(settings, modern, app[HELD_KEY], app[METRICS_KEY].observe_error)
        app.on_cleanup.append(lambda _app: reverse.aclose())
    HttpFront(
        settings.front,
        settings.identity,
        keepalive_s=keepalive_s,
        legacy=legacy,
        modern=modern,
        access_log=settings.log.access,
        upstream=upstream_name(settings.upstream),
        reverse=reverse,
    ).add_routes(app)
    if passes_challenges(settings.upstream):
        MetadataRelay(settings, functools.partial(upstream_client, settings.upstream)).add_routes(
            app
        )
    app.router.add_get(HEALTH_PATH, _healthz)
    app.router.add_get(READY_PATH, _readyz)
    app.router.add_get(METRICS_PATH, _metrics)
    StatusPage(settings, _status_sources).add_routes(app)
    return app


def _status_sources(app: web.Application) -> StatusSources:
    """What `/status` reads, from this app's lifetimes (proxy/app/status.py)."""
    engine = app.get(RUNTIME_ENGINE_KEY)  # none around a scripted engine (make_front_app)
    modern = app.get(MODERN_KEY)
    return StatusSources(
        registry=engine.registry if engine is not None else None,
        pool=app.get(POOL_KEY),
        peers=app.get(PEERS_KEY),
        era=modern.era.era if modern is not None else None,
    )


def make_front_app(
    settings: Settings, engine: ServedEngine, *, keepalive_s: float | None = None
) -> web.Application:
    """The front and health routes around an existing engine (no upstream lifetimes)."""
    app = _base_app(
        settings, settings.front.sse_keepalive_s if keepalive_s is None else keepalive_s
    )
    app[ENGINE_KEY] = engine
    app[READINESS_KEY] = engine
    return app


async def _era_context(app: web.Application) -> AsyncIterator[None]:
    """The upstream's era: probed before the first request, kept current until shutdown."""
    modern = app[MODERN_KEY]
    url = app[SETTINGS_KEY].upstream.url
    watch = StartupWatch(modern.era, shown_uri(url) if url else "")
    try:
        await modern.era.start()  # inside: a stop during the first probe closes its client
        watch.start()
        yield
    finally:
        await watch.aclose()
        await modern.aclose()


async def _cluster_context(app: web.Application) -> AsyncIterator[None]:
    """The peer set and the forwarding hop, when `cluster.peers` or `cluster.peers_dns` is set."""
    settings = app[SETTINGS_KEY]
    if not settings.cluster.enabled:
        yield
        return
    connector = aiohttp.TCPConnector(
        limit=settings.cluster.max_forwards + 16, keepalive_timeout=UPSTREAM_KEEPALIVE_S
    )
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as client:
        directory = PeerDirectory(settings.cluster, settings.held.replica_id, client)
        app[HOP_KEY] = Forwarder(
            settings, load_keyring(settings.held)[0], directory, client, app[METRICS_KEY]
        )
        app[PEERS_KEY] = directory
        directory.start()
        _log.info(
            "cluster_enabled",
            replica_id=settings.held.replica_id,
            peers=len(settings.cluster.peers),
            peers_dns=settings.cluster.peers_dns,
        )
        try:
            yield
        finally:
            await directory.aclose()


async def _upstream_context(app: web.Application) -> AsyncIterator[None]:
    """The bridge runtime for the HTTP front, bound to the app's keys."""
    settings = app[SETTINGS_KEY]
    modern = app.get(MODERN_KEY)
    async with bridge_runtime(
        settings,
        app[METRICS_KEY],
        app.get(CHILDREN_KEY),
        opener=app.get(OPENER_KEY),
        on_open_failure=modern.era.reprobe_soon if modern else None,
        held=app[HELD_KEY],
    ) as (engine, pool):
        app[READINESS_PROBE_KEY] = _readiness(settings, pool)
        up = upstream_up(app[READINESS_PROBE_KEY], modern.era if modern else None)
        app[METRICS_KEY].watch_upstream(upstream_name(settings.upstream), up)
        app[POOL_KEY] = pool
        app[ENGINE_KEY] = engine
        app[READINESS_KEY] = engine
        app[RUNTIME_ENGINE_KEY] = engine
        yield


def _readiness(settings: Settings, pool: UpstreamPool) -> Readiness:
    static = settings.upstream.authorization
    headers = {"Authorization": static.get_secret_value()} if static is not None else {}
    return Readiness(
        pool,
        keys="configured" if settings.held.keys else "ephemeral",
        headers=headers,
        timeout_s=settings.upstream.init_timeout_s,
        answer_within_s=settings.front.ready_timeout_s,
        transport=pool.transport,
    )


async def _on_shutdown(app: web.Application) -> None:
    """SIGTERM (the listening socket is already closed): refuse new work, end listen streams,
    abandon waiting held calls, let attached requests finish until the grace minus its closing
    reserve, then cut off the rest with a shutting-down error (timeline: docs/operations.md §
    Shutdown)."""
    engine = app.get(RUNTIME_ENGINE_KEY)
    if engine is None:
        return
    grace_s = app[SETTINGS_KEY].front.shutdown_grace_s
    reserve_s = close_reserve_s(grace_s)
    deadline = asyncio.get_running_loop().time() + grace_s - reserve_s
    # then aiohttp (R/4) and held calls (R/4)
    await engine.drain(deadline, cut_wait_s=reserve_s / 2)


def make_app(
    settings: Settings,
    children: ChildProcesses | None = None,
    *,
    opener: SessionOpener | None = None,
) -> web.Application:
    """The whole HTTP bridge for `settings`; run it with `handler_cancellation=True`. Legacy stdio
    processes are recorded in `children`; `opener` replaces the configured upstream transport
    (tests script an in-memory upstream with it)."""
    modern = modern_upstream(settings) if opener is None else None
    app = _base_app(settings, settings.front.sse_keepalive_s, modern)
    if modern is not None:
        app.cleanup_ctx.append(_era_context)
    if children is not None:
        app[CHILDREN_KEY] = children
    if opener is not None:
        app[OPENER_KEY] = opener
    app.cleanup_ctx.append(_upstream_context)
    if settings.cluster.enabled:
        app.router.add_route("GET", REPLICA_PATH, replica_handler(settings.held.replica_id))
        app.cleanup_ctx.append(_cluster_context)
    app.on_shutdown.append(_on_shutdown)
    return app


__all__ = [
    "METRICS_KEY",
    "POOL_KEY",
    "READINESS_KEY",
    "SETTINGS_KEY",
    "ServedEngine",
    "make_app",
    "make_front_app",
]
