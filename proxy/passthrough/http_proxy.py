"""An HTTP reverse proxy to `upstream.url`, for what the bridge does not translate: legacy clients'
sessions (`proxy.passthrough.legacy_clients`) and modern requests to a modern upstream
(`proxy.passthrough.modern_upstream`).

Same method and body, the protocol headers (`Accept`, `Accept-Encoding`, `Content-Type`,
`Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID`, trace context, the credentials `serve`
would send), and the answer streamed back as it comes (with its `Content-Encoding`: content coding
is the client's and the upstream's to agree), chunk by chunk, whatever its type: an SSE stream or
a JSON body of any size passes through a bounded buffer, never read whole (issue 24, defect 6).
Three answers are the bridge's own, never the upstream's (docs/security.md, "OAuth through the
bridge", "Secrets"):

- the upstream cannot be reached, or answers with a redirect the bridge does not follow (to
  another origin: docs/security.md, "Upstream redirects"; one within its origin is followed, and
  no `Location` is ever relayed): HTTP 502, "The upstream server is unavailable" or the
  redirect's reason, with a correlation id and the request's own id; the address and cause go to
  the log under that id;
- a `401`, or a `403 insufficient_scope`, when the client's token is what the upstream judged: the
  same status with the challenge rewritten as on the modern path (`resource_metadata` is the
  bridge's metadata URL) and a JSON-RPC error body naming the status;
- any other `401` / `403`: the upstream's body and challenge are not relayed (a `403` keeps its
  status with a bridge-authored error; a refusal of the bridge's own static credential is a 502
  upstream fault).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

import aiohttp
import structlog
from aiohttp import hdrs, web
from yarl import URL

from config.settings import Settings
from proxy.auth.oauth_passthrough import passes_challenges, public_urls_of, upstream_challenge
from proxy.common.faults import Observe, reported_error
from proxy.common.shown import shown_uri
from proxy.upstream.errors import map_upstream_errors
from proxy.upstream.http.cookies import SessionCookies
from proxy.upstream.http.outbound import upstream_client
from translators.auth.oauth import challenge_reply
from translators.wire import fast_json
from translators.wire.errors import BRIDGE_MARKER, INVALID_REQUEST, BridgeError, UpstreamFault
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger("proxy.passthrough.http_proxy")
SESSION: Final = "Mcp-Session-Id"
VERSION: Final = "MCP-Protocol-Version"
_REQUEST_HEADERS: Final = (
    "Accept",
    "Accept-Encoding",
    "Content-Type",
    SESSION,
    VERSION,
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
    "Content-Encoding",
    SESSION,
    VERSION,
    "Cache-Control",
    "Allow",
)
CREDENTIALS_REFUSED: Final = "The upstream server refused the bridge's credentials"
RELAY_CHUNK_BYTES: Final = 65_536
# Decides the answer from the upstream's head: a response replaces the upstream's, None relays it.
Inspect = Callable[[aiohttp.ClientResponse], web.StreamResponse | None]


def error_reply(
    status: int, request_id: Any, error: JsonObject, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON-RPC error response echoing `request_id` (None for GET, DELETE and batches)."""
    message = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return web.Response(
        body=fast_json.dumps(message),
        status=status,
        content_type="application/json",
        headers=headers,
    )


