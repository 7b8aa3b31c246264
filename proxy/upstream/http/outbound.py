"""The bridge's HTTP clients to its upstream: the forward proxy they go through (`upstream.proxy`;
docs/operations.md, "Behind a forward proxy"), their TLS context (`upstream.tls_*`) and the
headers every request carries (`upstream.headers`).

A legacy client used directly through the `mcp` Python SDK (httpx) reaches its server through the
proxy its environment names, as the standard library reads it: `https_proxy` or `http_proxy` by
the URL's scheme, else `all_proxy` (each in lower case when set, even empty, else upper case),
unless `no_proxy` names the host (`*` for every host). The bridge does the same by default
(`"env"`), decided once per client for `upstream.url`; `"none"` connects directly whatever the
environment says, and a URL names the proxy itself. aiohttp's own `trust_env` is not used: it
would hop to a thread twice per request (for the environment, and for `~/.netrc` credentials that
would clash with a forwarded `Authorization`). Only http:// and https:// proxies are spoken
(aiohttp's); another scheme in the environment (socks5://, say) is warned about and the bridge
connects directly. A proxy's credentials go in `Proxy-Authorization` and are never logged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import structlog
from yarl import URL

from config.settings import UpstreamSettings
from config.tls import tls_context
from proxy.common.shown import shown_uri

_log = structlog.get_logger("proxy.upstream.http.outbound")
PROXY_SCHEMES: Final = ("http", "https")
_WARNED: set[str] = set()  # unsupported proxies already warned about


def proxy_for(setting: str, url: str, environ: Mapping[str, str]) -> str | None:
    """The proxy requests to `url` go through, or None for a direct connection."""
    if setting == "none":
        return None
    if setting != "env":
        return setting
    parts = urlsplit(url)
    proxy = _variable(environ, f"{parts.scheme.lower()}_proxy") or _variable(environ, "all_proxy")
    if proxy is None:
        return None
    no_proxy = _variable(environ, "no_proxy")
    if no_proxy is not None and _bypassed(parts.netloc.rpartition("@")[2], no_proxy):
        return None
    proxy = proxy if "://" in proxy else f"http://{proxy}"  # `proxy:3128`, as curl reads it
    if urlsplit(proxy).scheme.lower() not in PROXY_SCHEMES:
        if proxy not in _WARNED:  # once, not once per client made
            _WARNED.add(proxy)
            _log.warning(
                "upstream_proxy_unsupported", proxy=shown_uri(proxy), schemes="http, https"
            )
        return None
    return proxy


def _variable(environ: Mapping[str, str], name: str) -> str | None:
    """`name` as the standard library reads it for httpx: the lower-case variable when it is set,
    even empty (which unsets it), else the upper-case one; `HTTP_PROXY` is ignored under CGI
    (`REQUEST_METHOD` set: a request's `Proxy:` header could name it)."""
    if name in environ:
        value = environ[name]
    elif name.upper() in environ and not (name == "http_proxy" and "REQUEST_METHOD" in environ):
        value = environ[name.upper()]
    else:
        return None
    return value.strip() or None


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether `no_proxy` names `host` (`host[:port]`), read as the standard library, httpx and
    requests read it: `*` is every host; a name (a leading dot ignored) matches itself and its
    subdomains, with or without the port."""
    if no_proxy.strip() == "*":
        return True
    host = host.lower()
    hostname = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    for name in (part.strip().lstrip(".").lower() for part in no_proxy.split(",")):
        if name and any(h == name or h.endswith(f".{name}") for h in (hostname, host)):
            return True
    return False


def upstream_client(
    settings: UpstreamSettings,
    environ: Mapping[str, str] | None = None,
    *,
    keepalive_s: float = 15.0,
    **options: Any,
) -> aiohttp.ClientSession:
    """An aiohttp client for requests to `settings.url`, through the proxy `upstream.proxy`
    chooses, with the TLS context the `upstream.tls_*` settings make (config/tls.py) and the
    `upstream.headers` on every request (a request's own header of the same name wins), no bound on
    connections (a pool or a caller bounds its own), idle ones closed after `keepalive_s` (15 s is
    aiohttp's default); `options` are `aiohttp.ClientSession`'s.

    An http:// upstream's requests through a proxy reuse no connection: proxies differ in keeping
    a client's connection open (tinyproxy closes it after each response without saying so), and
    a request sent on a connection the proxy has just closed fails. An https:// upstream's go
    through a `CONNECT` tunnel, which the proxy does not read: its connections are kept as the
    server keeps them."""
    environ = os.environ if environ is None else environ
    proxy = proxy_for(settings.proxy, settings.url or "", environ)
    tls = tls_context(settings) or True  # True: aiohttp's default context
    if proxy is not None and urlsplit(settings.url or "").scheme.lower() == "http":
        connector = aiohttp.TCPConnector(limit=0, force_close=True, ssl=tls)
    else:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=keepalive_s, ssl=tls)
    headers = settings.headers or None  # `upstream.headers`, on every request
    if proxy is None:
        return aiohttp.ClientSession(connector=connector, headers=headers, **options)
    url = URL(proxy)
    auth = aiohttp.BasicAuth(url.user or "", url.password or "") if url.user else None
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        proxy=url.with_user(None),
        proxy_auth=auth,
        **options,
    )


def proxy_named(settings: UpstreamSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy the upstream is reached through, as logs and `check` show it (no credentials),
    with who chose it; None for a direct connection."""
    if settings.url is None:
        return None
    proxy = proxy_for(settings.proxy, settings.url, os.environ if environ is None else environ)
    if proxy is None:
        return None
    source = "environment" if settings.proxy == "env" else "upstream.proxy"
    return f"{shown_uri(proxy)} ({source})"


def log_upstream_proxy(
    settings: UpstreamSettings, environ: Mapping[str, str] | None = None
) -> None:
    """Say once, at start, which proxy the upstream is reached through."""
    named = proxy_named(settings, environ)
    if named is not None:
        _log.info("upstream_proxy", proxy=named)


__all__ = ["log_upstream_proxy", "proxy_for", "proxy_named", "upstream_client"]
