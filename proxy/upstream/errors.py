"""Foreign errors become `UpstreamFault`s here, at the seam where they arise (httpcore
`map_exceptions`).

Messages say what happened and to which upstream, by its URL as the caller made it safe to show
(proxy/common/shown.py, `shown_uri`: no userinfo, query or fragment).
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

import aiohttp

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


def _data(url: str) -> dict[str, str]:
    return {"upstream": url}


def _translate(exc: Exception, url: str, action: str) -> UpstreamFault | None:
    """The most specific fault for `exc`, or None when it is not a transport error."""
    # includes aiohttp.ServerTimeoutError / ConnectionTimeoutError
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(f"Upstream {url} did not answer in time ({action})", _data(url))
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamUnavailable(
            f"Cannot connect to upstream {url} ({action}): {exc.os_error}", _data(url)
        )
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return UpstreamUnavailable(f"Upstream {url} closed the connection ({action})", _data(url))
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
        )
    if isinstance(exc, aiohttp.ClientError | OSError):
        return UpstreamUnavailable(
            f"Connection to upstream {url} failed ({action}): {type(exc).__name__}", _data(url)
        )
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return UpstreamProtocolError(
            f"Upstream {url} sent a body that is not JSON ({action})", _data(url)
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


def plain_reason(exc: BridgeError) -> str:
    """Why the upstream could not be used, in plain words without its URL or addresses (for
    `/readyz` and the start-up warning): "cannot connect: connection refused", "it did not answer
    in time", "it answered HTTP 502", ..."""
    cause: BaseException | None = exc
    while cause is not None:
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


__all__ = ["map_upstream_errors", "plain_reason"]
