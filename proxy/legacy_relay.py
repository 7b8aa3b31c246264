"""Legacy clients through the modern endpoint: relayed to the upstream as legacy sessions.

The HTTP front hands a request here when its era is legacy (`translators.era_detection`:
`initialize` without modern `_meta`, an `Mcp-Session-Id`, a legacy `MCP-Protocol-Version`, a batch).
The relay is an HTTP reverse proxy to `upstream.url`: same method and body, the protocol headers
(`Accept`, `Content-Type`, `Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID`, the
credentials `serve` would send), and the answer streamed back as it comes, status and body
unchanged. So everything a legacy session has passes: `initialize` and the version answer, the
session id, POST and GET streams, pushes and their answers, notifications, `DELETE`, resumption with
`Last-Event-ID`. Nothing is translated and nothing is held.

Each session id the upstream issues is bound to the principal whose `initialize` opened it; a
request naming an unknown session id, or one bound to another principal, gets 404 (as from a
server that does not know the session), so one caller can never use another's legacy session.
With `front.legacy_clients = "refuse"` the relay is not installed: the modern path answers a legacy
`initialize` with -32601 naming the modern versions, as a modern-only server does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final

import aiohttp
import structlog
from aiohttp import web

from config.settings import Settings
from proxy.upstream.errors import safe_url
from translators.eras import INITIALIZE, MODERN_VERSION
from translators.errors import INVALID_REQUEST

_log = structlog.get_logger("proxy.legacy_relay")
SESSION: Final = "Mcp-Session-Id"
_REQUEST_HEADERS: Final = (
    "Accept",
    "Content-Type",
    SESSION,
    "MCP-Protocol-Version",
    "Last-Event-ID",
    "Mcp-Method",
    "Mcp-Name",
    "traceparent",
    "tracestate",
    "baggage",
)
_PARAM_PREFIX: Final = "mcp-param-"
_RESPONSE_HEADERS: Final = (
    "Content-Type",
    SESSION,
    "MCP-Protocol-Version",
    "Cache-Control",
    "WWW-Authenticate",
    "Allow",
)
NOT_FOUND: Final = -32001


def _error(status: int, code: int, message: str) -> web.Response:
    return web.json_response(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, status=status
    )


class SessionBindings:
    """Legacy session id -> the principal that opened it (bounded: the oldest binding goes
    first)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._owners: OrderedDict[str, str] = OrderedDict()

    def bind(self, session_id: str, principal: str) -> None:
        self._owners[session_id] = principal
        self._owners.move_to_end(session_id)
        while len(self._owners) > self._limit:
            self._owners.popitem(last=False)

    def owned_by(self, session_id: str, principal: str) -> bool:
        return self._owners.get(session_id) == principal

    def forget(self, session_id: str) -> None:
        self._owners.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._owners)


class HttpRelay:
    """Relays client requests to `upstream.url` unchanged (body bytes, protocol headers) and streams
    the answers back; `aclose()` closes its upstream client. `on_failure` hears of a connection
    failure."""

    def __init__(self, settings: Settings, on_failure: Callable[[], None] | None = None) -> None:
        self._upstream = settings.upstream
        self._on_failure = on_failure
        self._client: aiohttp.ClientSession | None = None

    def _headers(self, request: web.Request) -> dict[str, str]:
        headers = {
            name: request.headers[name] for name in _REQUEST_HEADERS if name in request.headers
        }
        headers.update(
            {
                name: value
                for name, value in request.headers.items()
                if name.lower().startswith(_PARAM_PREFIX)
            }
        )
        static = self._upstream.authorization
        if static is not None:
            headers["Authorization"] = static.get_secret_value()
        elif self._upstream.forward_authorization and "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        return headers

    def _http(self) -> aiohttp.ClientSession:
        if self._client is None:
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=self._upstream.connect_timeout_s
            )
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), timeout=timeout, auto_decompress=False
            )
        return self._client

    async def forward(
        self,
        request: web.Request,
        body: bytes | None,
        learn: Callable[[aiohttp.ClientResponse], None] | None = None,
    ) -> web.StreamResponse:
        """Send `request` (with its already-read `body`) upstream; `learn` sees the answer's head
        first."""
        url = self._upstream.url
        assert url is not None
        try:
            upstream = await self._http().request(
                request.method,
                url,
                data=body,
                headers=self._headers(request),
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError) as exc:
            _log.warning(
                "relay_upstream_unreachable", upstream=safe_url(url), error=type(exc).__name__
            )
            if self._on_failure is not None:
                self._on_failure()
            return _error(502, -32603, f"Upstream {safe_url(url)} cannot be reached")
        async with upstream:
            if learn is not None:
                learn(upstream)
            return await _stream_back(request, upstream)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


async def _stream_back(
    request: web.Request, upstream: aiohttp.ClientResponse
) -> web.StreamResponse:
    headers = {
        name: upstream.headers[name] for name in _RESPONSE_HEADERS if name in upstream.headers
    }
    if not upstream.headers.get("Content-Type", "").startswith("text/event-stream"):
        return web.Response(status=upstream.status, body=await upstream.read(), headers=headers)
    response = web.StreamResponse(
        status=upstream.status, headers={**headers, "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    try:
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
    except (aiohttp.ClientError, OSError):
        # a legacy client resumes with Last-Event-ID
        _log.info("relay_stream_ended", reason="upstream")
        return response
    await response.write_eof()
    return response


class LegacyRelay:
    """Relays one legacy client request, enforcing the session bindings; `aclose()` closes its
    client."""

    def __init__(self, settings: Settings, on_failure: Callable[[], None] | None = None) -> None:
        self._upstream = settings.upstream
        self.bindings = SessionBindings(settings.front.max_legacy_sessions)
        self._http = HttpRelay(settings, on_failure)

    async def handle(
        self, request: web.Request, body: bytes | None, principal: str, method: str | None
    ) -> web.StreamResponse:
        """Relay `request` (its body already read, or None for GET/DELETE) to the upstream."""
        if self._upstream.url is None:
            return _error(
                400,
                INVALID_REQUEST,
                "Legacy clients over HTTP are relayed only to an HTTP upstream; this"
                f" bridge fronts a stdio server: connect with MCP {MODERN_VERSION}, or use "
                "mrtr-bridge stdio",
            )
        session_id = request.headers.get(SESSION)
        if session_id is not None and not self.bindings.owned_by(session_id, principal):
            return _error(404, NOT_FOUND, "Session not found")
        return await self._forward(request, body, principal, method, session_id)

    async def _forward(
        self,
        request: web.Request,
        body: bytes | None,
        principal: str,
        method: str | None,
        session_id: str | None,
    ) -> web.StreamResponse:
        def learn(upstream: aiohttp.ClientResponse) -> None:
            self._learn(upstream, principal, method, session_id, request.method)

        return await self._http.forward(request, body, learn)

    def _learn(
        self,
        upstream: aiohttp.ClientResponse,
        principal: str,
        method: str | None,
        session_id: str | None,
        http_method: str,
    ) -> None:
        issued = upstream.headers.get(SESSION)
        if method == INITIALIZE and issued and upstream.status < 300:
            self.bindings.bind(issued, principal)
            _log.info("legacy_session_relayed", sessions=len(self.bindings))
        if session_id is not None and (
            upstream.status == 404 or (http_method == "DELETE" and upstream.status < 300)
        ):
            self.bindings.forget(session_id)

    async def aclose(self) -> None:
        await self._http.aclose()


__all__ = ["HttpRelay", "LegacyRelay", "SessionBindings"]
