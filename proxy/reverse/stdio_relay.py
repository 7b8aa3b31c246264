"""A modern stdio upstream behind `serve` (docs/directions.md): modern HTTP clients relayed to it,
legacy HTTP clients served in the reverse direction through the same process.

`StdioEra` probes the command's era in a throwaway process only when something asks: a legacy
session that would not open (a modern-only server refuses `initialize`), or a legacy HTTP client
arriving while the era is unknown. It never probes at start or on an interval: each probe costs a
process, and some servers must start only once. While the era is unknown, modern requests take the
engine's legacy path; an engine error whose re-probe then finds a modern server is relayed
instead, as for an HTTP upstream. `StdioModernUpstream.relay` sends a modern request to the
shared `ModernStdioCaller` process (the bridge's own id and progress token on the wire) and
answers as the HTTP transport does: JSON, or SSE once a progress or log notification comes.
"""

from __future__ import annotations

import json

from aiohttp import web

from config.settings import Settings
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.replies import Send, streamed
from proxy.reverse.stdio_front import stdio_probe_settings
from proxy.reverse.stdio_upstream import ModernStdioCaller
from proxy.upstream.era import UpstreamEra
from proxy.upstream.era_probe import probe_stdio
from translators.protocol.era_detection import DUAL, LEGACY, MODERN, Era
from translators.wire import fast_json
from translators.wire.errors import INVALID_REQUEST, http_status_for
from translators.wire.jsonrpc import JsonObject, error_response


class StdioEra(UpstreamEra):
    """The era of `upstream.command`; `modern` covers dual-era servers too (their legacy side is
    never used)."""

    @property
    def relays_modern(self) -> bool:
        return self.era in (MODERN, DUAL)

    async def start(self) -> None:
        """Nothing at start: probed when asked (see the module's docstring)."""

    async def _probe_http(self) -> Era:  # the probe hook of UpstreamEra, here over stdio
        verdict = await probe_stdio(stdio_probe_settings(self._settings))
        return MODERN if verdict.modern else LEGACY


class StdioModernUpstream(ModernUpstream):
    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, StdioEra(settings.upstream))
        self.caller = ModernStdioCaller(settings.upstream, settings.front.request_timeout_s)
        self._keepalive_s = settings.front.sse_keepalive_s

    async def takes_modern(self) -> bool:
        """Without waiting for a probe in flight (see the module's docstring)."""
        return self.era.relays_modern

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


__all__ = ["StdioEra", "StdioModernUpstream", "modern_upstream"]
