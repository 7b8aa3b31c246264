"""The HTTP bridge, built here: the upstreams it serves (proxy/app/upstreams.py), each at its
endpoint (a path naming no upstream answers 404), and around them `/healthz`, `/readyz`,
`/metrics`, the status page, the replicas' route, typed app keys and the lifetimes they hold
(docs/decisions.md §§ 1, 6).

`make_app(settings)` is the whole HTTP bridge: one `cleanup_ctx` runs each upstream
(`Upstream.running()`: its era, upstream client, pool and engine), another the replica hop when a
cluster is configured. `make_front_app(settings, engine)` mounts the same front and health routes
around a given engine, for tests and embedding.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final

import aiohttp
import structlog
from aiohttp import web

from config.settings import SERVERS_PATH, Settings, server_path
from proxy.app.compose import UPSTREAM_KEEPALIVE_S, held_counts, shared_keyring
from proxy.app.health import bridge_readiness
from proxy.app.status import StatusPage, StatusSources
from proxy.app.upstreams import ServedEngine, Upstream
from proxy.auth.oauth_passthrough import MetadataRelay, passes_challenges
from proxy.cluster.forward import Forwarder
from proxy.cluster.peers import REPLICA_PATH, PeerDirectory, replica_handler
from proxy.common.http_replies import Exchange, json_reply
from proxy.common.log_context import log_context_around
from proxy.common.shown import bounded
from proxy.engine.engine import close_reserve_s
from proxy.http_front import HOP_KEY
from proxy.observe.access import MAX_NAME as MAX_SHOWN_NAME
from proxy.observe.logs import scrub_aiohttp_server_logs
from proxy.observe.metrics import BridgeMetrics
from proxy.upstream.base import SessionOpener
from proxy.upstream.http.metadata import MetadataFetcher
from proxy.upstream.stdio.children import ChildProcesses
from translators.held.request_state import KeyRing
from translators.wire.errors import InvalidRequest
from translators.wire.jsonrpc import to_error_response

_log = structlog.get_logger("proxy.app.http_app")


async def _no_such_upstream(request: web.Request) -> web.Response:
    """A path under `/servers/` that no upstream serves, or the single-upstream endpoint path of a
    bridge with named upstreams: 404, saying where each one is (their names are in their paths:
    nothing secret)."""
    served = sorted(unit.scope for unit in request.app[UPSTREAMS_KEY] if unit.scope is not None)
    name = request.match_info.get("name")
    if name in served:
        message = f"Not Found: upstream {name!r} is served at {server_path(name)}"
    elif name is not None:
        shown = bounded(name, MAX_SHOWN_NAME)
        message = (
            f"Not Found: no upstream named {shown!r} here (this bridge serves: {', '.join(served)})"
        )
    else:
        message = (
            f"Not Found: this bridge serves several upstreams, each at {server_path('NAME')}: "
            + ", ".join(served)
        )
    return json_reply(to_error_response(InvalidRequest(message), None), 404, Exchange())


SETTINGS_KEY: Final = web.AppKey("settings", Settings)
METRICS_KEY: Final = web.AppKey("metrics", BridgeMetrics)
# the upstreams this bridge serves, built by the composition root
UPSTREAMS_KEY: Final = web.AppKey("upstreams", list[Upstream])
PEERS_KEY: Final = web.AppKey("cluster_peers", PeerDirectory)
# the bridge's one requestState key ring, loaded at start-up (every upstream's, and the hop's)
KEYRING_KEY: Final = web.AppKey("keyring", KeyRing)
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
METRICS_PATH: Final = "/metrics"


async def _healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    """Which upstreams answer, and whether that is enough (`front.ready_requires`):
    `proxy.app.health`."""
    settings, upstreams = request.app[SETTINGS_KEY], request.app[UPSTREAMS_KEY]
    body, status = await bridge_readiness(
        upstreams,
        requires=settings.front.ready_requires,
        keys="configured" if settings.held.keys else "ephemeral",
    )
    return web.json_response(body, status=status)


async def _metrics(request: web.Request) -> web.Response:
    """`BridgeMetrics` as Prometheus text, or OpenMetrics if `Accept` asks (docs/operations.md)."""
    body, content_type = request.app[METRICS_KEY].exposition(request.headers.get("Accept", ""))
    return web.Response(body=body, headers={"Content-Type": content_type})


def _header_limits(settings: Settings) -> dict[str, int]:
    """aiohttp's request-head limits (its parser answers 400 beyond them)."""
    front = settings.front
    return {
        "max_line_size": front.max_header_line_bytes,
        "max_field_size": front.max_header_field_bytes,
        "max_headers": front.max_headers,
    }


def _base_app(settings: Settings, metrics: BridgeMetrics) -> web.Application:
    """The routes every bridge has: health, readiness, metrics and the status page."""
    scrub_aiohttp_server_logs()
    app = web.Application(handler_args=_header_limits(settings))
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = metrics
    app.on_response_prepare.append(metrics.http.on_response_prepare)
    app.router.add_get(HEALTH_PATH, _healthz)
    app.router.add_get(READY_PATH, _readyz)
    app.router.add_get(METRICS_PATH, _metrics)
    StatusPage(settings, _status_sources).add_routes(app)
    return app


