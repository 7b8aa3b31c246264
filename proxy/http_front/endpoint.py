"""`HttpFront`: the aiohttp handler of the MCP endpoint: the checks before any JSON is read, the
path a request takes, and the access line.

In order: Host and Origin (403), then a legacy client's GET / DELETE goes to the legacy paths;
method (405), media type (415), body size (413), the replica proof, JSON. Then the one path choice
(translators/protocol/paths.py): a legacy client is relayed, served by the bridge (reverse) or
refused (proxy/http_front/legacy.py); a modern request goes to a modern upstream untranslated, or
through the envelope (a notification is accepted with 202) and the validation ladder of
`translators.protocol.request_validation` (whose rejection is a JSON-RPC error echoing the request
id with the error's HTTP status) to the replica that owns its held call, or to the modern path
(proxy/http_front/modern.py).

The Host and Origin checks guard against DNS rebinding
(2026-07-28/basic/transports/streamable-http.mdx § Security Warning).
"""

from __future__ import annotations

import asyncio
import time
from types import MappingProxyType
from urllib.parse import urlsplit

from aiohttp import web

from config.settings import FrontSettings, IdentitySettings
from proxy.common.http_replies import SSE_KEEPALIVE_S, SSE_QUEUE_LIMIT, Exchange, rejection
from proxy.common.log_context import bind_log_context, unbind_log_context
from proxy.common.shown import shown_principal
from proxy.http_front.hop import HOP_KEY, forward_to_owner, inbound_hop
from proxy.http_front.legacy import LegacyPaths
from proxy.http_front.modern import EngineSource, ModernPath, UpstreamEra
from proxy.observe import access, tracing
from proxy.observe.logs import emit
from proxy.passthrough.legacy_clients import LegacyRelay
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.front import ReverseFront
from translators.protocol.paths import Path, SessionSide, choose_path, is_legacy_client
from translators.protocol.request_validation import (
    ModernRoute,
    check_envelope,
    decode_json,
    fold_headers,
    message_id,
    validate_request,
)
from translators.wire.errors import ClientFault, InvalidRequest


