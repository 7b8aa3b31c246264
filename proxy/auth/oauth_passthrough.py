"""OAuth pass-through, the I/O part: upstream challenges become `UpstreamAuthChallenge`, and the
bridge serves the upstream's Protected Resource Metadata (RFC 9728) as its own.

The bridge is not an authorization server and keeps no tokens: the client's `Authorization` is
forwarded unchanged (the principal is its digest), the upstream decides. What the bridge adds is
discovery: a `401` or `403 insufficient_scope` reaches the client with the upstream's challenge
(URLs moved to the bridge's public origin), and `/.well-known/oauth-protected-resource[/<path>]`
answers with the upstream's document, `resource` rewritten to the bridge's public endpoint. The
pure rules are in `translators.auth.challenges`, `translators.auth.oauth` and
`translators.auth.public_urls`; the document is fetched by a `MetadataSource`
(`proxy.upstream.http.metadata.MetadataFetcher`, an upstream client like the others).

None of this applies when the operator set static upstream credentials (`upstream.authorization`
or `upstream.authorization_file`) or turned forwarding off: then the client's token never reaches
the upstream, a challenge is the bridge's own credential being refused (a plain upstream error),
and no metadata is served. See docs/security.md and docs/operations.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol

import aiohttp
import structlog
from aiohttp import web

from config.settings import Settings, UpstreamSettings
from translators.auth.challenges import is_auth_challenge
from translators.auth.oauth import (
    MetadataRefused,
    UpstreamAuthChallenge,
    metadata_from_issuer,
    relay_metadata,
)
from translators.auth.public_urls import PublicUrls, public_endpoint
from translators.wire.errors import UpstreamFault

_log = structlog.get_logger("proxy.auth.oauth_passthrough")
METADATA_FRESH_S: Final = (
    30.0  # a found (or absent) document is reused this long: no fetch per request
)
_METADATA_HEADERS: Final = {"Cache-Control": "no-store", "Access-Control-Allow-Origin": "*"}
# Browser clients send MCP-Protocol-Version with their metadata GET, which needs a CORS preflight.
_PREFLIGHT_HEADERS: Final = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET",
    "Access-Control-Allow-Headers": "*",
    "Access-Control-Max-Age": "600",
}


def passes_challenges(upstream: UpstreamSettings) -> bool:
    """Whether the client's own token goes upstream, so the upstream's challenges are the
    client's."""
    return (
        upstream.authorization is None
        and upstream.forward_authorization
        and upstream.url is not None
    )


def public_urls_of(settings: Settings) -> PublicUrls:
    front = settings.front
    endpoint = public_endpoint(front.public_url, front.host, front.port, front.path)
    return PublicUrls(endpoint, settings.upstream.url or "")


def upstream_challenge(
    resp: aiohttp.ClientResponse, upstream: UpstreamSettings
) -> UpstreamAuthChallenge | None:
    """The challenge in an upstream refusal that the client must see, or None."""
    if resp.status not in (401, 403) or not passes_challenges(upstream):
        return None
    lines = resp.headers.getall("WWW-Authenticate", [])
    value = ", ".join(lines) if lines else None
    return (
        UpstreamAuthChallenge(resp.status, value) if is_auth_challenge(resp.status, value) else None
    )


class _Unavailable(Exception):
    """The upstream's metadata could not be fetched or used (502); the message is for the log."""


class MetadataSource(Protocol):
    """Fetches the upstream's metadata documents (`proxy.upstream.http.metadata.MetadataFetcher`):
    a document's body, None when there is none (404), an `UpstreamFault` saying why otherwise."""

    async def fetch(self, url: str) -> bytes | None: ...

    async def aclose(self) -> None: ...


class MetadataRelay:
    """Serves the bridge's Protected Resource Metadata, fetched from the upstream on each
    request."""

    def __init__(self, settings: Settings, source: MetadataSource) -> None:
        self._urls = public_urls_of(settings)
        self._front_path = settings.front.path
        self._source = source
        self._running = False
        self._fresh: tuple[float, dict[str, Any] | None] | None = None

    def add_routes(self, app: web.Application) -> None:
        for path in self._urls.metadata_paths(self._front_path):
            app.router.add_get(path, self.handle)
            app.router.add_route("OPTIONS", path, self.preflight)
        app.cleanup_ctx.append(self._client_context)

    async def preflight(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers=_PREFLIGHT_HEADERS)

    async def _client_context(self, app: web.Application) -> AsyncIterator[None]:
        self._running = True
        try:
            yield
        finally:
            self._running = False
            await self._source.aclose()

    async def handle(self, request: web.Request) -> web.Response:
        try:
            document = await self._cached_document()
        except _Unavailable as exc:
            _log.warning("oauth_metadata_unavailable", reason=str(exc))
            body = {
                "error": "temporarily_unavailable",
                "error_description": "The upstream server's protected resource metadata is "
                "unavailable",
            }
            return web.json_response(body, status=502, headers=_METADATA_HEADERS)
        if document is None:
            return web.json_response(
                {
                    "error": "not_found",
                    "error_description": "The upstream server publishes"
                    " no protected resource metadata",
                },
                status=404,
                headers=_METADATA_HEADERS,
            )
        return web.json_response(document, headers=_METADATA_HEADERS)

    async def _cached_document(self) -> dict[str, Any] | None:
        """The document (None: there is none), fetched at most once per `METADATA_FRESH_S`;
        failures are not remembered, so the next request tries again."""
        now = asyncio.get_running_loop().time()
        if self._fresh is not None and now - self._fresh[0] < METADATA_FRESH_S:
            return self._fresh[1]
        document = await self._document()
        self._fresh = (now, document)
        return document

    async def _document(self) -> dict[str, Any] | None:
        for url in self._urls.upstream_metadata_urls:
            body = await self._fetch(url)
            if body is not None:
                return self._use(relay_metadata, body, "protected resource metadata")
        issuer_url = self._urls.upstream_issuer_metadata_url
        body = await self._fetch(issuer_url) if issuer_url is not None else None
        return (
            self._use(metadata_from_issuer, body, "authorization server metadata")
            if body is not None
            else None
        )

    def _use(self, rule: Any, body: bytes, what: str) -> dict[str, Any]:
        try:
            document: dict[str, Any] = rule(body, self._urls)
        except MetadataRefused as exc:
            raise _Unavailable(f"the upstream's {what} was refused: {exc}") from None
        return document

    async def _fetch(self, url: str) -> bytes | None:
        """The body of a 200, None on 404; `_Unavailable` otherwise (redirects are not followed)."""
        if not self._running:
            raise _Unavailable("the bridge is not running")
        try:
            return await self._source.fetch(url)
        except UpstreamFault as exc:
            raise _Unavailable(
                f"the upstream's metadata could not be fetched: {exc.message}"
            ) from None


__all__ = [
    "METADATA_FRESH_S",
    "MetadataRelay",
    "MetadataSource",
    "passes_challenges",
    "public_urls_of",
    "upstream_challenge",
]