def _status_sources(app: web.Application) -> StatusSources:
    """What `/status` reads: the upstreams served and the peer set (proxy/app/status.py)."""
    upstreams: list[Upstream] = app.get(UPSTREAMS_KEY, [])
    return StatusSources(upstreams, app.get(PEERS_KEY))


def make_front_app(
    settings: Settings, engine: ServedEngine, *, keepalive_s: float | None = None
) -> web.Application:
    """The front and health routes around an existing engine (no upstream lifetimes)."""
    return _app(settings, keepalive_s=keepalive_s, engine=engine)


async def _cluster_context(app: web.Application) -> AsyncIterator[None]:
    """The peer set and the forwarding hop, when `cluster.peers` or `cluster.peers_dns` is set."""
    settings = app[SETTINGS_KEY]
    connector = aiohttp.TCPConnector(
        limit=settings.cluster.max_forwards + 16, keepalive_timeout=UPSTREAM_KEEPALIVE_S
    )
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as client:
        directory = PeerDirectory(settings.cluster, settings.held.replica_id, client)
        app[HOP_KEY] = Forwarder(settings, app[KEYRING_KEY], directory, client, app[METRICS_KEY])
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


async def _upstreams_context(app: web.Application) -> AsyncIterator[None]:
    """Each upstream's lifetime (its era, then its runtime), closed in reverse; its log lines, and
    those of the tasks it starts, name it."""
    keyring = app[KEYRING_KEY] = shared_keyring(app[SETTINGS_KEY])
    async with contextlib.AsyncExitStack() as stack:
        for upstream in app[UPSTREAMS_KEY]:
            await stack.enter_async_context(
                log_context_around(upstream.running(keyring), upstream=upstream.name)
            )
        yield


async def _on_shutdown(app: web.Application) -> None:
    """SIGTERM (the listening socket is already closed): refuse new work, end listen streams,
    abandon waiting held calls, let attached requests finish until the grace minus its closing
    reserve, then cut off the rest with a shutting-down error (timeline: docs/operations.md §
    Shutdown)."""
    engines = [unit.runtime for unit in app[UPSTREAMS_KEY] if unit.runtime is not None]
    if not engines:
        return
    grace_s = app[SETTINGS_KEY].front.shutdown_grace_s
    reserve_s = close_reserve_s(grace_s)
    deadline = asyncio.get_running_loop().time() + grace_s - reserve_s
    # then aiohttp (R/4) and held calls (R/4)
    await asyncio.gather(*(engine.drain(deadline, cut_wait_s=reserve_s / 2) for engine in engines))


def make_app(
    settings: Settings,
    children: ChildProcesses | None = None,
    *,
    opener: SessionOpener | None = None,
) -> web.Application:
    """The whole HTTP bridge for `settings`; run it with `handler_cancellation=True`. Legacy stdio
    processes are recorded in `children`; `opener` replaces the configured upstream transport
    (tests script an in-memory upstream with it)."""
    app = _app(settings, children=children, opener=opener)
    if settings.cluster.enabled:
        app.router.add_route("GET", REPLICA_PATH, replica_handler(settings.held.replica_id))
        app.cleanup_ctx.append(_cluster_context)
    return app


def _app(
    settings: Settings,
    *,
    children: ChildProcesses | None = None,
    opener: SessionOpener | None = None,
    engine: ServedEngine | None = None,
    keepalive_s: float | None = None,
) -> web.Application:
    metrics = BridgeMetrics()
    app = _base_app(settings, metrics)
    held = held_counts(settings)
    keepalive_s = settings.front.sse_keepalive_s if keepalive_s is None else keepalive_s
    upstreams = [
        Upstream(
            own,
            name=name,
            metrics=metrics,
            held=held,
            children=children,
            opener=opener,
            engine=engine,
        )
        for name, own in settings.units()
    ]
    app[UPSTREAMS_KEY] = upstreams
    for upstream in upstreams:
        upstream.front(keepalive_s).add_routes(app)
        if passes_challenges(upstream.settings.upstream):
            MetadataRelay(
                upstream.settings, MetadataFetcher(upstream.settings.upstream)
            ).add_routes(app)
    if settings.upstreams:
        app.router.add_route("*", SERVERS_PATH + "/{name}/{tail:.*}", _no_such_upstream)
        if all(unit.path != settings.front.path for unit in upstreams):
            app.router.add_route("*", settings.front.path, _no_such_upstream)
    app.cleanup_ctx.append(_upstreams_context)
    app.on_shutdown.append(_on_shutdown)
    return app


__all__ = [
    "METRICS_KEY",
    "SETTINGS_KEY",
    "UPSTREAMS_KEY",
    "ServedEngine",
    "Upstream",
    "make_app",
    "make_front_app",
]
