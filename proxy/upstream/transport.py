"""Which HTTP transport an upstream URL speaks: Streamable HTTP, the old HTTP+SSE, or detected.

`upstream.transport = "auto"` follows the backwards-compatibility rule of the 2025-03-26 transports
page: POST `initialize` to the URL; if that fails with an HTTP 4xx, GET the URL and expect an SSE
stream whose first event is `endpoint` (the HTTP+SSE transport). 401 and 403 are not taken as
"wrong transport": they mean credentials, and the caller must see them as they are. The detected
transport is remembered for the pool's lifetime and detected anew when a session fails to open
with it. `streamable-http` or `sse` skips detection. A 404 or 405 to the opening of a session (to
both transports, when detecting) means no MCP endpoint is at the URL's path: the error names where
it most likely is (proxy/upstream/errors.py, `likely_endpoint`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Literal

import aiohttp
import structlog

from config.settings import UpstreamSettings
from proxy.common.shown import shown_uri
from proxy.upstream.base import InboundHandler, PooledSession
from proxy.upstream.errors import UpstreamRefused, missing_endpoint
from proxy.upstream.http.cookies import SessionCookies
from proxy.upstream.http.session import HttpUpstreamSession
from proxy.upstream.sse import SseUpstreamSession
from translators.protocol.revisions import UnsupportedUpstreamVersion
from translators.tasks_ext.task_ids import SealedCookie
from translators.wire.errors import UpstreamFault, UpstreamUnavailable
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)

HttpTransportName = Literal["streamable-http", "sse"]
STREAMABLE: Final[HttpTransportName] = "streamable-http"
SSE: Final[HttpTransportName] = "sse"
NOT_DETECTED: Final = "auto (not detected yet)"
_CREDENTIAL_STATUSES: Final = frozenset({401, 403})


class HttpTransport:
    """The pool's `SessionOpener` for `upstream.url`, and its `TransportInfo`."""

    def __init__(self, client: aiohttp.ClientSession, settings: UpstreamSettings) -> None:
        if settings.url is None:
            raise UpstreamUnavailable(
                "No upstream is configured (upstream.url or upstream.command)"
            )
        self._client = client
        self._url = settings.url
        self._settings = settings
        self._auto = settings.transport == "auto"
        self._chosen: HttpTransportName | None = None
        self.streams_per_call = False  # read on every lease: kept current by `_choose`
        self._choose({"sse": SSE, "streamable-http": STREAMABLE}.get(settings.transport))

    @property
    def name(self) -> str:
        return self._chosen or NOT_DETECTED

    def _choose(self, name: HttpTransportName | None) -> None:
        self._chosen = name
        self.streams_per_call = name == STREAMABLE

    async def __call__(
        self, capabilities: JsonObject, headers: Mapping[str, str], on_unrelated: InboundHandler
    ) -> PooledSession:
        if self._chosen is None:
            return await self._detect(capabilities, headers, on_unrelated)
        if not self._auto:
            try:
                return await self._open(self._chosen, capabilities, headers, on_unrelated)
            except UpstreamRefused as refused:
                named = missing_endpoint(self._url, refused)
                if named is refused:
                    raise
                raise named from refused
        try:
            return await self._open(self._chosen, capabilities, headers, on_unrelated)
        except UpstreamFault as exc:
            _log.info("upstream_transport_redetecting", was=self._chosen, error=exc.message)
            self._choose(None)
            return await self._detect(capabilities, headers, on_unrelated)

    def adopt(
        self,
        session_id: str,
        init_result: JsonObject,
        *,
        first_request_id: int,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
        cookies: Iterable[SealedCookie] = (),
    ) -> PooledSession | None:
        """A Streamable HTTP session another bridge process opened (a legacy task's, docs/tasks.md),
        with the cookies that process's session kept; None when the upstream does not speak
        Streamable HTTP (as detected so far)."""
        if self._chosen != STREAMABLE:
            return None
        return HttpUpstreamSession.adopt(
            self._client,
            self._url,
            {},
            session_id=session_id,
            init_result=init_result,
            first_request_id=first_request_id,
            headers=headers,
            on_unrelated=on_unrelated,
            settings=self._settings,
            cookies=SessionCookies.restored(cookies),
        )

    async def _detect(
        self, capabilities: JsonObject, headers: Mapping[str, str], on_unrelated: InboundHandler
    ) -> PooledSession:
        try:
            session = await self._open(STREAMABLE, capabilities, headers, on_unrelated)
        except UnsupportedUpstreamVersion:
            # it answered initialize: the transport is right, the revision is not
            self._remember(STREAMABLE)
            raise
        except UpstreamRefused as refused:
            if refused.status in _CREDENTIAL_STATUSES:
                raise
            return await self._fall_back(refused, capabilities, headers, on_unrelated)
        self._remember(STREAMABLE)
        return session

    async def _fall_back(
        self,
        refused: UpstreamRefused,
        capabilities: JsonObject,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
    ) -> PooledSession:
        """After a 4xx to `POST initialize`: the HTTP+SSE transport, or an error naming both
        attempts."""
        try:
            session = await self._open(SSE, capabilities, headers, on_unrelated)
        except UnsupportedUpstreamVersion:
            self._remember(SSE)
            raise
        except UpstreamFault as exc:
            neither = UpstreamRefused(
                f"Upstream {shown_uri(self._url)} speaks neither MCP HTTP transport "
                "(upstream.transport = auto):"
                f" Streamable HTTP: {refused.message}; HTTP+SSE: {exc.message}",
                status=refused.status,
                reason=f"it speaks neither MCP HTTP transport (Streamable HTTP: {refused.reason};"
                f" HTTP+SSE: {exc.reason or type(exc).PUBLIC})",
            )
            raise missing_endpoint(self._url, neither) from exc
        self._remember(SSE)
        return session

    def _remember(self, name: HttpTransportName) -> None:
        if self._chosen != name:
            _log.info("upstream_transport_detected", transport=name, url=shown_uri(self._url))
        self._choose(name)

    async def _open(
        self,
        name: HttpTransportName,
        capabilities: JsonObject,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
    ) -> PooledSession:
        kind = SseUpstreamSession if name == SSE else HttpUpstreamSession
        session = await kind.open(
            self._client,
            self._url,
            capabilities,
            headers=headers,
            on_unrelated=on_unrelated,
            settings=self._settings,
        )
        if isinstance(session, HttpUpstreamSession):
            # a redirect the session followed (mcp 1.8/1.9: /mcp -> /mcp/) is not redone
            self._url = session.url
        return session


__all__ = ["NOT_DETECTED", "SSE", "STREAMABLE", "HttpTransport"]
