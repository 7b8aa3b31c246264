"""Public URLs and Protected Resource Metadata (translators/auth/public_urls.py,
translators/auth/oauth.py)."""

from __future__ import annotations

import json

import pytest

from translators.auth.oauth import (
    MAX_METADATA_BYTES,
    ChallengeReply,
    MetadataRefused,
    UpstreamAuthChallenge,
    challenge_reply,
    metadata_from_issuer,
    relay_metadata,
)
from translators.auth.public_urls import PublicUrls, origin_of, public_endpoint, split_url
from translators.wire.errors import INVALID_REQUEST, UpstreamFault

URLS = PublicUrls("https://bridge.example/mcp", "http://10.0.0.5:8931/mcp")


@pytest.mark.parametrize(
    ("public_url", "host", "port", "path", "expected"),
    [
        (None, "127.0.0.1", 8080, "/mcp", "http://127.0.0.1:8080/mcp"),
        (None, "0.0.0.0", 8080, "/mcp", "http://127.0.0.1:8080/mcp"),
        (None, "::", 9000, "/mcp", "http://[::1]:9000/mcp"),
        (None, "::1", 9000, "/mcp", "http://[::1]:9000/mcp"),
        ("https://MCP.Example.com", "127.0.0.1", 8080, "/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/", "127.0.0.1", 8080, "/mcp", "https://mcp.example.com/mcp"),
        (
            "https://mcp.example.com:443/tools/mcp/",
            "127.0.0.1",
            8080,
            "/mcp",
            "https://mcp.example.com/tools/mcp",
        ),
        (
            "http://mcp.example.com:8443/mcp",
            "127.0.0.1",
            8080,
            "/mcp",
            "http://mcp.example.com:8443/mcp",
        ),
    ],
)
def test_public_endpoint_comes_from_the_setting_or_the_listen_address(
    public_url: str | None, host: str, port: int, path: str, expected: str
) -> None:
    assert public_endpoint(public_url, host, port, path) == expected


def test_metadata_urls_and_local_paths() -> None:
    assert URLS.metadata_url == "https://bridge.example/.well-known/oauth-protected-resource/mcp"
    assert URLS.metadata_paths("/mcp") == (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    )
    behind_proxy = PublicUrls("https://x.example/tools/mcp", "http://u/mcp")
    assert behind_proxy.metadata_paths("/mcp") == (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/tools/mcp",
        "/.well-known/oauth-protected-resource/mcp",
    )
    assert URLS.upstream_metadata_urls == (
        "http://10.0.0.5:8931/.well-known/oauth-protected-resource/mcp",
        "http://10.0.0.5:8931/.well-known/oauth-protected-resource",
    )
    assert PublicUrls("https://b/mcp", "http://u:1/").upstream_metadata_urls == (
        "http://u:1/.well-known/oauth-protected-resource",
    )
    assert (
        URLS.upstream_issuer_metadata_url
        == "http://10.0.0.5:8931/.well-known/oauth-authorization-server"
    )


@pytest.mark.parametrize(
    "url",
    [
        "ftp://a/b",
        "http://",
        "http://:80/",
        "http://a:x/",
        "http://[::1/",
        "//a/b",
        "mailto:a@b",
        "http://a b/",
        "",
    ],
)
def test_split_url_refuses_what_is_not_an_http_url(url: str) -> None:
    assert split_url(url) is None
    assert origin_of(url) is None


def test_origin_drops_userinfo_and_default_ports() -> None:
    assert origin_of("HTTPS://user:pw@Example.COM:443/x?y#z") == "https://example.com"
    assert origin_of("http://[::1]:80/") == "http://[::1]"


@pytest.mark.parametrize(
    "resource",
    [
        "http://10.0.0.5:8931/mcp",
        "http://10.0.0.5:8931/mcp/",
        "http://10.0.0.5:8931",
        "HTTP://10.0.0.5:8931/",
        "https://bridge.example/mcp",
        "https://BRIDGE.example:443",
        "https://bridge.example/",
    ],
)
def test_metadata_of_this_server_is_relayed_with_the_bridge_as_resource(resource: str) -> None:
    document = {
        "resource": resource,
        "authorization_servers": ["https://as.example/tenant"],
        "scopes_supported": ["a", "b"],
        "resource_name": "files",
        "x-extra": {"nested": [1, 2]},
    }
    relayed = relay_metadata(json.dumps(document).encode(), URLS)
    assert relayed == {**document, "resource": "https://bridge.example/mcp"}


# another path on the bridge's origin
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {
                "resource": "https://evil.example/mcp",
                "authorization_servers": ["https://evil.example"],
            },
            "foreign",
        ),
        ({"resource": "http://10.0.0.5:8932/mcp"}, "foreign"),  # another port
        (
            {"resource": "https://bridge.example/other"},
            "foreign",
        ),
        ({"resource": "http://10.0.0.5:8931@evil.example/mcp"}, "foreign"),
        ({"authorization_servers": ["https://as.example"]}, "no resource"),
        ({"resource": ["https://bridge.example/mcp"]}, "no resource"),
        ([{"resource": "https://bridge.example/mcp"}], "not a JSON object"),
    ],
)
def test_metadata_not_about_this_server_is_refused(body: object, reason: str) -> None:
    with pytest.raises(MetadataRefused, match=reason):
        relay_metadata(json.dumps(body).encode(), URLS)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"\xff\xfe",
        b"[" * 30_000 + b"]" * 30_000,
        b'{"resource": "' + b"a" * MAX_METADATA_BYTES + b'"}',
    ],
)
def test_malformed_or_oversized_metadata_is_refused(body: bytes) -> None:
    with pytest.raises(MetadataRefused):
        relay_metadata(body, URLS)


