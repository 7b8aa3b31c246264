"""The HTTP bridge, built here: each upstream it serves (`Upstream`: its era tracker and the relay
of modern requests to a modern upstream, the relay of legacy clients, the reverse direction, and,
opened by `Upstream.running()`, its runtime from proxy/app/compose.py) with its MCP endpoint, and
around them `/healthz`, `/readyz`, `/metrics`, the status page, the replicas' route, typed app keys
and the lifetimes they hold (docs/decisions.md §§ 1, 6).

`make_app(settings)` is the whole HTTP bridge: one `cleanup_ctx` runs each upstream
(`Upstream.running()`: its era, upstream client, pool and engine), another the replica hop when a
cluster is configured. `make_front_app(settings, engine)` mounts the same front and health routes
around a given engine, for tests and embedding.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, Protocol

import aiohttp
import structlog
from aiohttp import web

from config.settings import Settings
from proxy.app.compose import UPSTREAM_KEEPALIVE_S, bridge_runtime, held_counts
from proxy.app.health import Readiness, bridge_readiness
from proxy.app.status import StatusPage, StatusSources
from proxy.auth.keys import load_keyring
from proxy.auth.oauth_passthrough import MetadataRelay, passes_challenges
from proxy.cluster.forward import Forwarder
from proxy.cluster.peers import REPLICA_PATH, PeerDirectory, replica_handler
from proxy.common.log_context import log_context_around
from proxy.common.per_principal import PrincipalCounts
from proxy.common.shown import shown_uri
from proxy.engine.engine import Engine, close_reserve_s
from proxy.http_front import HOP_KEY, FrontEngine, HttpFront
from proxy.observe.access import upstream_name
from proxy.observe.logs import scrub_aiohttp_server_logs
from proxy.observe.metrics import BridgeMetrics
from proxy.passthrough.legacy_clients import LegacyRelay
from proxy.passthrough.modern_upstream import modern_upstream
from proxy.reverse.front import ReverseFront
from proxy.upstream.base import SessionOpener
from proxy.upstream.http.metadata import MetadataFetcher
from proxy.upstream.http.wire import client_info
from proxy.upstream.pool import UpstreamPool
from proxy.upstream.reachability import StartupWatch
from proxy.upstream.stdio.children import ChildProcesses

_log = structlog.get_logger("proxy.app.http_app")


class ServedEngine(FrontEngine, Protocol):
    """An engine the HTTP front serves: requests and readiness (`proxy.engine.engine.Engine`, or
    a scripted one in tests)."""

    def is_ready(self) -> bool: ...


class Upstream:
    """One upstream the HTTP front serves at `path`: its own era tracker, relays, reverse
    direction and, once `running()`, pool and engine. `shared_held` counts the calls waiting for
    their client's input, both directions, across the bridge; `metrics` is the bridge's."""

    def __init__(
        self,
        settings: Settings,
        *,
        metrics: BridgeMetrics,
        held: PrincipalCounts,
        children: ChildProcesses | None = None,
        opener: SessionOpener | None = None,
        engine: ServedEngine | None = None,
    ) -> None:
        """`settings` are the bridge's with this upstream's `[upstream]`; `opener` replaces the
        configured transport (tests script an in-memory upstream with it); `engine`, one built
        elsewhere (tests, embedding): then no runtime is opened here."""
        self.settings = settings
        self.path = settings.front.path
        self.name = upstream_name(settings.upstream)
        self.metrics = metrics.upstream(self.name, self.path)  # what its requests feed
        self._held = held
        self._children = children
        self._opener = opener
        self._given = engine
        self.modern = modern_upstream(settings) if opener is None and engine is None else None
        self.relay = (
            LegacyRelay(settings, observe=self.metrics.observe_error)
            if settings.front.legacy_clients == "pass"
            else None
        )
        self.reverse = (
            ReverseFront(
                settings,
                self.modern.reverse_caller(),
                client_info(),
                held,
                self.metrics.observe_error,
            )
            if self.modern is not None
            else None
        )
        # what the front serves: the given engine, or the runtime's once `running()` opened it
        self.engine: ServedEngine | None = engine
        self.runtime: Engine | None = None
        self.pool: UpstreamPool | None = None
        self.readiness: Readiness | None = None

    def front(self, keepalive_s: float) -> HttpFront:
        """The HTTP front of this upstream's endpoint."""
        settings = self.settings
        return HttpFront(
            settings.front,
            settings.identity,
            self,
            keepalive_s=keepalive_s,
            legacy=self.relay,
            modern=self.modern,
            access_log=settings.log.access,
            upstream=self.name,
            reverse=self.reverse,
            cluster=settings.cluster.enabled,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The era (probed before the first request, kept current), then the runtime; all of it
        closed in reverse on exit."""
        async with contextlib.AsyncExitStack() as stack:
            if self.relay is not None:
                stack.push_async_callback(self.relay.aclose)
            modern = self.modern
            if modern is not None:
                stack.push_async_callback(modern.aclose)
                await modern.era.start()
                url = self.settings.upstream.url
                watch = StartupWatch(modern.era, shown_uri(url) if url else "")
                watch.start()
                stack.push_async_callback(watch.aclose)
            if self.reverse is not None:
                stack.push_async_callback(self.reverse.aclose)
            if self._given is not None:
                yield
                return
            self.runtime, pool = await stack.enter_async_context(
                bridge_runtime(
                    self.settings,
                    self.metrics,
                    self._children,
                    opener=self._opener,
                    on_open_failure=modern.era.reprobe_soon if modern else None,
                    held=self._held,
                )
            )
            self.engine, self.pool = self.runtime, pool
            self.readiness = _readiness(self.settings, pool)
            yield


def _readiness(settings: Settings, pool: UpstreamPool) -> Readiness:
    static = settings.upstream.authorization
    headers = {"Authorization": static.get_secret_value()} if static is not None else {}
    return Readiness(
        pool,
        headers=headers,
        timeout_s=settings.upstream.init_timeout_s,
        answer_within_s=settings.front.ready_timeout_s,
        transport=pool.transport,
    )


SETTINGS_KEY: Final = web.AppKey("settings", Settings)
METRICS_KEY: Final = web.AppKey("metrics", BridgeMetrics)
# the upstreams this bridge serves, built by the composition root
UPSTREAMS_KEY: Final = web.AppKey("upstreams", list[Upstream])
PEERS_KEY: Final = web.AppKey("cluster_peers", PeerDirectory)
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


async def _upstreams_context(app: web.Application) -> AsyncIterator[None]:
    """Each upstream's lifetime (its era, then its runtime), closed in reverse; its log lines, and
    those of the tasks it starts, name it."""
    async with contextlib.AsyncExitStack() as stack:
        for upstream in app[UPSTREAMS_KEY]:
            await stack.enter_async_context(
                log_context_around(upstream.running(), upstream=upstream.name)
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
    upstream = Upstream(
        settings, metrics=metrics, held=held, children=children, opener=opener, engine=engine
    )
    app[UPSTREAMS_KEY] = [upstream]
    upstream.front(
        settings.front.sse_keepalive_s if keepalive_s is None else keepalive_s
    ).add_routes(app)
    if passes_challenges(settings.upstream):
        MetadataRelay(settings, MetadataFetcher(settings.upstream)).add_routes(app)
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
