"""The legacy paths of the HTTP front: a legacy client's request (`initialize` without modern
`_meta`, an `Mcp-Session-Id`, a legacy `MCP-Protocol-Version`, a batch, or a GET / DELETE with
legacy headers), after the Host and Origin checks, on the path the front chose
(translators/protocol/paths.py): relayed to the upstream's legacy side
(`proxy.passthrough.legacy_clients`), served by the bridge itself in front of an upstream that
speaks 2026-07-28 (`proxy.reverse.front`, docs/directions.md), or refused before a modern-only
upstream."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from config.settings import IdentitySettings
from proxy.auth.principal import principal_of
from proxy.common.http_replies import Exchange
from proxy.common.log_context import log_context
from proxy.common.shown import shown_principal
from proxy.observe.access import call_name
from proxy.passthrough.legacy_clients import LegacyRelay
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.front import SESSION, ReverseFront
from translators.protocol.paths import Path, SessionSide

_SESSION = SESSION.lower()


class LegacyPaths:
    """Where the front sends legacy clients."""

    def __init__(
        self,
        relay: LegacyRelay,
        modern: ModernUpstream | None,
        reverse: ReverseFront | None,
        identity: IdentitySettings,
    ) -> None:
        self._relay = relay
        self._modern = modern
        self._reverse = reverse
        self._identity = identity

    def session_side(self, headers: dict[str, str]) -> SessionSide | None:
        """Which side issued the session the request names: the reverse direction, the relay (for
        this principal), or neither (none named, or unknown: the path decides)."""
        session_id = headers.get(_SESSION)
        if session_id is None:
            return None
        if self._reverse is not None and self._reverse.serves(session_id):
            return "reverse"
        if self._relay.sessions.owned_by(session_id, principal_of(headers, self._identity)):
            return "relay"
        return None

    async def serve(
        self,
        path: Path,
        request: web.Request,
        headers: dict[str, str],
        exchange: Exchange,
        body: bytes | None,
        decoded: Any,
        request_id: int | str | None,
    ) -> web.StreamResponse:
        """`headers` are the request's, lower-cased; `body` and `decoded` (the parsed body) None
        for GET / DELETE; `request_id` is echoed in the bridge's own error replies."""
        method = decoded.get("method") if isinstance(decoded, dict) else None
        exchange.mode, exchange.method = "legacy", method if isinstance(method, str) else None
        exchange.front_request_id = request_id
        principal = exchange.principal = principal_of(headers, self._identity)
        exchange.client_era = "legacy"
        if isinstance(decoded, dict):
            exchange.name = call_name(exchange.method, decoded.get("params"))
        if path is Path.LEGACY_REFUSED and self._modern is not None:
            return self._modern.legacy_refusal(request_id)
        with log_context(transport="http", era="legacy", principal=shown_principal(principal)):
            if path is Path.REVERSE and self._reverse is not None:
                return await self._reverse.serve(request, exchange, decoded, principal)
            return await self._relay.handle(request, body, principal, exchange.method, request_id)


__all__ = ["LegacyPaths"]