def test_a_2025_03_26_server_is_named_by_its_issuer() -> None:
    document = {
        "issuer": "http://10.0.0.5:8931",
        "authorization_endpoint": "http://10.0.0.5:8931/authorize",
        "token_endpoint": "http://10.0.0.5:8931/token",
        "scopes_supported": ["read", "write"],
    }
    assert metadata_from_issuer(json.dumps(document).encode(), URLS) == {
        "resource": "https://bridge.example/mcp",
        "authorization_servers": ["http://10.0.0.5:8931"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["read", "write"],
    }


@pytest.mark.parametrize(
    "document",
    [
        {"issuer": "https://evil.example"},
        {"issuer": "http://10.0.0.5:8932"},
        {"issuer": 7},
        {"token_endpoint": "http://10.0.0.5:8931/token"},
    ],
)
def test_an_issuer_off_the_upstreams_origin_is_refused(document: dict[str, object]) -> None:
    with pytest.raises(MetadataRefused, match="issuer"):
        metadata_from_issuer(json.dumps(document).encode(), URLS)


def test_scopes_that_are_not_a_list_of_strings_are_left_out() -> None:
    document = {"issuer": "http://10.0.0.5:8931/", "scopes_supported": "read write"}
    assert "scopes_supported" not in metadata_from_issuer(json.dumps(document).encode(), URLS)


def test_a_challenge_becomes_a_reply_with_status_and_rewritten_header() -> None:
    raw = (
        'Bearer error="insufficient_scope", resource_metadata="http://10.0.0.5:8931/.well-known/x"'
    )
    exc = UpstreamAuthChallenge(403, raw)
    # so a held call carries it to the reply like any upstream fault
    assert isinstance(exc, UpstreamFault)
    reply = challenge_reply(exc, 7, URLS)
    assert isinstance(reply, ChallengeReply)
    assert reply.status == 403
    assert reply.www_authenticate == (
        'Bearer error="insufficient_scope", '
        'resource_metadata="https://bridge.example/.well-known/oauth-protected-resource/mcp"'
    )
    assert dict(reply) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": INVALID_REQUEST,
            "message": "Forbidden: the server requires authorization (HTTP 403); see "
            "WWW-Authenticate",
            "data": {"source": "mrtr-bridge", "httpStatus": 403},
        },
    }


def test_metadata_members_never_name_the_upstream_or_an_internal_host() -> None:
    """Issue 24 defect 9: every member but `resource` used to pass unchanged, so documentation,
    policy and key URLs reached clients with the upstream's internal address. Per member: the
    authorization servers stay (the client must reach the real one), URLs on the upstream move to
    the bridge's origin (its keys are left out: the bridge does not serve them), URLs on other
    internal hosts and the upstream's signature are left out, public URLs pass."""
    document = {
        "resource": "http://10.0.0.5:8931/mcp",
        "authorization_servers": ["http://10.0.0.6:9000/", "https://as.example/tenant"],
        "jwks_uri": "http://10.0.0.5:8931/jwks.json",
        "resource_documentation": "http://localhost:8931/docs",
        "resource_policy_uri": "http://10.0.0.5:8931/policy?lang=en",
        "resource_tos_uri": "http://wiki.corp.internal/tos",
        "resource_name": "files at http://10.0.0.5:8931/mcp",
        "resource_description": "mirrored from http://files.internal/",
        "scopes_supported": ["files:read", "files:write"],
        "bearer_methods_supported": ["header"],
        "signed_metadata": "eyJhbGciOiJSUzI1NiJ9.eyJyZXNvdXJjZSI6Imh0dHAifQ.c2ln",
        "x-links": {
            "status": ["https://status.example/mcp", "http://10.0.0.5:8931/status", "http://x/"]
        },
    }
    relayed = relay_metadata(json.dumps(document).encode(), URLS)
    assert relayed == {
        "resource": "https://bridge.example/mcp",
        "authorization_servers": ["http://10.0.0.6:9000/", "https://as.example/tenant"],
        "resource_policy_uri": "https://bridge.example/policy?lang=en",
        "resource_name": "files at https://bridge.example/mcp",
        "scopes_supported": ["files:read", "files:write"],
        "bearer_methods_supported": ["header"],
        "x-links": {"status": ["https://status.example/mcp", "https://bridge.example/status"]},
    }
    assert "10.0.0.5" not in json.dumps(relayed) and "internal" not in json.dumps(relayed)


def test_a_loopback_upstream_is_recognised_in_metadata_however_it_is_spelled() -> None:
    urls = PublicUrls("https://bridge.example/mcp", "http://127.0.0.1:8931/mcp")
    document = {
        "resource": "http://localhost:8931/mcp",
        "resource_documentation": "http://[::1]:8931/docs",
        "jwks_uri": "https://keys.example/jwks",
    }
    assert relay_metadata(json.dumps(document).encode(), urls) == {
        "resource": "https://bridge.example/mcp",
        "resource_documentation": "https://bridge.example/docs",
        "jwks_uri": "https://keys.example/jwks",
    }


def test_metadata_nested_past_the_recursion_limit_is_refused() -> None:
    body = b'{"resource": "http://10.0.0.5:8931/mcp", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(MetadataRefused):
        relay_metadata(body, URLS)
