"""The legacy-client route of the HTTP front: a legacy client's request (`initialize` without
modern `_meta`, an `Mcp-Session-Id`, a legacy `MCP-Protocol-Version`, a batch, or a GET / DELETE
with legacy headers) is relayed by `proxy.legacy_relay` after the Host and Origin checks, or
refused when the upstream is modern-only."""

from __future__ import annotations

from aiohttp import web
from structlog.contextvars import bound_contextvars

from config.settings import IdentitySettings
from proxy.front_http.replies import Exchange
from proxy.legacy_relay import LegacyRelay
from proxy.modern_relay import ModernUpstream
from proxy.principal import principal_of


class LegacyClients:
    """Where the front sends legacy clients."""

    def __init__(
        self, relay: LegacyRelay, modern: ModernUpstream | None, identity: IdentitySettings
    ) -> None:
        self._relay = relay
        self._modern = modern
        self._identity = identity

    async def serve(
        self,
        request: web.Request,
        headers: dict[str, str],
        exchange: Exchange,
        body: bytes | None,
        method: str | None,
        request_id: int | str | None = None,
    ) -> web.StreamResponse:
        """`headers` are the request's, lower-cased; `body` None for GET / DELETE; `request_id`
        is echoed in the bridge's own error replies."""
        exchange.mode, exchange.method = "legacy", method
        exchange.front_request_id = request_id
        if self._modern is not None and self._modern.modern_only:
            return self._modern.legacy_refusal(request_id)
        principal = exchange.principal = principal_of(headers, self._identity)
        exchange.client_era = "legacy"
        with bound_contextvars(transport="http", era="legacy", principal=principal):
            return await self._relay.handle(request, body, principal, method, request_id)


__all__ = ["LegacyClients"]
