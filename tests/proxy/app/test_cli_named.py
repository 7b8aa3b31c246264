"""Named upstreams on the command line, run as the real `mrtr-bridge` command: every mistake is one
line on stderr and exit 2, `config validate` shows each `[upstreams.NAME]` with its secrets masked,
and a desktop client's `mcpServers` file that cannot be used says why."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from cli_run import bridge, one_line


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


NAMED = """
[upstream]
authorization = "Bearer shared-sekrit"
connect_timeout_s = 3

[upstreams.alpha]
url = "http://127.0.0.1:9/mcp?key=qsekrit"

[upstreams.beta]
command = "python3 -c pass"
env = { TOKEN = "env-sekrit" }
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("serve", "--upstream", "http://a:1/mcp", "--upstream", "b=http://b:1/mcp"),
            "give every upstream a name (--upstream NAME=URL, --upstream-command NAME=CMD) or "
            "give one upstream without a name, not both",
        ),
        (
            ("check", "--upstream", "a=http://a:1/mcp", "--upstream", "a=http://b:1/mcp"),
            "--upstream gives upstream 'a' twice: name each one once (NAME=...)",
        ),
        (
            ("serve", "--upstream", "a=b:1/mcp"),
            "invalid setting upstreams.a.url (from command line --upstream): given 'b:1/mcp'; "
            "allowed: an http:// or https:// URL, e.g. http://127.0.0.1:8931/mcp (a stdio server "
            "goes in upstream.command, --upstream-command)",
        ),
        (
            ("serve", "--upstream-command", "a=no-such-program-4e1 --flag"),
            "upstream a: Cannot start legacy stdio server 'no-such-program-4e1': program not found "
            "or not executable",
        ),
        (
            ("serve", "--servers-json", "/nonexistent/mcp.json"),
            "/nonexistent/mcp.json: cannot read it (No such file or directory)",
        ),
    ],
)
def test_a_mistake_with_named_upstreams_is_one_line(args: tuple[str, ...], message: str) -> None:
    done = bridge(*args)
    assert done.returncode == 2
    assert one_line(done) == f"mrtr-bridge: error: {message}"


def test_stdio_needs_to_be_told_which_named_upstream(tmp_path: Path) -> None:
    config = write(tmp_path, "bridge.toml", NAMED)
    done = bridge("stdio", "--config", str(config))
    assert done.returncode == 2
    assert one_line(done) == (
        "mrtr-bridge: error: stdio serves one upstream: pick one of the named ones with --server "
        "NAME (alpha, beta)"
    )
    unknown = bridge("stdio", "--config", str(config), "--server", "gamma")
    assert (
        one_line(unknown)
        == "mrtr-bridge: error: --server gamma: the named upstreams are alpha, beta"
    )


def test_config_validate_shows_each_named_upstream_masked(tmp_path: Path) -> None:
    done = bridge("config", "validate", str(write(tmp_path, "bridge.toml", NAMED)))
    assert (done.returncode, done.stderr) == (0, "")
    for secret in ("shared-sekrit", "qsekrit", "env-sekrit"):
        assert secret not in done.stdout
    assert "No upstream set" not in done.stdout
    shown = tomllib.loads(done.stdout)
    alpha, beta = shown["upstreams"]["alpha"], shown["upstreams"]["beta"]
    assert (alpha["url"], alpha["authorization"], alpha["connect_timeout_s"]) == (
        "http://127.0.0.1:9/mcp?***",
        "***",
        3.0,
    )
    assert (beta["command"], beta["env"], beta["authorization"]) == (
        "python3 -c pass",
        {"TOKEN": "***"},
        "***",
    )
    assert "url" not in shown["upstream"] and "command" not in shown["upstream"]


def test_config_validate_names_the_named_upstream_without_a_server(tmp_path: Path) -> None:
    config = write(tmp_path, "bridge.toml", '[upstreams.gamma]\ntransport = "sse"\n')
    done = bridge("config", "validate", str(config))
    assert done.returncode == 2
    assert one_line(done) == (
        "mrtr-bridge: error: upstream gamma: give it a url or a command ([upstreams.gamma] url = "
        "... or command = ...)"
    )


def test_a_servers_file_without_entries_says_what_it_expected(tmp_path: Path) -> None:
    path = write(tmp_path, "mcp.json", json.dumps({"servers_list": []}))
    done = bridge("serve", "--servers-json", str(path))
    assert done.returncode == 2
    assert one_line(done) == (
        f'mrtr-bridge: error: {path}: no "mcpServers" (or "servers") object of entries'
    )
