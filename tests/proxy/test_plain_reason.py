"""`plain_reason`: what `/readyz` and the start-up warning say of an upstream failure, in plain
words, with no URL, address or exception class name; the same words as the `reason` a client is
told of a transport failure; and where the MCP endpoint likely is when a URL serves none
(`likely_endpoint`, said the same way by `check`, `/readyz` and the start-up warning)."""

from __future__ import annotations

import errno
import socket
import ssl

import aiohttp
import pytest

from proxy.upstream.errors import (
    UpstreamRefused,
    likely_endpoint,
    map_upstream_errors,
    missing_endpoint,
    plain_reason,
)
from translators.wire.errors import (
    BridgeError,
    UpstreamProtocolError,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)

URL = "http://10.1.2.3:8931/mcp"


def mapped(exc: Exception) -> BridgeError:
    with pytest.raises(BridgeError) as caught, map_upstream_errors(URL, "initialize"):
        raise exc
    return caught.value


def certificate_error(code: int, message: str) -> aiohttp.ClientConnectorCertificateError:
    """What aiohttp raises when the upstream's certificate fails OpenSSL's check `code`."""
    key = aiohttp.client_reqrep.ConnectionKey("10.1.2.3", 8931, True, True, None, None, None)
    error = ssl.SSLCertVerificationError(1, f"certificate verify failed: {message}")
    error.verify_code, error.verify_message = code, message
    return aiohttp.ClientConnectorCertificateError(key, error)


def tls_alert(reason: str) -> aiohttp.ClientOSError:
    """What aiohttp raises when the server ends the TLS connection with an alert after the
    handshake (a TLS 1.3 server that wants a client certificate)."""
    alert = ssl.SSLError(1, f"[SSL: {reason}]")
    alert.reason = reason
    raised = aiohttp.ClientOSError(1, str(alert))
    raised.__cause__ = alert
    return raised


def connector_error(code: int) -> aiohttp.ClientConnectorError:
    key = aiohttp.client_reqrep.ConnectionKey("10.1.2.3", 8931, False, True, None, None, None)
    return aiohttp.ClientConnectorError(key, OSError(code, f"Connect call failed ({code})"))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (mapped(connector_error(errno.ECONNREFUSED)), "cannot connect: connection refused"),
        (mapped(connector_error(errno.EHOSTUNREACH)), "cannot connect: no route to host"),
        (mapped(connector_error(errno.EACCES)), "cannot connect"),
        (mapped(aiohttp.ServerDisconnectedError()), "it closed the connection without answering"),
        (mapped(TimeoutError()), "it did not answer in time"),
        (
            UpstreamUnavailable(f"Upstream {URL} answered initialize with HTTP 502"),
            "it answered HTTP 502",
        ),
        (
            UpstreamSessionLost("legacy server process exited with code 3"),
            "the upstream session was lost",
        ),
        (
            UpstreamProtocolError(f"Upstream {URL} sent a body that is not JSON"),
            "it answered with something that is not MCP",
        ),
        (UpstreamTimeout("slow"), "it did not answer in time"),
        (UpstreamUnavailable("Cannot start legacy stdio server"), "it is unavailable"),
        (
            mapped(certificate_error(20, "unable to get local issuer certificate")),
            "its TLS certificate is not signed by a CA the bridge trusts: add the CA with "
            "SSL_CERT_FILE",
        ),
        (
            mapped(certificate_error(62, "Hostname mismatch, certificate is not valid for 'x'.")),
            "its TLS certificate is for another host name or address",
        ),
        (
            mapped(certificate_error(10, "certificate has expired")),
            "its TLS certificate has expired",
        ),
        (
            mapped(certificate_error(26, "unsupported certificate purpose")),
            "its TLS certificate was refused",
        ),
        (
            mapped(tls_alert("TLSV13_ALERT_CERTIFICATE_REQUIRED")),
            "it asks for a TLS client certificate: set upstream.tls_client_cert",
        ),
        (
            mapped(tls_alert("SSLV3_ALERT_BAD_CERTIFICATE")),
            "it refused the bridge's TLS client certificate",
        ),
        (mapped(tls_alert("WRONG_VERSION_NUMBER")), "the TLS handshake failed"),
        (
            mapped(aiohttp.ClientConnectionResetError("Cannot write to closing transport")),
            "it closed the connection without answering",
        ),
    ],
)
def test_plain_reason_says_what_happened_without_addresses(error: BridgeError, reason: str) -> None:
    assert plain_reason(error) == reason
    assert "10.1.2.3" not in reason and "Error" not in reason and "Upstream" not in reason


def test_dns_failure_is_named() -> None:
    key = aiohttp.client_reqrep.ConnectionKey("nowhere.invalid", 80, False, True, None, None, None)
    dns = aiohttp.ClientConnectorDNSError(key, socket.gaierror(-2, "Name or service not known"))
    assert plain_reason(mapped(dns)) == "cannot connect: the host name does not resolve"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (mapped(connector_error(errno.ECONNREFUSED)), "cannot connect: connection refused"),
        (mapped(aiohttp.ServerDisconnectedError()), "it closed the connection without answering"),
        (mapped(TimeoutError()), "it did not answer initialize in time"),
        (
            mapped(tls_alert("TLSV13_ALERT_CERTIFICATE_REQUIRED")),
            "it asks for a TLS client certificate: set upstream.tls_client_cert",
        ),
        (
            mapped(UpstreamProtocolError("sent a message that is not JSON")),
            "it sent a message that is not JSON",
        ),
    ],
)
def test_a_mapped_fault_tells_the_client_why_without_addresses(
    error: BridgeError, reason: str
) -> None:
    assert isinstance(error, UpstreamUnavailable | UpstreamTimeout | UpstreamProtocolError)
    assert error.reason == reason and URL in error.message


@pytest.mark.parametrize(
    ("url", "likely"),
    [
        ("http://127.0.0.1:8931", "http://127.0.0.1:8931/mcp"),
        ("http://127.0.0.1:8931/", "http://127.0.0.1:8931/mcp"),
        ("http://u:pw@h:1/api?k=1", "http://h:1/api/mcp"),
        ("http://h/api/sse", "http://h/api/mcp"),
        ("http://h/mcp/", "http://h/sse"),
    ],
)
def test_the_likely_endpoint_is_the_sdks_path(url: str, likely: str) -> None:
    assert likely_endpoint(url) == likely


def test_a_404_to_a_sessions_opening_names_the_likely_endpoint() -> None:
    """The client and `/readyz` get the path's end only; the log gets the whole URL."""
    refused = UpstreamRefused(f"Upstream {URL} answered initialize with HTTP 404", status=404)
    named = missing_endpoint("http://10.1.2.3:8931", refused)
    assert named.likely == "http://10.1.2.3:8931/mcp"
    assert named.message.endswith("; did you mean http://10.1.2.3:8931/mcp?")
    hint = "no MCP endpoint at that path (it answered HTTP 404); did you mean .../mcp?"
    assert named.reason == plain_reason(named) == hint
    other = UpstreamRefused("answered initialize with HTTP 400", status=400)
    assert missing_endpoint(URL, other) is other and other.likely is None
