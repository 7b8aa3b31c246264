"""`WWW-Authenticate` parsing and rewriting (translators/auth/challenges.py), hostile input
included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from translators.auth.challenges import (
    MAX_CHALLENGE_CHARS,
    MAX_PARAMS,
    Challenge,
    MalformedChallenge,
    is_auth_challenge,
    is_step_up,
    parse_challenges,
    rewrite_challenge,
    serialize_challenges,
)
from translators.auth.public_urls import PublicUrls

URLS = PublicUrls("https://bridge.example/mcp", "http://10.0.0.5:8931/mcp")
OWN = 'resource_metadata="https://bridge.example/.well-known/oauth-protected-resource/mcp"'
MINIMAL = f"Bearer {OWN}"


def test_parses_params_token68_and_several_challenges() -> None:
    value = (
        'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple", '
        "Negotiate abc+/=="
    )
    assert parse_challenges(value) == [
        Challenge("Newauth", [("realm", "apps"), ("type", "1"), ("title", 'Login to "apps"')]),
        Challenge("Basic", [("realm", "simple")]),
        Challenge("Negotiate", [], "abc+/=="),
    ]


def test_serialize_quotes_and_escapes_and_reads_back() -> None:
    challenges = [
        Challenge("Bearer", [("error", "invalid_token"), ("error_description", 'say "hi" \\ bye')])
    ]
    text = serialize_challenges(challenges)
    assert text == 'Bearer error="invalid_token", error_description="say \\"hi\\" \\\\ bye"'
    assert parse_challenges(text) == challenges


def test_resource_metadata_on_the_upstream_origin_names_the_bridge() -> None:
    value = (
        'Bearer error="invalid_token", scope="files:read files:write", '
        'resource_metadata="http://10.0.0.5:8931/.well-known/oauth-protected-resource/mcp"'
    )
    assert (
        rewrite_challenge(value, URLS)
        == f'Bearer error="invalid_token", scope="files:read files:write", {OWN}'
    )


@pytest.mark.parametrize(
    "spelling", ["HTTP://10.0.0.5:8931", "http://10.0.0.5:8931", "http://user@10.0.0.5:8931"]
)
def test_the_upstream_origin_is_recognised_however_it_is_spelled(spelling: str) -> None:
    value = (
        f'Bearer resource_metadata="{spelling}/.well-known/oauth-protected-resource", '
        f'uri="{spelling}/a/b?c=d"'
    )
    assert rewrite_challenge(value, URLS) == f'Bearer {OWN}, uri="https://bridge.example/a/b?c=d"'


@pytest.mark.parametrize(
    "url",
    [
        "https://as.example/.well-known/oauth-protected-resource",
        "http://10.0.0.5:8932/x",
        "http://localhost:8931/.well-known/oauth-protected-resource/mcp",
        "http://mcp-upstream.internal/.well-known/oauth-protected-resource",
        "not a url",
        "",
    ],
)
def test_resource_metadata_always_names_the_bridge(url: str) -> None:
    """Issue 24 defect 8: whatever origin or spelling the upstream uses, the client is sent to the
    bridge's own metadata (which relays the upstream's document)."""
    assert rewrite_challenge(f'Bearer resource_metadata="{url}"', URLS) == MINIMAL


@pytest.mark.parametrize(
    "url",
    [
        # another public site: left as the upstream said
        "https://as.example/.well-known/oauth-protected-resource",
        "http://10.0.0.5:8931@evil.example/x",  # userinfo trick: the host is evil.example
        "http://10.0.0.5.evil.example:8931/x",
        "not a url",
    ],
)
def test_other_public_urls_pass_unchanged(url: str) -> None:
    assert rewrite_challenge(f'Bearer uri="{url}"', URLS) == f'Bearer uri="{url}", {OWN}'


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5:8932/x",  # another port of the upstream's (private) host
        "https://10.0.0.5:8931/x",  # another scheme too
        "http://192.168.1.9/login",
        "http://localhost:9000/x",
        "http://[::1]/x",
        "http://mcp-upstream/x",  # a single-label (cluster or LAN) name
        "http://auth.corp.internal/x",
        "http://mcp.default.svc/x",
        "http://printer.local/x",
    ],
)
def test_urls_on_other_internal_hosts_are_left_out(url: str) -> None:
    value = f'Bearer error="invalid_token", uri="{url}", realm="mcp"'
    assert rewrite_challenge(value, URLS) == f'Bearer error="invalid_token", realm="mcp", {OWN}'


def test_another_loopback_spelling_of_a_loopback_upstream_is_the_upstream() -> None:
    """`localhost:<port>` and `[::1]:<port>` name a `127.0.0.1:<port>` upstream: moved, not
    dropped."""
    urls = PublicUrls("https://bridge.example/mcp", "http://127.0.0.1:8931/mcp")
    value = 'Bearer uri="http://localhost:8931/a?b", other="http://[::1]:8931/c"'
    expected = f'Bearer uri="https://bridge.example/a?b", other="https://bridge.example/c", {OWN}'
    assert rewrite_challenge(value, urls) == expected


def test_internal_hosts_stay_when_the_bridge_itself_is_on_an_internal_network() -> None:
    """A bridge whose public URL is on a private host serves clients on that network: only the
    upstream's own URLs are moved."""
    urls = PublicUrls("http://10.1.0.9:8080/mcp", "http://10.0.0.5:8931/mcp")
    value = 'Bearer uri="http://10.0.0.7/login", doc="http://10.0.0.5:8931/doc"'
    assert rewrite_challenge(value, urls) == (
        'Bearer uri="http://10.0.0.7/login", doc="http://10.1.0.9:8080/doc", '
        'resource_metadata="http://10.1.0.9:8080/.well-known/oauth-protected-resource/mcp"'
    )


