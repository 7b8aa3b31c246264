"""Legacy clients through the modern endpoint: relayed to the upstream as legacy sessions.

The HTTP front hands a request here when its era is legacy (`translators.protocol.era_detection`:
`initialize` without modern `_meta`, an `Mcp-Session-Id`, a legacy `MCP-Protocol-Version`, a batch).
The relay is `proxy.passthrough.http_proxy`'s reverse proxy to `upstream.url`: same method and
body, the
protocol headers, and the answer streamed back as it comes. So everything a legacy session has
passes: `initialize` and the version answer, the session id, POST and GET streams, pushes and their
answers, notifications, `DELETE`, resumption with `Last-Event-ID`. Nothing is translated and
nothing is held. What the bridge answers itself (an unreachable upstream, an OAuth challenge
rewritten as on the modern path) is `HttpRelay`'s.

Each session id the upstream issues is bound to the principal whose `initialize` opened it, in a
per-principal table (`proxy.common.per_principal`): `upstream.max_sessions_per_principal` each
(one more evicts the principal's own least recently used, one with no request in flight first),
`front.max_legacy_sessions` in all (a new session takes the place of one idle for
`upstream.session_idle_s`, else of the opener's own; a principal holding none gets 503); evicted
sessions are DELETEd upstream with the credentials of their latest request. A request naming an
unknown session id, or one bound to another principal, gets 404 (as from a server that does not
know the session), so one caller can never use nor evict another's legacy session in use.
With `front.legacy_clients = "refuse"` the relay is not installed: the modern path answers a legacy
`initialize` with -32601 naming the modern versions, as a modern-only server does.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import structlog
from aiohttp import web

from config.settings import Settings
from proxy.common.clock import Clock
from proxy.common.faults import Observe
from proxy.common.per_principal import Caps, PrincipalTable
from proxy.passthrough.http_proxy import SESSION, VERSION, HttpRelay, error_reply
from proxy.upstream.http.cookies import SessionCookies
from translators.protocol.eras import INITIALIZE, MODERN_VERSION
from translators.wire.errors import INVALID_REQUEST, LimitExceeded

_log = structlog.get_logger("proxy.passthrough.legacy_clients")
NOT_FOUND: Final = -32001
TOTAL_LIMIT: Final = "front.max_legacy_sessions"
DELETE_GRACE_S: Final = 1.0  # at shutdown, evicted sessions' DELETEs still in flight get this long


@dataclass
class Relayed:
    """A relayed session: what its eviction's DELETE carries (the credentials, protocol version
    and cookies of its latest request) and the cookies the upstream set on its responses."""

    headers: dict[str, str]
    cookies: SessionCookies


class LegacyRelay:
    """Relays one legacy client request, enforcing the session bindings and caps; `aclose()` ends
    the DELETEs in flight and closes its client."""

    def __init__(
        self, settings: Settings, observe: Observe | None = None, clock: Clock = time.monotonic
    ) -> None:
        """`clock` times the sessions' idleness (proxy/common/clock.py)."""
        self._upstream = settings.upstream
        caps = Caps(
            settings.upstream.max_sessions_per_principal,
            settings.front.max_legacy_sessions,
            "upstream.max_sessions_per_principal",
            TOTAL_LIMIT,
            "legacy sessions",
        )
        self.sessions = PrincipalTable[Relayed](caps, settings.upstream.session_idle_s, clock)
        self._http = HttpRelay(settings, observe=observe)
        self._deletes: set[asyncio.Task[int | None]] = set()

    async def handle(
        self,
        request: web.Request,
        body: bytes | None,
        principal: str,
        method: str | None,
        request_id: Any = None,
    ) -> web.StreamResponse:
        """Relay `request` (its body already read, or None for GET/DELETE) to the upstream."""
        if self._upstream.url is None:
            message = (
                "Legacy clients over HTTP are relayed only to an HTTP upstream; this bridge fronts"
                f" a stdio server: connect with MCP {MODERN_VERSION}, or use mrtr-bridge stdio"
            )
            return error_reply(400, request_id, {"code": INVALID_REQUEST, "message": message})
        session_id = request.headers.get(SESSION)
        if session_id is None:  # an `initialize`: the session's cookies start with its answer
            cookies = SessionCookies()
            return await self._forward(request, body, principal, method, None, request_id, cookies)
        relayed = self.sessions.owned(session_id, principal)
        if relayed is None:
            return error_reply(404, request_id, {"code": NOT_FOUND, "message": "Session not found"})
        relayed.headers = self._delete_headers(request, relayed.cookies)
        self.sessions.begin(session_id)
        try:
            return await self._forward(
                request, body, principal, method, session_id, request_id, relayed.cookies
            )
        finally:
            self.sessions.end(session_id)

    def _delete_headers(self, request: web.Request, cookies: SessionCookies) -> dict[str, str]:
        """What an eviction's DELETE carries: the request's upstream credentials and version, and
        the session's cookies (a sticky load balancer routes it to the session's replica)."""
        headers = self._http.credentials(request)
        if VERSION in request.headers:
            headers[VERSION] = request.headers[VERSION]
        self._http.add_cookies(headers, cookies)
        return headers

    async def _forward(
        self,
        request: web.Request,
        body: bytes | None,
        principal: str,
        method: str | None,
        session_id: str | None,
        request_id: Any,
        cookies: SessionCookies,
    ) -> web.StreamResponse:
        def inspect(upstream: aiohttp.ClientResponse) -> web.StreamResponse | None:
            if session_id is not None and (
                upstream.status == 404 or (request.method == "DELETE" and upstream.status < 300)
            ):
                self.sessions.pop(session_id)
            issued = upstream.headers.get(SESSION)
            if method != INITIALIZE or not issued or upstream.status >= 300:
                return None
            headers = self._delete_headers(request, cookies)
            return self._bind(issued, principal, headers, request_id, cookies)

        return await self._http.forward(request, body, request_id, inspect, cookies)

    def _bind(
        self,
        issued: str,
        principal: str,
        headers: dict[str, str],
        request_id: Any,
        cookies: SessionCookies,
    ) -> web.Response | None:
        """Bind a new session (evicting as the caps say); a 503 when the bridge is full."""
        try:
            evicted = self.sessions.add(issued, principal, Relayed(headers, cookies))
        except LimitExceeded as refusal:
            self._delete_soon(issued, headers)
            return self._http.error_of(503, refusal, request_id, {"Retry-After": "5"})
        for session_id, relayed in evicted:
            self._delete_soon(session_id, relayed.headers)
        if evicted:
            _log.info("legacy_sessions_evicted", count=len(evicted), sessions=len(self.sessions))
        _log.info("legacy_session_relayed", sessions=len(self.sessions))
        return None

    def _delete_soon(self, session_id: str, headers: dict[str, str]) -> None:
        task = asyncio.get_running_loop().create_task(self._http.delete(session_id, headers))
        self._deletes.add(task)
        task.add_done_callback(self._deletes.discard)

    async def aclose(self) -> None:
        """Give the evictions' DELETEs in flight up to `DELETE_GRACE_S`, then close."""
        if self._deletes:
            _, late = await asyncio.wait(self._deletes, timeout=DELETE_GRACE_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self._http.aclose()


__all__ = ["NOT_FOUND", "TOTAL_LIMIT", "LegacyRelay", "Relayed"]