class HttpFront:
    """The aiohttp handler of one upstream's MCP endpoint; its engine comes from `engines`."""

    def __init__(
        self,
        front: FrontSettings,
        identity: IdentitySettings,
        engines: EngineSource,
        *,
        keepalive_s: float = SSE_KEEPALIVE_S,
        queue_limit: int = SSE_QUEUE_LIMIT,
        legacy: LegacyRelay | None = None,
        modern: ModernUpstream | None = None,
        access_log: bool = True,
        upstream: str = "none",
        reverse: ReverseFront | None = None,
        cluster: bool = False,
        path: str | None = None,
        scope: str | None = None,
    ) -> None:
        """`legacy`: legacy clients are relayed (proxy.passthrough.legacy_clients), or served in
        front of a modern upstream (`reverse`); None: the modern path only. `modern`: the
        upstream's era and the relay of modern requests to an upstream that speaks 2026-07-28.
        `cluster`: a replica hop (`HOP_KEY`) is installed at start-up. `path`: where the endpoint
        is served (`front.path` unless given); `scope`: the name of a named upstream (its sealed
        states open under its scope only)."""
        self._era: UpstreamEra | None = modern.era if modern is not None else None
        self._modern = modern
        self._reverse = reverse
        self._relay = legacy
        self._legacy = (
            LegacyPaths(legacy, modern, reverse, identity) if legacy is not None else None
        )
        self._path = ModernPath(
            identity, engines, self._era, self._relay_modern, keepalive_s, queue_limit
        )
        self._front = front
        self.path = front.path if path is None else path
        self._scope = scope
        self._gate = Gate(front)
        self._cluster = cluster
        self._access_log = access_log  # off: the line is logged at debug level
        self._upstream = upstream  # a name (proxy.observe.access.upstream_name), never a URL
        self._logged = MappingProxyType({"upstream": upstream})

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", self.path, self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        exchange = Exchange()
        note, token = access.begin(request.remote, request.headers)
        if tracing.active():
            note.trace = tracing.begin_request(lower_headers(request))
        bound = bind_log_context(self._logged)  # every line of the request names its upstream
        try:
            response = await self._serve(request, exchange)
        except asyncio.CancelledError:
            self._log_finished(exchange, note, status=None, cancelled=True)
            raise
        except Exception:  # aiohttp answers 500; the line and the span say so
            self._log_finished(exchange, note, status=500)
            raise
        finally:
            unbind_log_context(bound)
            access.end(token)
        # logged once aiohttp has written the response (it writes it when this returns, before
        # the task next waits): the line is off the reply's critical path
        asyncio.get_running_loop().call_soon(self._log_finished, exchange, note, response.status)
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
            "principal": shown_principal(exchange.principal) if exchange.principal else None,
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

    # ---- the path ------------------------------------------------------------------------------

    async def _choose(self, legacy_client: bool, headers: dict[str, str]) -> Path:
        """The request's path (translators/protocol/paths.py), after the upstream's era settled if
        it must."""
        session = self._legacy.session_side(headers) if legacy_client and self._legacy else None
        path = self._path_now(legacy_client, session, may_settle=True)
        if path is Path.SETTLE:
            era = self._era
            assert era is not None
            if era.era is None:
                era.reprobe_soon()  # not known yet (the upstream was down): find out
            await era.settled()
            path = self._path_now(legacy_client, session, may_settle=False)
        return path

    def _path_now(
        self, legacy_client: bool, session: SessionSide | None, *, may_settle: bool
    ) -> Path:
        era = self._era
        return choose_path(
            legacy_client=legacy_client,
            era=None if era is None else era.era,
            probing=era is not None and era.probing and era.modern_waits,
            relays_modern=era is not None and era.relays_modern,
            reverse=self._reverse is not None,
            session=session,
            may_settle=may_settle,
        )

    async def _relay_modern(
        self, request: web.Request, raw: bytes, exchange: Exchange
    ) -> web.StreamResponse:
        assert self._modern is not None
        exchange.mode = "relayed"
        return await self._modern.relay(request, raw, exchange.front_request_id)

    # ---- one request ---------------------------------------------------------------------------

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
            path = await self._choose(True, headers)
            return await self._legacy.serve(path, request, headers, exchange, None, None, None)
        raw = await read_body(request, self._front.max_body_bytes)
        if raw is None:
            return too_large(self._front.max_body_bytes, exchange)
        hop = None
        if self._cluster:
            hop, forged = inbound_hop(request.app.get(HOP_KEY), request, raw, exchange)
            if forged is not None:
                return forged
        try:
            decoded = decode_json(raw, self._front.max_json_depth)
            access.note_client(decoded)
            legacy_client = self._legacy is not None and is_legacy_client(headers, decoded)
            path = await self._choose(legacy_client, headers)
            if self._legacy is not None and legacy_client:
                return await self._legacy.serve(
                    path, request, headers, exchange, raw, decoded, message_id(decoded)
                )
            exchange.front_request_id = message_id(decoded)
            if path is Path.MODERN_RELAY:
                method = decoded.get("method") if isinstance(decoded, dict) else None
                exchange.method = method if isinstance(method, str) else None
                exchange.name = access.call_name(exchange.method, _params(decoded))
                return await self._relay_modern(request, raw, exchange)
            message = check_envelope(decoded)
            exchange.method = message["method"]
            exchange.name = access.call_name(exchange.method, message.get("params"))
            if "id" not in message:
                exchange.mode = "accepted"
                return web.Response(status=202)
            route = validate_request(message, folded_headers(request, headers))
        except ClientFault as exc:
            return rejection(exc, exchange.front_request_id, exchange)
        owner = hop.owner_elsewhere(route, self._scope) if hop is not None else None
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


# ---- the checks before any JSON is read ------------------------------------------------------


