"""`upstream.proxy`: which forward proxy the bridge's requests to the upstream go through
(proxy/upstream/http/outbound.py). `"env"` reads the environment as curl and the `mcp` Python SDK
(httpx) do; the settings refuse what is not a proxy; a proxy's credentials become
`Proxy-Authorization` and are never logged. A real proxy end to end:
tests/integration/lb/test_forward_proxy.py."""

from __future__ import annotations

import os
import urllib.request
from unittest import mock

import aiohttp
import pytest
import structlog.testing
from yarl import URL

from config.settings import Settings, UpstreamSettings
from proxy.upstream.http.outbound import log_upstream_proxy, proxy_for, upstream_client

UPSTREAM = "http://mcp.internal:8931/mcp"
HTTPS_UPSTREAM = "https://mcp.example.com/mcp"


@pytest.mark.parametrize(
    ("url", "environ", "proxy"),
    [
        (UPSTREAM, {}, None),
        (UPSTREAM, {"http_proxy": "http://p:3128"}, "http://p:3128"),
        (UPSTREAM, {"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
        (
            UPSTREAM,
            {"http_proxy": "http://lower:1", "HTTP_PROXY": "http://upper:2"},
            "http://lower:1",
        ),
        (UPSTREAM, {"https_proxy": "http://p:3128"}, None),  # by the upstream URL's scheme
        (HTTPS_UPSTREAM, {"HTTPS_PROXY": "http://p:3128"}, "http://p:3128"),
        (UPSTREAM, {"ALL_PROXY": "http://all:1"}, "http://all:1"),
        (UPSTREAM, {"http_proxy": "http://p:1", "all_proxy": "http://all:1"}, "http://p:1"),
        (UPSTREAM, {"http_proxy": "p.internal:3128"}, "http://p.internal:3128"),  # as curl reads it
        (UPSTREAM, {"http_proxy": "  "}, None),
        (UPSTREAM, {"http_proxy": "http://p:1", "no_proxy": "*"}, None),
        (UPSTREAM, {"http_proxy": "http://p:1", "NO_PROXY": "mcp.internal"}, None),
        (UPSTREAM, {"http_proxy": "http://p:1", "no_proxy": "", "NO_PROXY": "*"}, "http://p:1"),
        (UPSTREAM, {"http_proxy": "", "HTTP_PROXY": "http://upper:2"}, None),  # empty unsets
        (UPSTREAM, {"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "GET"}, None),  # httpoxy
        (UPSTREAM, {"http_proxy": "http://p:1", "REQUEST_METHOD": "GET"}, "http://p:1"),
        (UPSTREAM, {"http_proxy": "http://p:1", "no_proxy": "a.test, .internal"}, None),
        (UPSTREAM, {"http_proxy": "http://p:1", "no_proxy": "internal"}, None),
        (UPSTREAM, {"http_proxy": "http://p:1", "no_proxy": "mcp.internal:8931"}, None),
        (UPSTREAM, {"http_proxy": "http://p:1", "no_proxy": "cp.internal"}, "http://p:1"),
        (UPSTREAM, {"http_proxy": "http://p:1", "no_proxy": "mcp.internal.evil"}, "http://p:1"),
        ("http://127.0.0.1:8931/mcp", {"http_proxy": "http://p:1", "no_proxy": "127.0.0.1"}, None),
    ],
)
def test_env_reads_the_environment_as_curl_and_httpx_do(
    url: str, environ: dict[str, str], proxy: str | None
) -> None:
    assert proxy_for("env", url, environ) == proxy


def test_none_and_an_explicit_proxy_ignore_the_environment() -> None:
    environ = {"http_proxy": "http://env:1", "no_proxy": "mcp.internal"}
    assert proxy_for("none", UPSTREAM, environ) is None
    assert proxy_for("http://named:3128", UPSTREAM, environ) == "http://named:3128"


def test_a_proxy_aiohttp_cannot_speak_is_warned_about_and_passed_by() -> None:
    """`all_proxy=socks5://...` set for other tools: the bridge connects directly and says so,
    without the proxy's credentials."""
    with structlog.testing.capture_logs() as logs:
        chosen = proxy_for("env", UPSTREAM, {"ALL_PROXY": "socks5://user:secret@s:1080"})
        again = proxy_for("env", UPSTREAM, {"ALL_PROXY": "socks5://user:secret@s:1080"})
    assert chosen is None and again is None
    assert [(e["event"], e["proxy"]) for e in logs] == [
        ("upstream_proxy_unsupported", "socks5://s:1080")
    ]


@pytest.mark.parametrize(
    "value", ["socks5://s:1080", "ftp://p:21", "proxy:3128", "http://", "environment"]
)
def test_the_setting_refuses_what_is_not_a_proxy(value: str) -> None:
    with pytest.raises(ValueError, match="allowed: env, none, or an http:// or https:// proxy URL"):
        UpstreamSettings(url=UPSTREAM, proxy=value)


async def test_a_proxys_credentials_become_proxy_authorization_and_are_never_logged() -> None:
    settings = UpstreamSettings(url=UPSTREAM, proxy="http://bridge:s3cret@p.internal:3128")
    client = upstream_client(settings, environ={})
    try:
        assert client._default_proxy == URL("http://p.internal:3128")
        assert client._default_proxy_auth == aiohttp.BasicAuth("bridge", "s3cret")
    finally:
        await client.close()
    direct = upstream_client(UpstreamSettings(url=UPSTREAM, proxy="none"), environ={})
    try:
        assert direct._default_proxy is None and direct._default_proxy_auth is None
    finally:
        await direct.close()
    with structlog.testing.capture_logs() as logs:
        log_upstream_proxy(settings, environ={})
        log_upstream_proxy(UpstreamSettings(url=UPSTREAM), environ={"HTTP_PROXY": "http://e:1"})
        log_upstream_proxy(UpstreamSettings(url=UPSTREAM), environ={})
    assert [(entry["event"], entry["proxy"]) for entry in logs] == [
        ("upstream_proxy", "http://p.internal:3128 (upstream.proxy)"),
        ("upstream_proxy", "http://e:1 (environment)"),
    ]


def test_the_default_is_the_environment() -> None:
    assert Settings.model_validate({"upstream": {"url": UPSTREAM}}).upstream.proxy == "env"


@pytest.mark.parametrize(
    "environ",
    [
        {"http_proxy": "http://p:1"},
        {"HTTP_PROXY": "http://p:1", "http_proxy": ""},
        {"HTTP_PROXY": "http://p:1", "no_proxy": "internal"},
        {"http_proxy": "http://p:1", "NO_PROXY": "*", "no_proxy": ""},
        {"http_proxy": "http://p:1", "no_proxy": "other.test,.mcp.internal"},
        {"http_proxy": "http://p:1", "no_proxy": "mcp.internal:9999"},
        {"https_proxy": "http://p:1"},
        {"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "POST"},
    ],
)
def test_env_agrees_with_the_standard_library(environ: dict[str, str]) -> None:
    """What httpx (and so the `mcp` Python SDK) asks the standard library, for the same
    environment and URL (`all_proxy` aside: the standard library leaves it to its callers)."""
    with mock.patch.dict(os.environ, environ, clear=True):
        proxies = urllib.request.getproxies_environment()
        bypassed = urllib.request.proxy_bypass_environment("mcp.internal:8931", proxies)  # type: ignore[attr-defined]
    expected = None if bypassed else proxies.get("http")
    assert proxy_for("env", UPSTREAM, environ) == expected


@pytest.mark.parametrize(
    ("url", "proxy", "reused"),
    [
        (UPSTREAM, "http://p:3128", False),  # the proxy reads each request: one per connection
        (HTTPS_UPSTREAM, "http://p:3128", True),  # a CONNECT tunnel the proxy does not read
        (UPSTREAM, "none", True),
    ],
)
async def test_connections_are_reused_unless_a_proxy_reads_the_requests(
    url: str, proxy: str, reused: bool
) -> None:
    client = upstream_client(UpstreamSettings(url=url, proxy=proxy), environ={})
    try:
        assert client.connector is not None
        assert client.connector.force_close is not reused
        assert client.connector.limit == 0
    finally:
        await client.close()
