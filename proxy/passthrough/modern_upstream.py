"""A modern (or dual-era) upstream: modern requests relayed untranslated (docs/architecture.md,
"Eras").

While `proxy.upstream.era.UpstreamEra` knows the HTTP upstream speaks 2026-07-28, the front hands
every modern request here instead of to the engine: the body bytes and protocol headers go to the
upstream as they came, and its answer (an `InputRequiredResult` with its own `requestState`, an
error, an SSE stream) comes back as it is. The bridge holds nothing. When the engine fails a request
because the upstream would not open a legacy session and the re-probe then finds a modern-only
server (the upstream was upgraded), the request is relayed instead: it never reached the upstream.
A legacy client in front of a modern-only upstream gets a clear error naming the versions it speaks.
"""

from __future__ import annotations

from typing import Final

import aiohttp
from aiohttp import web

from config.settings import Settings
from proxy.passthrough.http_proxy import HttpRelay
from proxy.upstream.era import UpstreamEra
from translators.protocol.era_detection import MODERN, Era
from translators.protocol.eras import MODERN_VERSIONS
from translators.wire.errors import INVALID_REQUEST

_REPROBE_STATUSES: Final = frozenset({404, 405})


class ModernUpstream:
    """The era tracker and the relay for modern requests; `aclose()` closes both."""

    def __init__(self, settings: Settings, era: UpstreamEra) -> None:
        self.era = era
        self._relay = HttpRelay(settings, on_failure=era.reprobe_soon)

    async def takes_modern(self) -> bool:
        """Whether a modern request goes to the upstream untranslated (after a probe in flight)."""
        if self.era.probing:
            await self.era.settled()
        return self.era.relays_modern

    @property
    def modern_only(self) -> bool:
        return self.era.era == MODERN

    async def became_modern_only(self, before: Era | None) -> bool:
        """After a failed request: whether the re-probe it caused found a modern-only upstream."""
        if self.era.probing:
            await self.era.settled()
        return before != MODERN and self.modern_only

    async def relay(
        self, request: web.Request, body: bytes, request_id: object = None
    ) -> web.StreamResponse:
        def learn(upstream: aiohttp.ClientResponse) -> None:
            if upstream.status >= 500 or upstream.status in _REPROBE_STATUSES:
                self.era.reprobe_soon()  # downgraded, moved, or failing: find out

        return await self._relay.forward(request, body, request_id, learn)

    def legacy_refusal(self, request_id: object) -> web.Response:
        supported = list(MODERN_VERSIONS)
        message = (
            f"The upstream server speaks only MCP {', '.join(supported)} and does not accept "
            "legacy clients "
            "(initialize); use a client that supports that version"
        )
        return web.json_response(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {
                    "code": INVALID_REQUEST,
                    "message": message,
                    "data": {"supported": supported},
                },
            },
            status=400,
        )

    async def aclose(self) -> None:
        await self._relay.aclose()
        await self.era.aclose()


__all__ = ["ModernUpstream"]
