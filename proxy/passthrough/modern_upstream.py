"""A modern (or dual-era) upstream: modern requests relayed untranslated (docs/architecture.md,
"Eras").

While `proxy.upstream.era.UpstreamEra` knows the HTTP upstream speaks 2026-07-28, the front hands
every modern request here instead of to the engine: the body bytes and protocol headers go to the
upstream as they came, and its answer (an `InputRequiredResult` with its own `requestState`, an
error, an SSE stream) comes back as it is. The bridge holds nothing. When the engine fails a request
because the upstream would not open a legacy session and the re-probe then finds a modern-only
server (the upstream was upgraded), the request is relayed instead: it never reached the upstream.
A legacy client in front of a modern-only upstream gets a clear error naming the versions it speaks.

A modern stdio upstream (`StdioModernUpstream`, docs/directions.md) is tracked by
`proxy.upstream.era.StdioEra`, probed only when something asks (a legacy session that would not
open, a legacy HTTP client arriving while the era is unknown); while the era is unknown, modern
requests take the engine's legacy path. Its relay sends a modern request to the shared
`ModernStdioCaller` process (the bridge's own id and progress token on the wire) and answers as the
HTTP transport does: JSON, or SSE once a progress or log notification comes. Legacy HTTP clients in
the reverse direction go through the same process (`reverse_caller`).
"""

from __future__ import annotations

import json
from typing import Final

import aiohttp
from aiohttp import web

from config.settings import Settings
from proxy.common.http_replies import Send, streamed
from proxy.passthrough.http_proxy import HttpRelay
from proxy.upstream.era import StdioEra, UpstreamEra
from proxy.upstream.modern.caller import ModernCaller
from proxy.upstream.modern.http_caller import ModernHttpCaller
from proxy.upstream.modern.stdio_caller import ModernStdioCaller
from translators.protocol.eras import MODERN_VERSIONS
from translators.wire import fast_json
from translators.wire.errors import INVALID_REQUEST, http_status_for
from translators.wire.jsonrpc import JsonObject, error_response

_REPROBE_STATUSES: Final = frozenset({404, 405})


class ModernUpstream:
    """The era tracker and the relay for modern requests; `aclose()` closes both."""

    def __init__(self, settings: Settings, era: UpstreamEra) -> None:
        self.era = era
        self._settings = settings
        self._relay = HttpRelay(settings, on_failure=era.reprobe_soon)

    def reverse_caller(self) -> ModernCaller:
        """The client legacy HTTP clients' requests go upstream through (the reverse direction)."""
        return ModernHttpCaller(self._settings.upstream, self._settings.front.request_timeout_s)

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


class StdioModernUpstream(ModernUpstream):
    """A modern stdio upstream: one shared process for modern and reverse requests."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, StdioEra(settings.upstream))
        self.caller = ModernStdioCaller(settings.upstream, settings.front.request_timeout_s)
        self._keepalive_s = settings.front.sse_keepalive_s

    def reverse_caller(self) -> ModernCaller:
        return self.caller

    async def relay(
        self, request: web.Request, body: bytes, request_id: object = None
    ) -> web.StreamResponse:
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            problem = {"code": INVALID_REQUEST, "message": "Invalid Request: not a request"}
            return web.json_response(error_response(None, problem), status=400)
        if "id" not in message:
            return web.Response(status=202)  # cancellation over HTTP is a closed stream

        async def call(send: Send) -> JsonObject:
            return await self.caller.call(message, send, None)

        stream, response = await streamed(request, self._keepalive_s, call)
        if stream is not None:
            return stream
        error = response.get("error")
        status = http_status_for(error.get("code", 0)) if isinstance(error, dict) else 200
        return web.Response(
            body=fast_json.dumps(response), status=status, content_type="application/json"
        )

    async def aclose(self) -> None:
        await self.caller.aclose()
        await super().aclose()


def modern_upstream(settings: Settings) -> ModernUpstream | None:
    """The era tracker and modern relay for the configured upstream (HTTP or stdio)."""
    if settings.upstream.url is not None:
        return ModernUpstream(settings, UpstreamEra(settings.upstream))
    if settings.upstream.command is not None:
        return StdioModernUpstream(settings)
    return None


__all__ = ["ModernUpstream", "StdioModernUpstream", "modern_upstream"]
