"""The TLS context of the bridge's requests to an https upstream: the CAs `upstream.tls_ca_file`
names instead of the system's, and the client certificate `upstream.tls_client_cert` presents
(docs/operations.md, "An https upstream"). Loaded once at start-up to check the files
(config/loader.py), then once per upstream HTTP client (proxy/upstream/http/outbound.py)."""

from __future__ import annotations

import ssl

from config.settings import UpstreamSettings


def tls_context(upstream: UpstreamSettings) -> ssl.SSLContext | None:
    """The context for the upstream; None when no TLS setting is given (aiohttp's default one,
    which trusts the system's CAs and `SSL_CERT_FILE`)."""
    if upstream.tls_ca_file is None and upstream.tls_client_cert is None:
        return None
    context = ssl.create_default_context(cafile=upstream.tls_ca_file)
    if upstream.tls_client_cert is not None:
        context.load_cert_chain(upstream.tls_client_cert, upstream.tls_client_key)
    return context


__all__ = ["tls_context"]
