"""Foreign errors become `UpstreamFault`s here, at the seam where they arise (httpcore
`map_exceptions`), and why the upstream could not be used is said in plain words (`plain_reason`,
for `/readyz` and the start-up warning).

Messages say what happened and to which upstream, by its URL as the caller made it safe to show
(proxy/common/shown.py, `shown_uri`: no userinfo, query or fragment).

A URL whose path serves no MCP (`POST initialize` answered 404 or 405, and over `transport =
"auto"` no HTTP+SSE stream there either) is the most common first mistake: `--upstream
http://127.0.0.1:8931` for a server at `/mcp`. `likely_endpoint` names where the endpoint most
likely is; `check`, `/readyz` and the start-up warning all say it the same way.
"""

from __future__ import annotations

import errno
import json
import os
import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from proxy.common.shown import shown_uri
from translators.wire.errors import (
    BridgeError,
    UpstreamFault,
    UpstreamProtocolError,
    UpstreamRedirected,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)

_HTTP_STATUS = re.compile(r"\bwith HTTP (\d{3})\b")
# what an HTTP server answers a POST to a path where no MCP endpoint is (Not Found, Method Not
# Allowed: a web page, or an HTTP+SSE server's GET-only stream)
NO_ENDPOINT_STATUSES: Final = frozenset({404, 405})
_SDK_PATHS: Final = ("/mcp", "/sse")  # where the Python and TypeScript SDKs serve by default


class UpstreamRefused(UpstreamProtocolError):
    """The upstream answered with an HTTP status below 500 that the request did not expect; `status`
    tells transport detection whether to try the HTTP+SSE transport (a 4xx). `likely`: where the
    MCP endpoint most likely is, when the refusal of a session says none is at the URL's path
    (`likely_endpoint`)."""

    def __init__(
        self, message: str, *, status: int, likely: str | None = None, reason: str | None = None
    ) -> None:
        super().__init__(message, reason=reason)
        self.status = status
        self.likely = likely


def likely_endpoint(url: str) -> str:
    """Where the MCP endpoint most likely is when `url` answered an MCP request with 404 or 405
    (shown without credentials, query or fragment): the SDKs' Streamable HTTP path `/mcp` after
    its path, or in place of an `/sse` it ends with; `/sse` in place of an `/mcp` it ends with."""
    parts = urlsplit(shown_uri(url))
    path = parts.path.rstrip("/")
    stem, tail = path[:-4], path[-4:]
    if tail in _SDK_PATHS:
        path = stem + ("/sse" if tail == "/mcp" else "/mcp")
    else:
        path += "/mcp"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def missing_endpoint(url: str, refused: UpstreamRefused) -> UpstreamRefused:
    """`refused` (the answer to a session's opening at `url`), or, when its status says no MCP
    endpoint is at that path, the same refusal naming the likely endpoint."""
    if refused.status not in NO_ENDPOINT_STATUSES:
        return refused
    likely = likely_endpoint(url)
    message = f"{refused.message}; {endpoint_hint(likely)}"
    reason = f"no MCP endpoint at that path (it answered HTTP {refused.status}); " + endpoint_hint(
        likely, whole=False
    )
    return UpstreamRefused(message, status=refused.status, likely=likely, reason=reason)


def endpoint_hint(likely: str, *, whole: bool = True) -> str:
    """The fix, "did you mean http://host:port/mcp?"; without the host and the rest of the path
    (`whole=False`: `/readyz` shows no URL) "did you mean .../mcp?"."""
    shown = likely if whole else ".../" + likely.rstrip("/").rpartition("/")[2]
    return f"did you mean {shown}?"


def _data(url: str) -> dict[str, str]:
    return {"upstream": url}


