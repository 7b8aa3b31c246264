"""Named upstreams in the settings: `[upstreams.NAME]` tables over `[upstream]`, a desktop client's
`mcpServers` file, `--upstream NAME=URL` and `--upstream-command NAME=CMD`, with the same precedence
as every other setting (defaults < file < servers file < environment < command line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config import ConfigError, load_settings
from config.servers_json import read_servers_json
from config.settings import Settings
from proxy.app.cli_args import UsageError, build_parser, named_value, overrides_from

FILE = """
[upstream]
connect_timeout_s = 3
headers = { "X-Team" = "shared" }

[upstreams.alpha]
url = "http://127.0.0.1:8931/mcp"

[upstreams.beta]
command = "node server.js"
connect_timeout_s = 7
"""


def write(tmp_path: Path, text: str, name: str = "bridge.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def flags(*argv: str) -> dict[str, Any]:
    return overrides_from(build_parser().parse_args(["serve", *argv]))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("alpha=http://127.0.0.1:8931/mcp", ("alpha", "http://127.0.0.1:8931/mcp")),
        ("a-b_1=node s.js", ("a-b_1", "node s.js")),
        ("http://host/mcp?a=b", (None, "http://host/mcp?a=b")),
        ("env FOO=1 node s.js", (None, "env FOO=1 node s.js")),
        ("FOO=1 node s.js", (None, "FOO=1 node s.js")),  # upper case: not a name
        ("alpha=", (None, "alpha=")),
        ("=http://host/mcp", (None, "=http://host/mcp")),
        ("x" * 65 + "=http://h/mcp", (None, "x" * 65 + "=http://h/mcp")),
    ],
)
def test_a_name_is_a_valid_upstream_name_before_the_first_equals_sign(
    value: str, expected: tuple[str | None, str]
) -> None:
    assert named_value(value) == expected


def test_repeated_flags_become_named_overrides() -> None:
    overrides = flags(
        "--upstream", "alpha=http://a/mcp", "--upstream-command", "beta=env FOO=1 node s.js"
    )
    named = {key: value for key, value in overrides.items() if value is not None}
    assert named == {
        "upstreams.alpha.url": "http://a/mcp",
        "upstreams.beta.command": "env FOO=1 node s.js",
    }


def test_one_unnamed_upstream_is_the_usual_setting() -> None:
    overrides = flags("--upstream", "http://host/mcp?a=b")
    assert overrides["upstream.url"] == "http://host/mcp?a=b"
    assert not any(key.startswith("upstreams.") for key in overrides)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--upstream", "http://a/mcp", "--upstream", "beta=http://b/mcp"),
            "give every upstream a name (--upstream NAME=URL, --upstream-command NAME=CMD) or "
            "give one upstream without a name, not both",
        ),
        (
            ("--upstream", "http://a/mcp", "--upstream", "http://b/mcp"),
            "--upstream gives an unnamed upstream twice: name each one once (NAME=...)",
        ),
        (
            ("--upstream-command", "a=x", "--upstream-command", "a=y"),
            "--upstream-command gives upstream 'a' twice: name each one once (NAME=...)",
        ),
    ],
)
def test_flags_that_cannot_be_placed_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(UsageError) as raised:
        flags(*argv)
    assert str(raised.value) == message


def test_each_named_table_is_the_shared_upstream_with_its_own_over_it(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FILE), {"MRTR_BRIDGE_UPSTREAM_INIT_TIMEOUT_S": "4"})
    alpha, beta = settings.upstreams["alpha"], settings.upstreams["beta"]
    assert (alpha.url, alpha.connect_timeout_s, alpha.init_timeout_s) == (
        "http://127.0.0.1:8931/mcp",
        3.0,
        4.0,
    )
    assert (beta.command, beta.connect_timeout_s, beta.init_timeout_s) == (
        "node server.js",
        7.0,
        4.0,
    )
    assert alpha.headers == beta.headers == {"X-Team": "shared"}
    assert (settings.upstream.url, settings.upstream.command) == (None, None)


def test_units_serve_each_named_upstream_at_its_own_path(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FILE), {})
    units = settings.units()
    assert [
        (name, own.front.path, own.upstream.url or own.upstream.command) for name, own in units
    ] == [
        ("alpha", "/servers/alpha/mcp", "http://127.0.0.1:8931/mcp"),
        ("beta", "/servers/beta/mcp", "node server.js"),
    ]
    assert all(own.upstreams == {} for _, own in units)
    assert Settings().units() == [(None, Settings())]


def test_a_flag_wins_over_the_file_for_one_named_upstream(tmp_path: Path) -> None:
    settings = load_settings(
        write(tmp_path, FILE), {}, flags("--upstream", "alpha=http://other:1/mcp")
    )
    assert settings.upstreams["alpha"].url == "http://other:1/mcp"
    assert (
        settings.upstreams["beta"].command == "node server.js"
    )  # the table is merged, not replaced


def test_the_servers_file_is_below_the_command_line_and_above_the_config_file(
    tmp_path: Path,
) -> None:
    servers = write(
        tmp_path,
        json.dumps(
            {
                "mcpServers": {
                    "beta": {"command": "python", "args": ["legacy.py"], "env": {"TOKEN": "t"}},
                    "gamma": {"url": "http://g:1/mcp"},
                }
            }
        ),
        "mcp.json",
    )
    settings = load_settings(
        write(tmp_path, FILE),
        {},
        flags("--upstream", "gamma=http://flag:2/mcp"),
        servers=read_servers_json(servers),
    )
    assert sorted(settings.upstreams) == ["alpha", "beta", "gamma"]
    assert settings.upstreams["beta"].command == "python legacy.py"
    assert settings.upstreams["beta"].connect_timeout_s == 7.0  # the file's own table, merged
    assert settings.upstreams["beta"].env == {"TOKEN": "t"}
    assert settings.upstreams["gamma"].url == "http://flag:2/mcp"


@pytest.mark.parametrize(
    ("text", "env", "overrides", "message"),
    [
        (
            '[upstream]\nurl = "http://a/mcp"\n[upstreams.b]\nurl = "http://b/mcp"\n',
            {},
            {},
            "invalid setting upstream.url (from config file {path}): with named upstreams, "
            "[upstream] holds only the settings they share: give this upstream a name (--upstream "
            "NAME=URL, --upstream-command NAME=CMD, or an [upstreams.NAME] table) or leave the "
            "named ones out",
        ),
        (
            '[upstreams.Bad]\nurl = "http://b/mcp"\n',
            {},
            {},
            "invalid setting upstreams (from config file {path}): given 'Bad'; upstream name 'Bad' "
            "must be 1-64 lower-case letters, digits, '-' and '_', starting with a letter or digit",
        ),
        (
            "",
            {"MRTR_BRIDGE_UPSTREAMS_ALPHA_URL": "http://a/mcp"},
            {},
            "invalid setting MRTR_BRIDGE_UPSTREAMS_ALPHA_URL (from environment "
            "MRTR_BRIDGE_UPSTREAMS_ALPHA_URL): named upstreams have no environment variables: "
            "give them as [upstreams.NAME] in the config file, --upstream NAME=URL, "
            "--upstream-command NAME=CMD or --servers-json FILE (the MRTR_BRIDGE_UPSTREAM_* "
            "variables apply to every one)",
        ),
        (
            '[upstreams.b]\nurl = "b:1/mcp"\n',
            {},
            {},
            "invalid setting upstreams.b.url (from config file {path}): given 'b:1/mcp'; allowed: "
            "an http:// or https:// URL, e.g. http://127.0.0.1:8931/mcp (a stdio server goes in "
            "upstream.command, --upstream-command)",
        ),
        (  # a named upstream's secret is never quoted, as [upstream]'s is not
            '[upstreams.b]\nurl = "http://b/mcp"\nauthorization = "Bearer \\nsekrit"\n',
            {},
            {},
            "invalid setting upstreams.b.authorization (from config file {path}): authorization "
            "must be one line of visible ASCII (an HTTP header value)",
        ),
    ],
)
def test_mistakes_name_the_setting_and_where_it_came_from(
    tmp_path: Path, text: str, env: dict[str, str], overrides: dict[str, Any], message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_settings(path, env, overrides)
    assert str(raised.value) == message.format(path=path)
