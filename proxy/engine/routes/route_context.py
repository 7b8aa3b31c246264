"""What every route shares: the settings, the pool, the held-call registry, leasing and headers;
the sessions' log levels (`LogLevels`) and the tool schemas the routes remember (`ToolSchemas`).

One `RouteContext` is built by the composition root and handed to every route. It holds state only
routes share; anything one route needs alone lives in that route's module.

**Log levels.** A modern request carries its log level in `_meta`; a legacy session has one level
for all its callers (`logging/setLevel`). The bridge makes the session at least as verbose as the
request asks, never quieter (other requests on the session may want more), and filters each
request's log notifications to its own level (translators/protocol/notifications.py).

**Tool schemas**, for `x-mcp-header` checks (2026-07-28/basic/transports/streamable-http.mdx) and
tool annotations for the recovery policy. Keyed like upstream sessions, by (principal, capability
fingerprint), because a legacy server's list may differ per session; bounded (least recently used
goes first) and forgotten for a principal when its upstream announces
`notifications/tools/list_changed`.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, Final

import structlog

from config.settings import Settings
from proxy.calls.attempt import Attempt, UpstreamRequest
from proxy.calls.call import Call
from proxy.calls.listen_hub import ListenHub
from proxy.calls.registry import Continuations, HeldCallRegistry
from proxy.calls.roots_affinity import RootsAffinity
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.owned_tasks import TaskOwner
from proxy.observe import tracing
from proxy.observe.access import current_trace
from proxy.upstream.base import UpstreamSession
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from translators.protocol.capabilities import capability_fingerprint
from translators.protocol.eras import (
    LOGGING_SET_LEVEL,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    MRTR_METHODS,
)
from translators.protocol.notifications import log_level_admits
from translators.protocol.requests import modern_params_to_legacy
from translators.protocol.results import CacheHints
from translators.wire import fast_json
from translators.wire.errors import BridgeError
from translators.wire.fast_json import as_object
from translators.wire.header_values import X_MCP_HEADER
from translators.wire.jsonrpc import JsonObject

BRIDGE_INFO: JsonObject = {"name": "mrtr-bridge", "version": version("mrtr-bridge")}
log = structlog.get_logger()
MAX_KEYS: Final = 1024
Ident = tuple[str, str, str]  # `SessionKey.ident`: hashed and compared in C, on every call


class ToolSchemas:
    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self._by_key: OrderedDict[Ident, dict[str, JsonObject]] = OrderedDict()
        self._annotations: dict[Ident, dict[str, JsonObject]] = {}
        self._with_headers: dict[Ident, frozenset[str]] = {}
        self._max_keys = max_keys

    def get(self, key: SessionKey) -> dict[str, JsonObject] | None:
        ident = key.ident
        schemas = self._by_key.get(ident)
        if schemas is not None:
            self._by_key.move_to_end(ident)
        return schemas

    def annotations(self, key: SessionKey) -> dict[str, JsonObject] | None:
        """name -> annotations (empty when the tool has none) of the remembered first page."""
        return self._annotations.get(key.ident) if self.get(key) is not None else None

    def mentions_headers(self, key: SessionKey, name: str) -> bool:
        """Whether tool `name`'s schema may hold `x-mcp-header` annotations (False: a call needs
        no header check; decided once per listing, not per call)."""
        return name in self._with_headers.get(key.ident, ())

    def remember(self, key: SessionKey, tools_result: JsonObject) -> dict[str, JsonObject]:
        """Record the tools of a first `tools/list` page; returns name -> inputSchema."""
        tools = tools_result.get("tools")
        named = [
            tool
            for tool in (tools if isinstance(tools, list) else [])
            if isinstance(tool, dict) and isinstance(tool.get("name"), str)
        ]
        schemas = {tool["name"]: as_object(tool.get("inputSchema")) for tool in named}
        ident = key.ident
        self._by_key[ident] = schemas
        self._annotations[ident] = {
            tool["name"]: as_object(tool.get("annotations")) for tool in named
        }
        marker = X_MCP_HEADER.encode()
        self._with_headers[ident] = frozenset(
            name for name, schema in schemas.items() if marker in fast_json.dumps(schema)
        )
        self._by_key.move_to_end(ident)
        while len(self._by_key) > self._max_keys:
            oldest = self._by_key.popitem(last=False)[0]
            self._annotations.pop(oldest, None)
            self._with_headers.pop(oldest, None)
        return schemas

    def forget_principal(self, principal: str) -> None:
        for ident in [ident for ident in self._by_key if ident[0] == principal]:
            del self._by_key[ident]
            self._annotations.pop(ident, None)
            self._with_headers.pop(ident, None)

    def __len__(self) -> int:
        return len(self._by_key)


class LogLevels:
    """The level each live session was last set to (weakly keyed: a closed session drops out)."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._levels: weakref.WeakKeyDictionary[UpstreamSession, str] = weakref.WeakKeyDictionary()

    async def raise_to(self, session: UpstreamSession, wanted: str | None) -> None:
        """Make `session` at least as verbose as `wanted`; a failure is logged, never raised."""
        if wanted is None:  # most requests: no need to look the session up at all
            return
        current = self._levels.get(session)
        if current is not None and log_level_admits(current, wanted):
            return
        if not isinstance(as_object(session.init_result.get("capabilities")).get("logging"), dict):
            return
        self._levels[session] = wanted
        try:
            async with asyncio.timeout(self._timeout_s):
                await session.start(
                    LOGGING_SET_LEVEL, {"level": wanted}, headers={}, on_inbound=None
                ).result()
        except (BridgeError, TimeoutError):
            log.warning("upstream_set_level_failed", level=wanted)


class RouteContext:
    """Shared state and the plumbing every route uses (leasing, headers, server info, attempts)."""

    def __init__(
        self,
        settings: Settings,
        pool: UpstreamPool,
        *,
        registry: HeldCallRegistry[Call],
        continuations: Continuations[Call],
        roots: RootsAffinity,
        listens: ListenHub,
    ) -> None:
        """Built by the composition root (`proxy/app/compose.py`), which owns the choice of every
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
        """The request's pool key and the legacy capabilities its session declares: the principal,
        the capability fingerprint and, where roots are involved, the roots the session holds
        (proxy/calls/roots_affinity.py)."""
        legacy = request.legacy_capabilities
        fingerprint = capability_fingerprint(legacy)
        affinity = ""
        if roots is not None or fresh or "roots" in legacy:
            fresh_id = next(self._fresh_sessions) if fresh else None
            affinity, roots = self.roots.affinity(
                request.principal, fingerprint, legacy, roots, fresh_id
            )
        return SessionKey(request.principal, fingerprint, affinity, roots), legacy

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
        prefer = None
        if not fresh and key.principal in self.listens.listening:
            prefer = self.listens.home(key.principal, key.fingerprint)
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
            next(self.registry.attempt_ids),
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


__all__ = ["BRIDGE_INFO", "LogLevels", "RouteContext", "ToolSchemas", "log_level"]