def _translate(exc: Exception, url: str, action: str) -> UpstreamFault | None:
    """The most specific fault for `exc`, or None when it is not a transport error."""
    # includes aiohttp.ServerTimeoutError / ConnectionTimeoutError
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(
            f"Upstream {url} did not answer in time ({action})",
            _data(url),
            reason=f"it did not answer {action} in time",
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamUnavailable(
            f"Cannot connect to upstream {url} ({action}): {exc.os_error}",
            _data(url),
            reason=_transport_reason(exc),
        )
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return UpstreamUnavailable(
            f"Upstream {url} closed the connection ({action})",
            _data(url),
            reason=_transport_reason(exc),
        )
    if isinstance(exc, aiohttp.TooManyRedirects):  # within its origin (the redirect rule, outbound)
        return UpstreamRedirected(
            f"Upstream {url} redirected {action} {len(exc.history)} times; the bridge stops there",
            None,
            public="The upstream server redirected the request too many times",
        )
    if isinstance(exc, aiohttp.ClientResponseError):
        return UpstreamProtocolError(
            f"Upstream {url} sent an invalid HTTP response ({action}): status {exc.status}",
            _data(url),
            reason=f"it sent an invalid HTTP response to {action}",
        )
    if isinstance(exc, aiohttp.ClientError | OSError):
        return UpstreamUnavailable(
            f"Connection to upstream {url} failed ({action}): {type(exc).__name__}",
            _data(url),
            reason=_transport_reason(exc) or f"the connection failed during {action}",
        )
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return UpstreamProtocolError(
            f"Upstream {url} sent a body that is not JSON ({action})",
            _data(url),
            reason=f"it answered {action} with a body that is not JSON",
        )
    return None


def upstream_fault(exc: Exception, url: str, action: str) -> Exception | None:
    """What `map_upstream_errors` raises instead of `exc` (from `exc`); None: `exc` itself. For the
    hot path's own `try` blocks, where a generator-based context manager costs more than the
    request's parsing."""
    if isinstance(exc, BridgeError):
        if isinstance(exc, UpstreamProtocolError) and url not in exc.message:
            return UpstreamProtocolError(
                f"Upstream {url}: {exc.message} ({action})",
                {**exc.data, **_data(url)},
                public=exc.public or False,
                # raised without the URL: the bridge's own words
                reason=exc.reason or f"it {exc.message}",
            )
        return None
    return _translate(exc, url, action)


@contextmanager
def map_upstream_errors(url: str, action: str) -> Iterator[None]:
    """Re-raise aiohttp, OS, timeout and JSON errors from the block as `UpstreamFault`s (`from
    exc`).

    `BridgeError`s pass unchanged, except that an `UpstreamProtocolError` raised without naming the
    upstream (e.g. by the SSE decoder) is re-raised with the URL and action added.
    """
    try:
        yield
    except Exception as exc:
        fault = upstream_fault(exc, url, action)
        if fault is None:
            raise
        raise fault from exc


# OpenSSL's verify codes a TLS upstream's certificate is most often refused with
_CERTIFICATE_REASONS: Final = {
    10: "its TLS certificate has expired",
    18: "its TLS certificate is self-signed: trust it with SSL_CERT_FILE",
    19: "its TLS certificate's chain ends in a CA the bridge does not trust: add it with "
    "SSL_CERT_FILE",
    20: "its TLS certificate is not signed by a CA the bridge trusts: add the CA with "
    "SSL_CERT_FILE",
    62: "its TLS certificate is for another host name or address",
    64: "its TLS certificate is for another host name or address",
}


def _connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "cannot connect: the host name does not resolve"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        code = getattr(exc.certificate_error, "verify_code", 0)
        return _CERTIFICATE_REASONS.get(code, "its TLS certificate was refused")
    if isinstance(exc, aiohttp.ClientSSLError):
        return _tls_alert_reason(exc.os_error)
    code = exc.os_error.errno
    if code in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT):
        return f"cannot connect: {os.strerror(code).lower()}"
    return "cannot connect"


# the alerts a server ends a TLS connection with when it wants a client certificate (mutual TLS)
_TLS_ALERT_REASONS: Final = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "it asks for a TLS client certificate: set "
    "upstream.tls_client_cert",
    "SSLV3_ALERT_BAD_CERTIFICATE": "it refused the bridge's TLS client certificate",
    "TLSV1_ALERT_UNKNOWN_CA": "it refused the bridge's TLS client certificate",
}


def _tls_alert_reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    return _TLS_ALERT_REASONS.get(str(reason), "the TLS handshake failed")


def _transport_reason(exc: BaseException) -> str | None:
    """Plain words for the connection or TLS failure on `exc`'s chain of causes, if there is one
    (also the `reason` a client is told of it: `_translate`)."""
    cause: BaseException | None = exc
    seen: set[int] = set()  # a chain of causes may loop (`raise exc from exc`)
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, aiohttp.ClientConnectorError):
            return _connect_reason(cause)
        if isinstance(cause, ssl.SSLError):  # after the handshake: TLS 1.3 servers alert then
            return _tls_alert_reason(cause)
        if isinstance(
            cause,
            aiohttp.ServerDisconnectedError
            | aiohttp.ClientPayloadError
            | aiohttp.ClientConnectionResetError,
        ):  # the last: closed before the request was written (a TLS 1.3 server's alert, say)
            return "it closed the connection without answering"
        cause = cause.__cause__
    return None


def plain_reason(exc: BridgeError) -> str:
    """Why the upstream could not be used, in plain words without its URL or addresses (for
    `/readyz` and the start-up warning): "cannot connect: connection refused", "it did not answer
    in time", "it answered HTTP 502", ..."""
    said = _transport_reason(exc)
    if said is not None:
        return said
    if isinstance(exc, UpstreamRefused) and exc.reason is not None and exc.likely is not None:
        return exc.reason  # `missing_endpoint`'s
    status = _HTTP_STATUS.search(exc.message)
    if status is not None:
        return f"it answered HTTP {status.group(1)}"
    if isinstance(exc, UpstreamTimeout):
        return "it did not answer in time"
    if isinstance(exc, UpstreamSessionLost):
        return "the upstream session was lost"
    if isinstance(exc, UpstreamProtocolError):
        return "it answered with something that is not MCP"
    return "it is unavailable"


__all__ = [
    "NO_ENDPOINT_STATUSES",
    "UpstreamRefused",
    "endpoint_hint",
    "likely_endpoint",
    "map_upstream_errors",
    "missing_endpoint",
    "plain_reason",
]
