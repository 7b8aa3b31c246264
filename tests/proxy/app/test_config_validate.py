"""`mrtr-bridge config validate FILE`, run as the real command: a good file prints the effective
settings as TOML (defaults < file < environment) with every secret masked and exits 0; a bad one
prints one line naming the mistake on stderr, nothing on stdout, and exits 2."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest
from cli_run import bridge

from config import load_settings

KEY = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY"  # 32 bytes, base64url
SECRETS = ("sekrit-bearer", KEY, "hdr-sekrit", "env-sekrit", "admin-sekrit-0123456789", "pxpass")
GOOD = f"""
[upstream]
url = "http://127.0.0.1:8931/mcp?api_key=qsekrit"
authorization = "Bearer sekrit-bearer"
headers = {{ "X-Api-Key" = "hdr-sekrit" }}
proxy = "http://pxuser:pxpass@proxy.internal:3128"

[held]
ttl_s = 120

[held.keys]
k1 = "{KEY}"

[status]
admin_token = "admin-sekrit-0123456789"
"""


def validate(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return bridge("config", "validate", str(path), env=env)


def test_a_good_file_prints_the_effective_settings_with_every_secret_masked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(GOOD, encoding="utf-8")
    done = validate(path, {"MRTR_BRIDGE_UPSTREAM_ENV": "TOKEN=env-sekrit,MODE=fast"})
    assert (done.returncode, done.stderr) == (0, "")
    for secret in (*SECRETS, "qsekrit", "pxuser"):
        assert secret not in done.stdout
    assert done.stdout.startswith(f"# mrtr-bridge config validate: {path} is valid.\n")
    assert "environment (MRTR_BRIDGE_UPSTREAM_ENV)" in done.stdout
    shown = tomllib.loads(done.stdout)
    upstream = shown["upstream"]
    assert upstream["url"] == "http://127.0.0.1:8931/mcp?***"
    assert upstream["proxy"] == "http://***@proxy.internal:3128"
    assert upstream["authorization"] == "***"
    assert upstream["headers"] == {"X-Api-Key": "***"}
    assert upstream["env"] == {"TOKEN": "***", "MODE": "***"}
    assert (shown["held"]["keys"], shown["status"]["admin_token"]) == ({"k1": "***"}, "***")
    assert shown["held"]["ttl_s"] == 120.0
    assert shown["front"]["listen"] == "127.0.0.1:8080"  # a default
    assert "# command =  (not set)" in done.stdout.splitlines()


def test_the_printed_settings_load_back_as_the_same_settings(tmp_path: Path) -> None:
    """Without secrets the output is a complete settings file: loaded, it gives what was
    validated, the environment's value included."""
    path = tmp_path / "bridge.toml"
    path.write_text('[front]\nlisten = "0.0.0.0:9000"\nallowed_hosts = ["*"]\n', encoding="utf-8")
    done = validate(path, {"MRTR_BRIDGE_HELD_TTL_S": "42"})
    assert done.returncode == 0, done.stderr
    assert "No upstream set: serve and stdio need --upstream URL" in done.stdout
    echoed = tmp_path / "echoed.toml"
    echoed.write_text(done.stdout, encoding="utf-8")
    expected = load_settings(path, {"MRTR_BRIDGE_HELD_TTL_S": "42"})
    assert load_settings(echoed, {}) == expected
    assert expected.held.ttl_s == 42.0


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            '[upstrem]\nurl = "http://127.0.0.1:8931/mcp"\n',
            "invalid setting upstrem (from config file {path}): no such setting; did you mean "
            "upstream?",
        ),
        (
            "[held]\nttl_s = -1\n",
            "invalid setting held.ttl_s (from config file {path}): given '-1'; allowed: a number "
            "above 0",
        ),
        ("[front\n", "invalid setting config: {path} is not valid TOML: Expected ']' at the end "),
        (
            '[upstream]\nurl = "http://h/mcp"\ncommand = "node server.js"\n',
            "choose one upstream: --upstream URL (HTTP) or --upstream-command CMD (stdio), not "
            "both",
        ),
        (
            '[upstream]\ncommand = "/nonexistent/mcp-server --stdio"\n',
            "Cannot start legacy stdio server '/nonexistent/mcp-server': program not found or not "
            "executable",
        ),
        (
            '[upstream]\nauthorization = "Bearer se\\u0001cret"\n',
            "invalid setting upstream.authorization (from config file {path}): authorization must "
            "be one line of visible ASCII (an HTTP header value)",
        ),
    ],
)
def test_a_bad_file_is_one_line_on_stderr_and_exit_2(tmp_path: Path, text: str, line: str) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(text, encoding="utf-8")
    done = validate(path)
    assert (done.returncode, done.stdout) == (2, "")
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("mrtr-bridge: error: " + line.format(path=path))
    assert "cret" not in done.stderr


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    done = validate(tmp_path / "nowhere.toml")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"mrtr-bridge: error: invalid setting config: cannot read {tmp_path / 'nowhere.toml'}: "
        "No such file or directory\n"
    )
