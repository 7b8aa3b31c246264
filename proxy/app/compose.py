"""The composition root's runtime part: what both fronts build for an upstream, once, and hand to
what uses it (docs/architecture.md, "Wiring"); nothing sets a collaborator on an object after it
is built. The HTTP front's upstreams (`Upstream`) and the aiohttp app around them are
proxy/app/http_app.py; the stdio front's, proxy/app/cli.py.

- `bridge_runtime`: the runtime of one upstream for either front: the upstream HTTP client, the
  session opener of the configured transport, the pool and the engine (`build_engine`: the
  held-call registry, continuations, roots affinity, listen hub, the routes' context), opened
  together and closed in reverse.

The stdio front builds its legacy side itself (proxy/stdio_front/front.py), as it must start
before these modules are imported (docs/operations.md, "Start-up over stdio").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Final

import aiohttp
import structlog

from config.settings import Settings, UpstreamSettings
from proxy.auth.keys import load_keyring
from proxy.calls.call import Call
from proxy.calls.listen_hub import ListenHub
from proxy.calls.registry import Continuations, HeldCallRegistry
from proxy.calls.roots_affinity import RootsAffinity
from proxy.common.per_principal import PrincipalCounts, held_call_caps
from proxy.engine.engine import Engine
from proxy.engine.routes.route_context import RouteContext
from proxy.observe.request_families import UpstreamMetrics
from proxy.upstream.base import (
    STDIO,
    STREAMABLE_HTTP,
    InboundHandler,
    PooledSession,
    SessionOpener,
    TransportInfo,
)
from proxy.upstream.http.outbound import log_upstream_proxy, upstream_client
from proxy.upstream.negotiation import NegotiatingOpener
from proxy.upstream.pool import UpstreamPool
from proxy.upstream.session_limit import SessionLimit
from proxy.upstream.stdio.children import ChildProcesses
from proxy.upstream.stdio.spares import SpareProcesses
from proxy.upstream.transport import HttpTransport
from translators.held.push_ledger import BatchSizes
from translators.held.request_state import KeyRing
from translators.wire.errors import BridgeError, UpstreamUnavailable
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger("proxy.app.compose")
UPSTREAM_KEEPALIVE_S: Final = 4.0


def _client(settings: Settings) -> aiohttp.ClientSession:
    # The pool bounds sessions (each keeps a GET stream open), so the connector must not: its
    # default limit of 100 connections would stall the 101st stream. Idle upstream connections are
    # dropped before common server keep-alive timeouts (uvicorn and Node close after 5 s), so a
    # request never goes out on a connection the server is closing. Cookies are kept per upstream
    # session, not in one jar for every principal (proxy/upstream/http/cookies.py).
    log_upstream_proxy(settings.upstream)
    return upstream_client(
        settings.upstream,
        keepalive_s=UPSTREAM_KEEPALIVE_S,
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=settings.upstream.connect_timeout_s),
    )


def http_opener(client: aiohttp.ClientSession, settings: UpstreamSettings) -> HttpTransport:
    """The pool's way to open a legacy HTTP session at `settings.url`, over the transport that
    `upstream.transport` names or that detection finds (`proxy.upstream.transport`)."""
    return HttpTransport(client, settings)


def stdio_opener(spares: SpareProcesses) -> SessionOpener:
    """The pool's way to open a legacy session: a started process (a spare if one is ready),
    initialized with the request's capabilities."""

    async def open_session(
        capabilities: JsonObject, headers: Mapping[str, str], on_unrelated: InboundHandler
    ) -> PooledSession:
        session = await spares.take()
        try:
            await session.initialize(capabilities, on_unrelated=on_unrelated)
        # it died before answering (a spare may die while it waits): one more try
        except UpstreamUnavailable:
            session = await spares.take()
            await session.initialize(capabilities, on_unrelated=on_unrelated)
        return session

    return open_session


def _opener(
    client: aiohttp.ClientSession,
    upstream: UpstreamSettings,
    spares: SpareProcesses | None,
    scripted: SessionOpener | None,
) -> tuple[SessionOpener, TransportInfo]:
    # a test's in-memory upstream, with the sharing rules of the configured kind
    if scripted is not None:
        return scripted, STDIO if upstream.command else STREAMABLE_HTTP
    if spares is not None:
        return stdio_opener(spares), STDIO
    http = http_opener(client, upstream)
    return http, http