def test_a_bearer_challenge_without_metadata_gets_the_bridges() -> None:
    assert rewrite_challenge('Bearer realm="mcp"', URLS) == f'Bearer realm="mcp", {OWN}'
    assert rewrite_challenge("Bearer", URLS) == MINIMAL


def test_other_schemes_pass_unchanged() -> None:
    value = 'Basic realm="legacy", DPoP algs="ES256"'
    assert rewrite_challenge(value, URLS) == value


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ,  ,",
        'Bearer realm="unterminated',
        'Bearer realm="x"\r\nSet-Cookie: a=b',  # header injection
        'Bearer realm="x\x00"',
        'Bearer realm="caf\u00e9"',  # not ASCII
        "Bearer a=b c",  # junk after a param
        "Bearer =b",
        "Bearer a=",
        'Bearer a="x" b="y"',  # missing comma
        "Bearer " + "x" * (MAX_CHALLENGE_CHARS + 1),  # oversized
        "Bearer " + ", ".join(f"p{i}=v" for i in range(MAX_PARAMS + 1)),  # too many params
        "(Bearer)",
    ],
)
def test_malformed_or_oversized_challenges_become_a_minimal_one(value: str | None) -> None:
    assert rewrite_challenge(value, URLS) == MINIMAL


def test_a_rewrite_that_would_grow_past_the_limit_falls_back() -> None:
    """Short upstream URLs rewritten to a long public origin could push a legal header past the
    limit."""
    urls = PublicUrls("https://" + "b" * 200 + ".example/mcp", "http://u:1/mcp")
    value = "Bearer " + ", ".join(f'u{i}="http://u:1/"' for i in range(30))
    assert len(value) < MAX_CHALLENGE_CHARS
    assert rewrite_challenge(value, urls) == f'Bearer resource_metadata="{urls.metadata_url}"'


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_gives_a_safe_header(value: str) -> None:
    """Whatever the upstream sends, the rewrite never raises and is one line of visible ASCII."""
    text = rewrite_challenge(value, URLS)
    assert len(text) <= MAX_CHALLENGE_CHARS
    assert all(char == "\t" or 0x20 <= ord(char) <= 0x7E for char in text)
    assert parse_challenges(text)


@pytest.mark.parametrize(
    ("status", "value", "expected"),
    [
        (403, 'Bearer error="insufficient_scope", scope="admin"', True),
        (403, "Bearer error=insufficient_scope", True),
        (403, 'Basic realm="x", Bearer error="insufficient_scope"', True),
        (403, 'Bearer error="invalid_token"', False),
        (403, 'Basic error="insufficient_scope"', False),
        (403, 'Bearer error="INSUFFICIENT_SCOPE"', False),
        (403, 'Bearer error="insufficient_scope', False),  # malformed
        (403, None, False),
        (401, 'Bearer error="insufficient_scope"', False),
    ],
)
def test_step_up_is_a_403_with_a_bearer_insufficient_scope(
    status: int, value: str | None, expected: bool
) -> None:
    assert is_step_up(status, value) is expected


@pytest.mark.parametrize(
    ("status", "value", "expected"),
    [
        (401, None, True),
        (401, "garbage (((", True),
        (403, 'Bearer error="insufficient_scope"', True),
        (403, None, False),
        (400, 'Bearer error="invalid_request"', False),
        (500, 'Bearer error="insufficient_scope"', False),
    ],
)
def test_which_refusals_are_challenges(status: int, value: str | None, expected: bool) -> None:
    assert is_auth_challenge(status, value) is expected


def test_parse_rejects_an_empty_list() -> None:
    with pytest.raises(MalformedChallenge):
        parse_challenges(" , ")


def test_urls_inside_prose_follow_the_same_rules() -> None:
    """An `error_description` naming the upstream gets the public origin; one naming another
    internal host is left out; public URLs in prose stay."""
    value = (
        'Bearer error="invalid_token", error_description="Log in via http://10.0.0.5:8931/login.", '
        'hint="ask admin@example.com or see http://wiki.corp.internal/mcp", '
        'note="see https://docs.example.com/mcp"'
    )
    assert rewrite_challenge(value, URLS) == (
        'Bearer error="invalid_token", error_description="Log in via https://bridge.example/login.",'
        f' note="see https://docs.example.com/mcp", {OWN}'
    )
