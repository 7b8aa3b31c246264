"""The legacy-client route of the HTTP front: a legacy client's request (`initialize` without
modern `_meta`, an `Mcp-Session-Id`, a legacy `MCP-Protocol-Version`, a batch, or a GET / DELETE
with legacy headers) is relayed by `proxy.passthrough.legacy_clients` after the Host and Origin
checks. In front
of an upstream that speaks 2026-07-28 (modern-only or dual-era), the bridge serves the legacy
session itself (`proxy.reverse.front`, docs/directions.md); without that, a modern-only upstream
means a refusal."""

from __future__ import annotations

import json

from aiohttp import web

from config.settings import IdentitySettings
from proxy.auth.principal import principal_of
from proxy.common.http_replies import Exchange
from proxy.common.log_context import log_context
from proxy.passthrough.legacy_clients import LegacyRelay
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.front import SESSION, ReverseFront
from translators.protocol.era_detection import DUAL, MODERN


class LegacyClients:
    """Where the front sends legacy clients."""

    def __init__(
        self,
        relay: LegacyRelay,
        modern: ModernUpstream | None,
        identity: IdentitySettings,
        reverse: ReverseFront | None = None,
    ) -> None:
        self._relay = relay
        self._reverse = reverse
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
        principal = exchange.principal = principal_of(headers, self._identity)
        exchange.client_era = "legacy"
        if self._reverse is not None and await self._reversed(headers, principal):
            with log_context(transport="http", era="legacy", principal=principal):
                decoded = json.loads(body) if body is not None else None
                return await self._reverse.serve(request, exchange, decoded, principal)
        if self._modern is not None and self._modern.modern_only:
            return self._modern.legacy_refusal(request_id)
        with log_context(transport="http", era="legacy", principal=principal):
            return await self._relay.handle(request, body, principal, method, request_id)

    async def _reversed(self, headers: dict[str, str], principal: str) -> bool:
        """Whether the bridge serves this legacy session itself: a session it issued, or any
        other (new, or unknown: 404) while the upstream speaks 2026-07-28, except a session the
        relay opened on the upstream's legacy side before."""
        assert self._reverse is not None
        session_id = headers.get(SESSION.lower())
        if session_id is not None and self._reverse.serves(session_id):
            return True
        if self._modern is None or (
            session_id is not None and self._relay.sessions.owned_by(session_id, principal)
        ):
            return False
        if self._modern.era.era is None:
            self._modern.era.reprobe_soon()  # not known yet (the upstream was down): find out
        await self._modern.era.settled()
        return self._modern.era.era in (MODERN, DUAL)


__all__ = ["LegacyClients"]