def _reporting(opener: SessionOpener, on_failure: Callable[[], None]) -> SessionOpener:
    async def open_session(
        capabilities: JsonObject, headers: Mapping[str, str], on_unrelated: InboundHandler
    ) -> PooledSession:
        try:
            return await opener(capabilities, headers, on_unrelated)
        except BridgeError:
            on_failure()
            raise

    return open_session


def shared_keyring(settings: Settings) -> KeyRing:
    """The bridge's one `requestState` key ring (`held.keys`, or an ephemeral key, said once)."""
    keyring, is_ephemeral = load_keyring(settings.held)
    if is_ephemeral:
        _log.warning(
            "request_state_key_ephemeral",
            hint="no held.keys configured: held calls will not survive a restart (see mrtr-bridge "
            "keygen)",
        )
    return keyring


def held_counts(settings: Settings) -> PrincipalCounts:
    """The one count of calls waiting for their client's input, both directions (`held.*`)."""
    return PrincipalCounts(held_call_caps(settings.held.max_per_principal, settings.held.max_total))


def build_engine(
    settings: Settings,
    pool: UpstreamPool,
    keyring: KeyRing,
    metrics: UpstreamMetrics | None,
    held: PrincipalCounts | None = None,
) -> Engine:
    """The engine and the call machinery it drives, each given its collaborators (`held`: the
    count shared with the reverse direction, if it runs)."""
    registry = HeldCallRegistry[Call](
        held if held is not None else held_counts(settings),
        batch_sizes=BatchSizes(settings.held.batch_sizes),
    )
    ctx = RouteContext(
        settings,
        pool,
        registry=registry,
        continuations=Continuations(keyring, settings.held, registry, settings.recovery),
        roots=RootsAffinity(settings.upstream, pool),
        listens=ListenHub(),
    )
    return Engine(ctx, keyring, metrics=metrics)


@asynccontextmanager
async def bridge_runtime(
    settings: Settings,
    metrics: UpstreamMetrics | None = None,
    children: ChildProcesses | None = None,
    *,
    opener: SessionOpener | None = None,
    on_open_failure: Callable[[], None] | None = None,
    spares: SpareProcesses | None = None,
    held: PrincipalCounts | None = None,
    scope: str | None = None,
    keyring: KeyRing | None = None,
) -> AsyncIterator[tuple[Engine, UpstreamPool]]:
    """Key ring, upstream client, pool and engine for either front; closed in reverse on exit.
    Legacy stdio processes are recorded in `children`; the pool's and the spares are stopped in
    parallel. `opener` replaces the configured transport (tests script an in-memory upstream with
    it); `on_open_failure` hears of every session that would not open (the era tracker re-probes).
    `spares` (the stdio front's, with its first process) start when their owner says (`release`);
    spares made here start at once. Either way they are closed here. `held`: the count of calls
    waiting for input the engine shares with the reverse direction. `scope`: the name of one
    upstream of several (`KeyRing.scoped`); `keyring`: the bridge's one key ring (loaded here if
    not given).
    """
    if keyring is None:
        keyring = shared_keyring(settings)
    if scope is not None:  # one upstream of several: its states open at no other
        keyring = keyring.scoped(scope)
    upstream = settings.upstream
    start_spares = spares is None
    if spares is None and upstream.command and opener is None:
        spares = SpareProcesses(upstream, children)
    async with _client(settings) as client:
        engine: Engine  # bound just below; the pool calls back only once started
        chosen, transport = _opener(client, upstream, spares, opener)
        if on_open_failure is not None:
            chosen = _reporting(chosen, on_open_failure)
        limit = SessionLimit.of(upstream)  # what the pool and the negotiation know of sessions
        negotiating = NegotiatingOpener(chosen, limit=limit)
        pool = UpstreamPool(
            upstream,
            negotiating,
            transport=transport,
            on_unowned=lambda session, inbound: engine.on_unowned(session, inbound),
            limit=limit,
        )
        engine = build_engine(settings, pool, keyring, metrics, held)
        try:
            await pool.start()
            if spares is not None and start_spares:
                spares.start()
            try:
                yield engine, pool
            finally:
                await engine.aclose()
        finally:
            await asyncio.gather(
                pool.aclose(),
                negotiating.aclose(),
                *([spares.aclose()] if spares is not None else []),
            )


__all__ = [
    "UPSTREAM_KEEPALIVE_S",
    "bridge_runtime",
    "build_engine",
    "held_counts",
    "http_opener",
    "shared_keyring",
    "stdio_opener",
]
