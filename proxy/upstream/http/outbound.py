"""The bridge's HTTP clients to its upstream: the forward proxy they go through (`upstream.proxy`;
docs/operations.md, "Behind a forward proxy"), their TLS context (`upstream.tls_*`), the
headers every request carries (`upstream.headers`), and where they may send: the redirect rule.

Every HTTP client to the upstream is made by `upstream_client` (tests/unit/test_layering.py checks
that no other module makes one), and every request it sends passes `redirect_guard`
(docs/security.md, "Upstream redirects"): a request goes only to the origin (scheme, host, port)
of `upstream.url`, and a redirect is followed only within it, and only a 307 or 308 (which send
the method and body again) or a redirect of a GET; anything else is refused before a byte goes to
the target, as `UpstreamRedirected` naming the target (`shown_uri`) in the log and only the reason
to the client. aiohttp stops a chain of followed redirects at 10 (`proxy.upstream.errors` maps
it). nginx, HAProxy and Envoy never follow an upstream's redirect with its credentials either.

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
from aiohttp import hdrs
from yarl import URL

from config.settings import UpstreamSettings
from config.tls import tls_context
from proxy.common.shown import shown_uri
from translators.wire.errors import UpstreamRedirected

_log = structlog.get_logger("proxy.upstream.http.outbound")
PROXY_SCHEMES: Final = ("http", "https")
_WARNED: set[str] = set()  # unsupported proxies already warned about
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})  # what aiohttp would follow
KEEPING_STATUSES: Final = frozenset({307, 308})  # the method and body are sent again, unchanged
_SAFE_METHODS: Final = frozenset({"GET", "HEAD"})  # a 301/302/303 keeps these as they are
Origin = tuple[str, str | None, int | None]


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


def origin_of(url: str | URL) -> Origin:
    """(scheme, host, port), the default port made explicit: what "the same origin" compares."""
    parsed = URL(url)
    return parsed.scheme.lower(), parsed.host, parsed.port


def redirect_refusal(
    method: str, response: aiohttp.ClientResponse, origin: Origin
) -> UpstreamRedirected | None:
    """Why the redirect `response` to `method` must not be followed, or None: its `Location` is
    off `origin` (or no URL), or a 301/302/303 would turn a request other than a GET into a GET.
    Without a `Location` there is nothing to follow: the caller sees the status."""
    location = response.headers.get(hdrs.LOCATION)
    if location is None:
        return None
    try:
        target: URL | None = response.url.join(URL(location))
    except ValueError:
        target = None
    where = (
        shown_uri(str(target))
        if target is not None and target.is_absolute()
        else "a malformed Location"
    )
    upstream = shown_uri(str(response.url))
    if target is None or origin_of(target) != origin:
        return UpstreamRedirected(
            f"Upstream {upstream} redirected {method} to {where}, another origin: the bridge never"
            " follows a redirect off the origin of upstream.url; set upstream.url to the final URL",
            where,
        )
    if response.status not in KEEPING_STATUSES and method not in _SAFE_METHODS:
        return UpstreamRedirected(
            f"Upstream {upstream} answered {method} with HTTP {response.status} to {where}, which"
            " would turn it into a GET: the bridge follows only 307 and 308; set upstream.url to"
            " the final URL",
            where,
            public=f"The upstream server redirected the request with HTTP {response.status},"
            " which the bridge does not follow",
        )
    return None


def redirect_guard(upstream_url: str) -> aiohttp.ClientMiddlewareType:
    """The client middleware that holds every request of an upstream client to the redirect rule
    (module docstring): a request off the origin of `upstream_url` is never sent, and a redirect
    `redirect_refusal` finds fault with is closed and raised as `UpstreamRedirected`, so aiohttp
    never follows it."""
    origin = origin_of(upstream_url)

    async def guard(
        request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        if origin_of(request.url) != origin:
            where = shown_uri(str(request.url))
            _log.warning("upstream_redirect_refused", to=where, reason="off upstream.url's origin")
            raise UpstreamRedirected(f"A request to {where}, off upstream.url's origin", where)
        response = await handler(request)
        if response.status in REDIRECT_STATUSES:
            refusal = redirect_refusal(request.method, response, origin)
            if refusal is not None:
                response.close()
                _log.warning(
                    "upstream_redirect_refused",
                    url=shown_uri(str(response.url)),
                    status=response.status,
                    to=refusal.target,
                )
                raise refusal
        return response

    return guard


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
    aiohttp's default), every request held to the redirect rule (`redirect_guard`); `options` are
    `aiohttp.ClientSession`'s.

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
    guard = (redirect_guard(settings.url),) if settings.url else ()
    if proxy is None:
        return aiohttp.ClientSession(
            connector=connector, headers=headers, middlewares=guard, **options
        )
    url = URL(proxy)
    auth = aiohttp.BasicAuth(url.user or "", url.password or "") if url.user else None
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        proxy=url.with_user(None),
        proxy_auth=auth,
        middlewares=guard,
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


__all__ = [
    "KEEPING_STATUSES",
    "REDIRECT_STATUSES",
    "Origin",
    "log_upstream_proxy",
    "origin_of",
    "proxy_for",
    "proxy_named",
    "redirect_guard",
    "redirect_refusal",
    "upstream_client",
]
