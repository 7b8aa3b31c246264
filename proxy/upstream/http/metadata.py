"""The upstream's OAuth metadata documents, fetched for `proxy.auth.oauth_passthrough.MetadataRelay`
(docs/security.md, "OAuth through the bridge"): a GET through an upstream client (the redirect
rule: a redirect is not followed here, and one off the upstream's origin is refused with its
reason), the body read to its end within the 64 KiB a metadata document may have."""

from __future__ import annotations

import aiohttp

from config.settings import UpstreamSettings
from proxy.common.shown import shown_uri
from proxy.upstream.errors import map_upstream_errors
from proxy.upstream.http.outbound import upstream_client
from proxy.upstream.http.wire import read_body
from translators.auth.oauth import MAX_METADATA_BYTES
from translators.wire.errors import (
    UpstreamMessageTooLarge,
    UpstreamProtocolError,
    UpstreamUnavailable,
)


class MetadataFetcher:
    """GETs metadata documents from the upstream's origin; `aclose()` closes its client."""

    def __init__(self, settings: UpstreamSettings) -> None:
        self._settings = settings
        self._timeout = aiohttp.ClientTimeout(
            total=settings.init_timeout_s, sock_connect=settings.connect_timeout_s
        )
        self._client: aiohttp.ClientSession | None = None

    async def fetch(self, url: str) -> bytes | None:
        """The body of a 200, None on 404; an `UpstreamFault` saying why otherwise."""
        if self._client is None:
            self._client = upstream_client(self._settings, timeout=self._timeout)
        headers = {"Accept": "application/json"}
        with map_upstream_errors(shown_uri(url), "metadata GET"):
            async with self._client.get(url, allow_redirects=False, headers=headers) as resp:
                if resp.status == 404:
                    return None
                if resp.status != 200:
                    raise UpstreamUnavailable(
                        f"the upstream answered a metadata request with HTTP {resp.status}"
                    )
                try:
                    return await read_body(resp, MAX_METADATA_BYTES)
                except UpstreamMessageTooLarge:
                    raise UpstreamProtocolError(
                        f"its metadata document is larger than {MAX_METADATA_BYTES} bytes"
                    ) from None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


__all__ = ["MetadataFetcher"]
