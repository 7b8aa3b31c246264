"""The modern relay hook of the HTTP front: with a modern upstream
(`proxy.passthrough.modern_upstream`), modern
requests are relayed untranslated. Checked twice: before the engine (the upstream's era is
settled as modern), and after an engine error when the upstream was upgraded under the bridge
(the call never reached it, so it is relayed instead)."""

from __future__ import annotations

from aiohttp import web

from proxy.common.http_replies import Exchange
from proxy.passthrough.modern_upstream import ModernUpstream
from translators.protocol.era_detection import Era
from translators.wire.jsonrpc import JsonObject


class ModernRelayHook:
    def __init__(self, modern: ModernUpstream | None) -> None:
        self._modern = modern

    async def takes(self) -> bool:
        """Whether modern requests go to the upstream untranslated."""
        return self._modern is not None and await self._modern.takes_modern()

    def era_before(self) -> Era | None:
        """The upstream's era before the engine runs (for `relays_instead`)."""
        return self._modern.era.era if self._modern is not None else None

    async def relays_instead(self, reply: JsonObject, before: Era | None) -> bool:
        """Whether the engine's error `reply` came from an upstream that became modern-only."""
        return (
            self._modern is not None
            and "error" in reply
            and await self._modern.became_modern_only(before)
        )

    async def relay(
        self, request: web.Request, raw: bytes, exchange: Exchange
    ) -> web.StreamResponse:
        assert self._modern is not None
        exchange.mode = "relayed"
        return await self._modern.relay(request, raw, exchange.front_request_id)


__all__ = ["ModernRelayHook"]
