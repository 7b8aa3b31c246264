"""The OAuth-related settings: `front.public_url`, `upstream.authorization(_file)`; secrets never
echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import ConfigError, load_settings

SECRET = "Bearer s3rvice-credential-xyz"


def test_public_url_from_the_environment() -> None:
    settings = load_settings(
        None, {"MRTR_BRIDGE_FRONT_PUBLIC_URL": "https://mcp.example.com/mcp"}, {}
    )
    assert settings.front.public_url == "https://mcp.example.com/mcp"


@pytest.mark.parametrize(
    "value",
    [
        "mcp.example.com/mcp",
        "ftp://mcp.example.com/",
        "https://u:p@mcp.example.com/",
        "https://mcp.example.com/mcp?x=1",
        "https://mcp.example.com/#f",
        "https://",
    ],
)
def test_public_url_must_be_a_plain_http_url(value: str) -> None:
    with pytest.raises(ConfigError, match=r"front\.public_url.*absolute http"):
        load_settings(None, {"MRTR_BRIDGE_FRONT_PUBLIC_URL": value}, {})


def test_authorization_file_is_read_at_start_up(tmp_path: Path) -> None:
    path = tmp_path / "upstream-authorization"
    path.write_text(SECRET + "\n", encoding="utf-8")
    settings = load_settings(None, {"MRTR_BRIDGE_UPSTREAM_AUTHORIZATION_FILE": str(path)}, {})
    assert settings.upstream.authorization is not None
    assert settings.upstream.authorization.get_secret_value() == SECRET
    assert SECRET not in repr(settings)


def test_authorization_and_its_file_are_exclusive(tmp_path: Path) -> None:
    path = tmp_path / "upstream-authorization"
    path.write_text(SECRET, encoding="utf-8")
    env = {
        "MRTR_BRIDGE_UPSTREAM_AUTHORIZATION": SECRET,
        "MRTR_BRIDGE_UPSTREAM_AUTHORIZATION_FILE": str(path),
    }
    with pytest.raises(ConfigError, match="not both") as caught:
        load_settings(None, env, {})
    assert SECRET not in str(caught.value)


def test_an_unreadable_authorization_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=r"upstream\.authorization_file.*cannot read .*nope"):
        load_settings(None, {"MRTR_BRIDGE_UPSTREAM_AUTHORIZATION_FILE": str(missing)}, {})


@pytest.mark.parametrize("content", ["", "\n\n", SECRET + "\nX-Injected: 1", SECRET + "\x00"])
def test_a_file_that_is_not_one_header_value_is_refused_without_echoing_it(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "upstream-authorization"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match="content is not usable") as caught:
        load_settings(None, {"MRTR_BRIDGE_UPSTREAM_AUTHORIZATION_FILE": str(path)}, {})
    assert "s3rvice" not in str(caught.value)


def test_an_authorization_with_a_line_break_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError, match=r"upstream\.authorization") as caught:
        load_settings(
            None, {"MRTR_BRIDGE_UPSTREAM_AUTHORIZATION": SECRET + "\r\nX-Injected: 1"}, {}
        )
    assert "s3rvice" not in str(caught.value)
