"""`HttpFront`: the aiohttp handler of the MCP endpoint, and which route a request takes.

In order: Host and Origin (403), then a legacy client's GET / DELETE goes to the legacy route;
method (405), media type (415), body size (413), the replica proof, JSON; a legacy client's POST
goes to the legacy route, and with a modern upstream a modern request to the modern relay; then
the envelope (a notification is accepted with 202) and the validation ladder of
`translators.protocol.request_validation`, whose rejection is a JSON-RPC error echoing the request
id with the error's
HTTP status. A valid request goes to the replica that owns its held call, or the modern path.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from config.settings import FrontSettings, IdentitySettings
from proxy.common.http_replies import Exchange, rejection
from proxy.common.sse_replies import SSE_KEEPALIVE_S, SSE_QUEUE_LIMIT
from proxy.http_front.checks import (
    Gate,
    check_gate,
    check_transport,
    folded_headers,
    lower_headers,
    read_body,
    too_large,
)
from proxy.http_front.hop import forward_to_owner, inbound_hop
from proxy.http_front.legacy_clients import LegacyClients
from proxy.http_front.modern import ModernPath
from proxy.http_front.modern_upstream import ModernRelayHook
from proxy.observe import access, tracing
from proxy.observe.logs import emit
from proxy.passthrough.legacy_clients import LegacyRelay
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.front import ReverseFront
from translators.protocol.paths import is_legacy_client
from translators.protocol.request_validation import (
    ModernRoute,
    check_envelope,
    decode_json,
    message_id,
    validate_request,
)
from translators.wire.errors import ClientFault


class HttpFront:
    """The aiohttp handler of the MCP endpoint; the engine comes from `request.app[ENGINE_KEY]`."""

    def __init__(
        self,
        front: FrontSettings,
        identity: IdentitySettings,
        *,
        keepalive_s: float = SSE_KEEPALIVE_S,
        queue_limit: int = SSE_QUEUE_LIMIT,
        legacy: LegacyRelay | None = None,
        modern: ModernUpstream | None = None,
        access_log: bool = True,
        upstream: str = "none",
        reverse: ReverseFront | None = None,
    ) -> None:
        # legacy clients are relayed (proxy.passthrough.legacy_clients), or served in front of a
        # modern upstream (proxy.reverse); None: the modern path only
        self._legacy = (
            LegacyClients(legacy, modern, identity, reverse) if legacy is not None else None
        )
        # a modern upstream takes modern requests untranslated (proxy.passthrough.modern_upstream)
        self._modern = ModernRelayHook(modern)
        self._path = ModernPath(identity, self._modern, keepalive_s, queue_limit)
        self._front = front
        self._gate = Gate(front)
        self._era = modern.era if modern is not None else None
        self._access_log = access_log  # off: the line is logged at debug level
        self._upstream = upstream  # a name (proxy.observe.access.upstream_name), never a URL

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", self._front.path, self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        exchange = Exchange()
        note, token = access.begin(request.remote, request.headers)
        if tracing.active():
            note.trace = tracing.begin_request(lower_headers(request))
        try:
            response = await self._serve(request, exchange)
        except asyncio.CancelledError:
            self._log_finished(exchange, note, status=None, cancelled=True)
            raise
        except Exception:  # aiohttp answers 500; the line and the span say so
            self._log_finished(exchange, note, status=500)
            raise
        finally:
            access.end(token)
        self._log_finished(exchange, note, status=response.status)
        return response

    def _log_finished(
        self,
        exchange: Exchange,
        note: access.RequestNote,
        status: int | None,
        cancelled: bool = False,
    ) -> None:
        """The access log line (docs/operations.md § Access log), and the request's span."""
        fields = {
            "request_id": exchange.front_request_id,
            **note.who(),
            "method": exchange.method,
            "name": exchange.name,
            "principal": exchange.principal[:12] if exchange.principal else None,
            "client_era": exchange.client_era,
            "upstream_era": self._upstream_era(),
            "upstream_revision": note.revision,
            "upstream": self._upstream,
            "outcome": exchange.outcome(status, cancelled),
            "round": note.round,
            "rounds": note.rounds,
            "status": status,
            "code": exchange.code,
            "mode": exchange.mode,
            "cancelled": cancelled,
            "duration_ms": round((time.monotonic() - exchange.started) * 1000, 1),
        }
        emit("info" if self._access_log else "debug", "front_request_finished", fields)
        tracing.end_request(note.trace, fields)

    def _upstream_era(self) -> str:
        """legacy, modern or dual; an HTTP upstream not probed yet is `unknown`."""
        if self._era is None:
            return "legacy"  # stdio (bridged through its legacy side) or a scripted engine
        return self._era.era or "unknown"

    async def _serve(self, request: web.Request, exchange: Exchange) -> web.StreamResponse:
        headers = lower_headers(request)
        legacy_head = (
            self._legacy is not None
            and request.method in ("GET", "DELETE")
            and is_legacy_client(headers)
        )
        rejected = check_gate(self._gate, request, exchange) or (
            None if legacy_head else check_transport(request, exchange)
        )
        if rejected is not None:
            return rejected
        if self._legacy is not None and legacy_head:
            return await self._legacy.serve(request, headers, exchange, None, None)
        raw = await read_body(request, self._front.max_body_bytes)
        if raw is None:
            return too_large(self._front.max_body_bytes, exchange)
        hop, forged = inbound_hop(request, raw, exchange)
        if forged is not None:
            return forged
        try:
            decoded = decode_json(raw, self._front.max_json_depth)
            access.note_client(decoded)
            if self._legacy is not None and is_legacy_client(headers, decoded):
                method = decoded.get("method") if isinstance(decoded, dict) else None
                method = method if isinstance(method, str) else None
                exchange.name = access.call_name(method, _params(decoded))
                return await self._legacy.serve(
                    request, headers, exchange, raw, method, message_id(decoded)
                )
            exchange.front_request_id = message_id(decoded)
            if await self._modern.takes():
                method = decoded.get("method") if isinstance(decoded, dict) else None
                exchange.method = method if isinstance(method, str) else None
                exchange.name = access.call_name(exchange.method, _params(decoded))
                return await self._modern.relay(request, raw, exchange)
            message = check_envelope(decoded)
            exchange.method = message["method"]
            exchange.name = access.call_name(exchange.method, message.get("params"))
            if "id" not in message:
                exchange.mode = "accepted"
                return web.Response(status=202)
            route = validate_request(message, folded_headers(request, headers))
        except ClientFault as exc:
            return rejection(exc, exchange.front_request_id, exchange)
        owner = hop.owner_elsewhere(route) if hop is not None else None
        if hop is not None and owner is not None:

            async def recover_here(
                request: web.Request, route: ModernRoute, _: object
            ) -> web.StreamResponse:
                # the owner is gone: serve the retry here, where recovery may re-execute it
                return await self._path.dispatch(
                    request, headers, route, exchange, raw, owner_unreachable=True
                )

            return await forward_to_owner(hop, request, raw, route, owner, exchange, recover_here)
        return await self._path.dispatch(request, headers, route, exchange, raw)


def _params(decoded: object) -> object:
    return decoded.get("params") if isinstance(decoded, dict) else None


__all__ = ["HttpFront"]
