"""What every route shares: the settings, the pool, the held-call registry, leasing and headers.

One `RouteContext` is built by the dispatcher (`proxy/engine/engine.py`) and handed to every route.
It holds state only routes share; anything one route needs alone lives in that route's module.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

from config.settings import Settings
from proxy.calls.attempt import Attempt, UpstreamRequest
from proxy.calls.call import Call
from proxy.calls.continuations import Continuations
from proxy.calls.listen_hub import ListenHub
from proxy.calls.registry import HeldCallRegistry
from proxy.calls.roots_affinity import RootsAffinity
from proxy.calls.tool_schemas import ToolSchemas
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.owned_tasks import TaskOwner
from proxy.engine.routes.log_levels import LogLevels
from proxy.observe import tracing
from proxy.observe.access import current_trace
from proxy.upstream.base import UpstreamSession
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from translators.protocol.eras import (
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    MRTR_METHODS,
)
from translators.protocol.requests import modern_params_to_legacy
from translators.protocol.results import CacheHints
from translators.wire.jsonrpc import JsonObject

BRIDGE_INFO: JsonObject = {"name": "mrtr-bridge", "version": version("mrtr-bridge")}


class RouteContext:
    """Shared state and the plumbing every route uses (leasing, headers, server info, attempts)."""

    def __init__(
        self,
        settings: Settings,
        pool: UpstreamPool,
        *,
        registry: HeldCallRegistry[Call],
        continuations: Continuations,
        roots: RootsAffinity,
        listens: ListenHub,
    ) -> None:
        """Built by the composition root (`proxy/app/runtime.py`), which owns the choice of every
        collaborator; what is only the routes' own bookkeeping is made here."""
        self.settings = settings
        self.pool = pool
        self.cache = CacheHints(settings.cache.ttl_ms, settings.cache.scope)
        self.registry = registry
        self.continuations = continuations
        self.tasks = TaskOwner()
        self.tool_schemas = ToolSchemas()
        self.listens = listens
        self.roots = roots
        self.log_levels = LogLevels(settings.upstream.init_timeout_s)
        self.ready = False  # set by the first lease: the upstream answered once
        self._progress_tokens = itertools.count(1)
        self._fresh_sessions = itertools.count(1)

    def session_key(
        self, request: FrontRequest, roots: JsonObject | None = None, fresh: bool = False
    ) -> tuple[SessionKey, JsonObject]:
        legacy = request.legacy_capabilities
        fresh_id = next(self._fresh_sessions) if fresh else None
        return self.roots.session_key(request.principal, legacy, roots, fresh_id)

    def headers(self, request: FrontRequest) -> dict[str, str]:
        """The HTTP headers an upstream request made for `request` carries (trace,
        authorization)."""
        headers = dict(request.trace_headers)
        upstream = self.settings.upstream
        if upstream.authorization is not None:
            headers["Authorization"] = upstream.authorization.get_secret_value()
        elif upstream.forward_authorization and request.authorization:
            headers["Authorization"] = request.authorization
        return headers

    async def lease(
        self,
        request: FrontRequest,
        *,
        exclusive: bool,
        roots: JsonObject | None = None,
        fresh: bool = False,
        label: str | None = None,
    ) -> Lease:
        """A session of the request's key; an interactive call prefers the session holding its
        principal's subscriptions (docs/architecture.md, "Routing rules"). `label`: see
        `UpstreamPool.lease`."""
        key, legacy_caps = self.session_key(request, roots, fresh)
        prefer = None if fresh else self.listens.home(key.principal, key.fingerprint)
        # a warm session, or a new one initialized upstream (or the wait for room in the pool)
        with tracing.child(current_trace(), "upstream session", {"exclusive": exclusive}):
            headers = tracing.upstream_headers(self.headers(request))
            lease = await self.pool.lease(
                key, legacy_caps, exclusive=exclusive, headers=headers, prefer=prefer, label=label
            )
        self.ready = True
        return lease

    @asynccontextmanager
    async def shared_lease(self, request: FrontRequest) -> AsyncIterator[Lease]:
        """A shared lease on a session of the request's key, released when the block ends."""
        lease = await self.lease(request, exclusive=False)
        try:
            yield lease
        finally:
            await lease.release()

    def server_info(self, session: UpstreamSession) -> JsonObject | None:
        if self.settings.server_identity == "bridge":
            return BRIDGE_INFO
        info = session.init_result.get("serverInfo")
        return info if isinstance(info, dict) else BRIDGE_INFO

    def upstream_request(self, request: FrontRequest, session: UpstreamSession) -> UpstreamRequest:
        token = f"mrtr-{next(self._progress_tokens)}"
        # An interactive call always gets an upstream token: a later round may ask for progress.
        wants = request.method in MRTR_METHODS or progress_meta_token(request.params) is not None
        params = modern_params_to_legacy(
            request.params,
            upstream_progress_token=token if wants else None,
            method=request.method,
            revision=session.revision,
        )
        return UpstreamRequest(request.method, params, self.headers(request), token)

    def attempt(self, request: FrontRequest, sink: NotificationSink) -> Attempt:
        return Attempt(
            self.registry.next_attempt_id(),
            sink,
            progress_meta_token(request.params),
            log_level(request),
        )


def log_level(request: FrontRequest) -> str | None:
    level = request.meta.get(META_LOG_LEVEL)
    return level if isinstance(level, str) else None


def progress_meta_token(params: Any) -> str | int | None:
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get(META_PROGRESS_TOKEN) if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


__all__ = ["BRIDGE_INFO", "RouteContext", "log_level"]