def _host_name(host: str) -> str:
    """The host part of a Host header value, lower-cased, port dropped (`[::1]:80` -> `[::1]`)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.split(":", 1)[0] if host.count(":") == 1 else host


def lower_headers(request: web.Request) -> dict[str, str]:
    """Header names lower-cased; of a repeated header the first line wins, as for the forwarded
    Authorization."""
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        headers.setdefault(name.lower(), value)
    return headers


def folded_headers(request: web.Request, lowered: dict[str, str]) -> dict[str, str]:
    """`fold_headers` of the request's headers, given its `lower_headers`: with no name repeated
    (every request but a rare one) they are the same mapping, since aiohttp's parser already trims
    each value (tests/proxy/http_front/test_checks.py pins it), so the headers are not walked
    twice."""
    if len(lowered) == len(request.headers):
        return lowered
    return fold_headers(request.headers.items())


class Gate:
    """Host and Origin checks against DNS rebinding (2026-07-28/basic/transports/streamable-http.mdx
    § Security Warning)."""

    def __init__(self, front: FrontSettings) -> None:
        hosts = {host.lower() for host in front.allowed_hosts}
        if front.host not in ("0.0.0.0", "::", ""):
            hosts.add(front.host.lower())
        self._any_host = "*" in hosts
        self._hosts = hosts | {
            f"[{host}]" for host in hosts if ":" in host and not host.startswith("[")
        }
        self._origins = {origin.lower().rstrip("/") for origin in front.allowed_origins}

    def is_allowed_host(self, host: str | None) -> bool:
        return self._any_host or (host is not None and _host_name(host) in self._hosts)

    def is_allowed_origin(self, origin: str | None) -> bool:
        if origin is None or origin.lower().rstrip("/") in self._origins:
            return True
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return (
            self._any_host or parts.hostname in self._hosts or f"[{parts.hostname}]" in self._hosts
        )


def check_gate(gate: Gate, request: web.Request, exchange: Exchange) -> web.Response | None:
    """A 403 when the Host or the Origin is not allowed, else None."""
    host = request.headers.get("Host")
    if not gate.is_allowed_host(host):
        message = f"Forbidden: Host {host!r} is not allowed (front.allowed_hosts)"
        return rejection(InvalidRequest(message), None, exchange, 403)
    origin = request.headers.get("Origin")
    if not gate.is_allowed_origin(origin):
        message = f"Forbidden: Origin {origin!r} is not allowed (front.allowed_origins)"
        return rejection(InvalidRequest(message), None, exchange, 403)
    return None


def check_transport(request: web.Request, exchange: Exchange) -> web.Response | None:
    """A 405 for anything but POST, a 415 for a body that is not `application/json`, else None."""
    if request.method != "POST":
        message = f"Method Not Allowed: the MCP endpoint accepts POST only, not {request.method}"
        response = rejection(InvalidRequest(message), None, exchange, 405)
        response.headers["Allow"] = "POST"
        return response
    if request.content_type != "application/json":
        message = (
            "Unsupported Media Type: the body must be application/json, not "
            f"{request.content_type!r}"
        )
        return rejection(InvalidRequest(message), None, exchange, 415)
    return None


async def read_body(request: web.Request, limit: int) -> bytes | None:
    """The body, or None when it exceeds `limit` (`front.max_body_bytes`)."""
    length = request.content_length
    if length is not None:
        if length > limit:
            return None
        if request.content.is_eof():  # all of it arrived with the head: no read to wait for
            return request.content.read_nowait()
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def too_large(limit: int, exchange: Exchange) -> web.Response:
    message = f"Request body too large: the limit is {limit} bytes (front.max_body_bytes)"
    return rejection(InvalidRequest(message), None, exchange, 413)


__all__ = [
    "Gate",
    "HttpFront",
    "check_gate",
    "check_transport",
    "folded_headers",
    "lower_headers",
    "read_body",
    "too_large",
]