class HttpRelay:
    """Relays client requests to `upstream.url` (body bytes, protocol headers) and streams the
    answers back; `aclose()` closes its upstream client. `on_failure` hears of a connection
    failure, `observe` of every error the relay answers itself."""

    def __init__(
        self,
        settings: Settings,
        on_failure: Callable[[], None] | None = None,
        observe: Observe | None = None,
    ) -> None:
        self._upstream = settings.upstream
        self._observe = observe
        self._url = settings.upstream.url or ""
        self._path = URL(self._url).path
        self._on_failure = on_failure
        self._client: aiohttp.ClientSession | None = None
        self._urls = public_urls_of(settings) if passes_challenges(settings.upstream) else None

    def error_of(
        self,
        status: int,
        exc: BridgeError,
        request_id: Any,
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        """`status` with `exc` as the client may see it (an upstream fault: its public message and
        a correlation id; the details are logged), counted."""
        if self._observe is not None:
            self._observe(exc)
        return error_reply(status, request_id, reported_error(exc), headers)

    def credentials(self, request: web.Request) -> dict[str, str]:
        """The `Authorization` the upstream gets for `request` (static, forwarded, or none)."""
        static = self._upstream.authorization
        if static is not None:
            return {"Authorization": static.get_secret_value()}
        if self._upstream.forward_authorization and "Authorization" in request.headers:
            return {"Authorization": request.headers["Authorization"]}
        return {}

    def add_cookies(self, headers: dict[str, str], cookies: SessionCookies) -> None:
        """Send a session's cookies with a request to the upstream URL."""
        cookies.add_to(headers, self._path)

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
        headers.update(self.credentials(request))
        return headers

    def _http(self) -> aiohttp.ClientSession:
        if self._client is None:
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=self._upstream.connect_timeout_s
            )
            # no jar shared by every client: a relayed session keeps its own (`SessionCookies`)
            self._client = upstream_client(
                self._upstream,
                timeout=timeout,
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._client

    async def forward(
        self,
        request: web.Request,
        body: bytes | None,
        request_id: Any = None,
        inspect: Inspect | None = None,
        cookies: SessionCookies | None = None,
    ) -> web.StreamResponse:
        """Send `request` (with its already-read `body`) upstream, with the `cookies` of its
        session, which keep what the answer sets; `inspect` sees the answer's head first and may
        answer instead."""
        headers = self._headers(request)
        if cookies is not None:
            self.add_cookies(headers, cookies)
        try:
            with map_upstream_errors(shown_uri(self._url), f"relayed {request.method}"):
                # a redirect is followed within the upstream's origin only (the client's rule,
                # `outbound.redirect_guard`): never relayed, so no Location reaches the client
                upstream = await self._http().request(
                    request.method,
                    self._url,
                    data=body,
                    headers=headers,
                    # the client's own Accept-Encoding, or none: the body is relayed as it comes
                    skip_auto_headers=("Accept-Encoding",),
                )
        except UpstreamFault as fault:
            if self._on_failure is not None:
                self._on_failure()
            return self.error_of(502, fault, request_id)
        async with upstream:
            if cookies is not None and hdrs.SET_COOKIE in upstream.headers:
                cookies.update(upstream)
            replaced = inspect(upstream) if inspect is not None else None
            if replaced is None:
                replaced = self._refusal(upstream, request_id)
            if replaced is not None:
                return replaced
            return await _stream_back(request, upstream)

    def _refusal(self, upstream: aiohttp.ClientResponse, request_id: Any) -> web.Response | None:
        """The bridge's own answer to an upstream 401 / 403, or None for any other status."""
        if upstream.status not in (401, 403):
            return None
        challenge = upstream_challenge(upstream, self._upstream)
        if challenge is not None and self._urls is not None:
            reply = challenge_reply(challenge, request_id, self._urls)
            headers = {"WWW-Authenticate": reply.www_authenticate}
            return error_reply(reply.status, request_id, reply["error"], headers)
        if upstream.status == 403 and self._urls is not None:
            message = "Forbidden: the upstream server refused the request (HTTP 403)"
            data = {"source": BRIDGE_MARKER, "httpStatus": 403}
            error = {"code": INVALID_REQUEST, "message": message, "data": data}
            return error_reply(403, request_id, error)
        fault = UpstreamFault(
            f"Upstream {shown_uri(self._url)} refused the bridge's credentials (HTTP"
            f" {upstream.status})",
            public=CREDENTIALS_REFUSED,
        )
        return self.error_of(502, fault, request_id)

    async def delete(self, session_id: str, headers: dict[str, str]) -> int | None:
        """DELETE a session upstream within `upstream.init_timeout_s`: its status, None on
        failure."""
        try:
            with map_upstream_errors(shown_uri(self._url), "relayed DELETE"):
                async with asyncio.timeout(self._upstream.init_timeout_s):
                    async with self._http().delete(
                        self._url, headers={**headers, SESSION: session_id}
                    ) as resp:
                        return resp.status
        except UpstreamFault as fault:
            _log.info("relay_session_delete_failed", error=fault.message)
            return None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


async def _stream_back(
    request: web.Request, upstream: aiohttp.ClientResponse
) -> web.StreamResponse:
    """The upstream's answer, chunk by chunk: memory stays bounded by the socket buffers."""
    headers = {
        name: upstream.headers[name] for name in _RESPONSE_HEADERS if name in upstream.headers
    }
    if upstream.headers.get("Content-Type", "").startswith("text/event-stream"):
        headers["X-Accel-Buffering"] = "no"
    response = web.StreamResponse(status=upstream.status, headers=headers)
    if upstream.content_length is not None and upstream.status not in (204, 304):
        response.content_length = upstream.content_length
    await response.prepare(request)
    try:
        async for chunk in upstream.content.iter_chunked(RELAY_CHUNK_BYTES):
            await response.write(chunk)
    except (aiohttp.ClientError, OSError):
        # a legacy client resumes an SSE stream with Last-Event-ID; a cut body is a cut body
        _log.info("relay_stream_ended", reason="upstream")
        return response
    await response.write_eof()
    return response


__all__ = [
    "CREDENTIALS_REFUSED",
    "RELAY_CHUNK_BYTES",
    "SESSION",
    "VERSION",
    "HttpRelay",
    "error_reply",
]
