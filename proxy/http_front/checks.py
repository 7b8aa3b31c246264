"""The HTTP front's checks before any JSON is read: Host and Origin (403), method (405), media
type (415) and body size (413), in that order."""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from config.settings import FrontSettings
from proxy.common.http_replies import Exchange, rejection
from translators.protocol.request_validation import fold_headers
from translators.wire.errors import InvalidRequest


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
    "check_gate",
    "check_transport",
    "folded_headers",
    "lower_headers",
    "read_body",
    "too_large",
]
