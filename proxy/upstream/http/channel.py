"""The HTTP side of one legacy session: where to send, with which headers, bounded how; plus the
task set a session owns (docs/decisions.md § 6: no fire-and-forget)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Mapping
from types import TracebackType
from typing import Final

import aiohttp
import structlog
from aiohttp import hdrs
from yarl import URL

from config.settings import UpstreamSettings
from proxy.auth.oauth_passthrough import passes_challenges, upstream_challenge
from proxy.common.shown import bounded, shown_uri
from proxy.upstream.errors import UpstreamRefused, map_upstream_errors, upstream_fault
from proxy.upstream.http.cookies import SessionCookies
from proxy.upstream.http.outbound import KEEPING_STATUSES, origin_of
from proxy.upstream.http.wire import JSON_TYPE, POST_ACCEPT, SESSION_HEADER, build_headers, is_json
from translators.wire import fast_json
from translators.wire.errors import UpstreamProtocolError, UpstreamUnavailable
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)

# how long an SSE answer's stream may stay open after its response before its connection is
# closed rather than reused (`Exchange.let_go`)
LET_GO_TIMEOUT_S: Final = 1.0


class SessionExpired(Exception):
    """404 on a request that carried the session id of `generation` (2025-11-25/basic/transports.mdx
    § Session Management)."""

    def __init__(self, generation: int) -> None:
        super().__init__("upstream session expired")
        self.generation = generation


class HttpChannel:
    """Sends HTTP requests for one session with the transport headers (§ 10.2) and error mapping."""

    def __init__(
        self,
        client: aiohttp.ClientSession,
        url: str,
        *,
        headers: Mapping[str, str],
        settings: UpstreamSettings,
        cookies: SessionCookies | None = None,
    ) -> None:
        self._client = client
        self._url = url
        self._path = URL(url).path
        self.cookies = SessionCookies() if cookies is None else cookies
        self.upstream = shown_uri(url)
        self._base_headers = dict(headers)
        self.settings = settings
        # whether a 401 or 403 may carry a challenge the client must see (OAuth pass-through)
        self._passes_challenges = passes_challenges(settings)
        # `connect` also bounds waiting for a free pooled connection: a full connector fails, never
        # hangs.
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            connect=settings.connect_timeout_s,
            sock_connect=settings.connect_timeout_s,
            sock_read=None,
        )
        self.session_id: str | None = None
        self.protocol_version: str | None = (
            None  # sent as MCP-Protocol-Version where the revision has it
        )
        self.batches = False  # whether the session's revision lets a stream event carry a batch
        self.generation = 0

    @property
    def url(self) -> str:
        """Where requests go: the configured URL, or where a same-origin redirect pointed."""
        return self._url

    def begin_generation(self) -> None:
        """Forget the session id and version before a (re-)initialize."""
        self.generation += 1
        self.session_id = self.protocol_version = None

    def exchange(
        self,
        http_method: str,
        action: str,
        *,
        body: JsonObject | None = None,
        extra: Mapping[str, str] | None = None,
        accept: str = POST_ACCEPT,
        last_event_id: str | None = None,
    ) -> Exchange:
        """One HTTP request; errors inside the block (reading the body too) are mapped to
        `UpstreamFault`s.

        No read timeout: SSE streams of held calls stay quiet for minutes. Connects are bounded."""
        headers = build_headers(
            self._base_headers,
            extra or {},
            accept=accept,
            session_id=self.session_id,
            protocol_version=self.protocol_version,
            last_event_id=last_event_id,
        )
        data = None
        if body is not None:
            headers["Content-Type"] = JSON_TYPE
            data = fast_json.dumps(body)
        return Exchange(self, http_method, action, headers, data)

    async def _request(
        self, http_method: str, headers: dict[str, str], data: bytes | None
    ) -> aiohttp.ClientResponse:
        if self.cookies.kept:  # most sessions are never given a cookie
            self.cookies.add_to(headers, self._path)
        resp = await self._client.request(
            http_method,
            self._url,
            headers=headers,
            data=data,
            timeout=self._timeout,
            raise_for_status=False,
        )
        if resp.history:
            for hop in resp.history:
                if hdrs.SET_COOKIE in hop.headers:
                    self.cookies.update(hop)
            self._follow_redirect(resp)
        if hdrs.SET_COOKIE in resp.headers:
            self.cookies.update(resp)
        return resp

    def _follow_redirect(self, resp: aiohttp.ClientResponse) -> None:
        """Send to where a same-origin redirect (307/308: method and body kept) pointed from now on.

        FastMCP on `mcp` 1.8 and 1.9 answers `POST /mcp` with 307 to `/mcp/`; aiohttp follows it
        with the same method and body (the client's redirect rule, `outbound.redirect_guard`,
        lets only such redirects through), and remembering the target saves the extra round trip
        on every request."""
        if any(hop.status not in KEEPING_STATUSES for hop in resp.history):
            return
        target = resp.url
        if origin_of(target) != origin_of(self._url) or str(target) == self._url:
            return
        _log.info("upstream_url_redirected", url=self.upstream, to=shown_uri(str(target)))
        self._url, self._path = str(target), target.path

    async def check_status(
        self,
        resp: aiohttp.ClientResponse,
        generation: int,
        action: str,
        *,
        ok: Collection[int] = (200,),
        content_type: str | None = None,
    ) -> None:
        """Raise `SessionExpired` on 404 to a request that carried a session id, an
        `UpstreamFault` on any other refusal (`UpstreamAuthChallenge` for a challenge the client
        must see)."""
        if resp.status not in ok:
            await self._refused(resp, generation, action)
        if content_type is not None and resp.content_type != content_type:
            raise UpstreamProtocolError(
                f"answered {action} with content type {resp.content_type!r}"
            )

    async def _refused(self, resp: aiohttp.ClientResponse, generation: int, action: str) -> None:
        if resp.status == 404 and SESSION_HEADER in resp.request_info.headers:
            raise SessionExpired(generation)
        if self._passes_challenges:
            challenge = upstream_challenge(resp, self.settings)
            if challenge is not None:
                raise challenge
        detail = await _refusal_detail(resp)
        message = f"Upstream {self.upstream} answered {action} with HTTP {resp.status}{detail}"
        reason = f"it answered {action} with HTTP {resp.status}"  # not its page: no internals
        if resp.status >= 500:
            raise UpstreamUnavailable(message, reason=reason)
        raise UpstreamRefused(message, status=resp.status, reason=reason)

    async def post_accepted(
        self, message: JsonObject, action: str, *, extra: Mapping[str, str] | None = None
    ) -> None:
        """POST a message the upstream must accept without answering in the body (202)."""
        generation = self.generation
        async with self.exchange("POST", action, body=message, extra=extra) as resp:
            await self.check_status(resp, generation, action, ok=(200, 202, 204))

    async def post_bounded(
        self, message: JsonObject, action: str, *, extra: Mapping[str, str] | None = None
    ) -> None:
        """`post_accepted` within `init_timeout_s`."""
        try:
            async with asyncio.timeout(self.settings.init_timeout_s):
                await self.post_accepted(message, action, extra=extra)
        except Exception as exc:  # map_upstream_errors, without a generator per message
            fault = upstream_fault(exc, self.upstream, action)
            if fault is None:
                raise
            raise fault from exc

    async def delete(self) -> int:
        """DELETE the session (§ 10.5); returns the status (405 = not supported)."""
        with map_upstream_errors(self.upstream, "DELETE"):
            async with asyncio.timeout(self.settings.init_timeout_s):
                async with self.exchange("DELETE", "DELETE") as resp:
                    return resp.status


class Exchange:
    """`async with channel.exchange(...) as resp`: the response of one request, released on exit.

    A plain class rather than an `asynccontextmanager` (and the request awaited rather than kept in
    aiohttp's request context manager): a held call keeps two of these open for its whole life, and
    each generator frame and finished request coroutine would stay allocated with it."""

    __slots__ = ("_action", "_channel", "_data", "_headers", "_method", "_resp")

    def __init__(
        self,
        channel: HttpChannel,
        http_method: str,
        action: str,
        headers: dict[str, str],
        data: bytes | None,
    ) -> None:
        self._channel = channel
        self._method = http_method
        self._action = action
        self._headers: dict[str, str] | None = headers
        self._data = data
        self._resp: aiohttp.ClientResponse | None = None

    async def __aenter__(self) -> aiohttp.ClientResponse:
        headers, self._headers = self._headers or {}, None
        data, self._data = self._data, None
        try:
            resp = await self._channel._request(self._method, headers, data)
        except Exception as exc:  # map_upstream_errors, without a generator per request
            fault = upstream_fault(exc, self._channel.upstream, self._action)
            if fault is None:
                raise
            raise fault from exc
        self._resp = await resp.__aenter__()
        return self._resp

    def let_go(self) -> None:
        """The caller has what it needs from the response (an SSE answer's response event): its
        connection goes back to the pool when the rest of the stream, its end, arrives (aiohttp
        gives a response's connection back at its end by itself), or is closed after
        `LET_GO_TIMEOUT_S`; nothing waits for it. Meanwhile what a server sends after its answer
        fills at most aiohttp's read buffer (it stops reading past its high-water mark), unread."""
        resp = self._resp
        if resp is None or resp.content.is_eof():
            return  # the end came with the response (the usual case): the connection is back
        self._resp = None
        timer = asyncio.get_running_loop().call_later(LET_GO_TIMEOUT_S, resp.close)
        resp.content.on_eof(timer.cancel)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        resp, self._resp = self._resp, None
        try:
            if resp is not None:
                await resp.__aexit__(exc_type, exc, tb)
            if isinstance(exc, Exception):
                raise exc  # mapped to an `UpstreamFault` like the block's own errors
        except Exception as error:
            fault = upstream_fault(error, self._channel.upstream, self._action)
            if fault is None:
                raise
            raise fault from error


async def _refusal_detail(resp: aiohttp.ClientResponse) -> str:
    """A short reason from a JSON-RPC error body, if the upstream sent one."""
    if not is_json(resp):
        return ""
    try:
        body = json.loads(await resp.content.read(4096))
    except (ValueError, aiohttp.ClientError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return f": {bounded(message, 200)}" if isinstance(message, str) else ""


__all__ = ["LET_GO_TIMEOUT_S", "Exchange", "HttpChannel", "SessionExpired", "UpstreamRefused"]
