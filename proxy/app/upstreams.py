"""The upstreams the HTTP front serves (docs/architecture.md, "Wiring"; docs/several-servers.md).

`Upstream` is the unit the composition root builds once per upstream: its era tracker and the
relay of modern requests to a modern upstream, the relay of legacy clients, the reverse direction,
the HTTP front of its endpoint, and, opened by `Upstream.running()`, its runtime
(proxy/app/compose.py: upstream client, pool, engine). A bridge serves one unnamed upstream at
`front.path`, or several named ones, each at `/servers/NAME/mcp` (`Settings.units`). What they share
is handed to each: the count of calls waiting for input, the key ring, the metrics.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from config.settings import Settings
from proxy.app.compose import bridge_runtime
from proxy.app.health import Readiness, upstream_up
from proxy.common.per_principal import PrincipalCounts
from proxy.common.shown import shown_uri
from proxy.engine.engine import Engine
from proxy.http_front import FrontEngine, HttpFront
from proxy.observe.access import upstream_name
from proxy.observe.metrics import BridgeMetrics
from proxy.passthrough.legacy_clients import LegacyRelay
from proxy.passthrough.modern_upstream import modern_upstream
from proxy.reverse.front import ReverseFront
from proxy.upstream.base import SessionOpener
from proxy.upstream.http.wire import client_info
from proxy.upstream.pool import UpstreamPool
from proxy.upstream.reachability import StartupWatch
from proxy.upstream.stdio.children import ChildProcesses
from translators.held.request_state import KeyRing


class ServedEngine(FrontEngine, Protocol):
    """An engine the HTTP front serves: requests and readiness (`proxy.engine.engine.Engine`, or
    a scripted one in tests)."""

    def is_ready(self) -> bool: ...


class Upstream:
    """One upstream the HTTP front serves at `path`: its own era tracker, relays, reverse
    direction and, once `running()`, pool and engine. What the upstreams of a bridge share is
    handed to each: `held` counts the calls waiting for their client's input (both directions),
    `metrics` are the bridge's, and at start-up the key ring that seals and opens their states."""

    def __init__(
        self,
        settings: Settings,
        *,
        name: str | None = None,
        metrics: BridgeMetrics,
        held: PrincipalCounts,
        children: ChildProcesses | None = None,
        opener: SessionOpener | None = None,
        engine: ServedEngine | None = None,
    ) -> None:
        """`settings` are the bridge's with this upstream's `[upstream]` and its `front.path`
        (`Settings.units`); `name`: a named upstream of several (its states open under its name
        only), None for the bridge's only one; `opener` replaces the configured transport (tests
        script an in-memory upstream with it); `engine`, one built elsewhere (tests, embedding):
        then no runtime is opened here."""
        self.settings = settings
        self.scope = name
        self.path = settings.front.path
        self.name = name if name is not None else upstream_name(settings.upstream)
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
            path=self.path,
            scope=self.scope,
        )

    @asynccontextmanager
    async def running(self, keyring: KeyRing) -> AsyncIterator[None]:
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
                    scope=self.scope,
                    keyring=keyring,
                )
            )
            self.engine, self.pool = self.runtime, pool
            self.readiness = _readiness(self.settings, pool)
            self.metrics.watch_up(upstream_up(self.readiness, modern.era if modern else None))
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


__all__ = ["ServedEngine", "Upstream"]
