"""`upstream.headers`: extra headers on every request to the upstream, from the config file or
`MRTR_BRIDGE_UPSTREAM_HEADERS` (`name=value` pairs). Not the transport's own headers, nor
Authorization or Cookie, which have their own settings and rules; nothing that could end a header;
a refused value is never repeated."""

from __future__ import annotations

import pytest

from config import load_settings
from config.loader import ConfigError

URL = {"MRTR_BRIDGE_UPSTREAM_URL": "http://127.0.0.1:9/mcp"}


def test_pairs_from_the_environment() -> None:
    env = {**URL, "MRTR_BRIDGE_UPSTREAM_HEADERS": "X-API-Key=k-1, X-Team=blue team"}
    settings = load_settings(None, env, {})
    assert settings.upstream.headers == {"X-API-Key": "k-1", "X-Team": "blue team"}


@pytest.mark.parametrize(
    ("pair", "reason"),
    [
        (
            "Authorization=Bearer s3cret",
            "Authorization cannot be set here: use upstream.authorization",
        ),
        ("cookie=s3cret", "cookie cannot be set here: each upstream session keeps the cookies"),
        ("Mcp-Session-Id=s3cret", "Mcp-Session-Id cannot be set here: the bridge sets it"),
        ("Proxy-Authorization=s3cret", "give the credentials in upstream.proxy's URL"),
        ("X API Key=s3cret", "allowed: header names that are HTTP tokens"),
        ("X-API-Key=s3cret\u00e9", "values of visible ASCII and spaces"),
    ],
)
def test_what_cannot_be_a_static_header_is_refused_without_its_value(
    pair: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(None, {**URL, "MRTR_BRIDGE_UPSTREAM_HEADERS": pair}, {})
    message = str(refused.value)
    assert reason in message and "s3cret" not in message
