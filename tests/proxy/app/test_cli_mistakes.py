"""The first hour: every newcomer mistake on the command line is one plain line on stderr with a
non-zero exit and no traceback (a traceback only at `--log-level debug`), the example config is
printed by the command itself, and a listen address beyond the loopback with loopback-only allowed
hosts is warned about. Each test runs the real `mrtr-bridge` command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest
from cli_run import BRIDGE, TIMEOUT_S, bridge, one_line

from config import ENV_PREFIX, load_settings
from config.settings import FrontSettings
from proxy.app import cli
from proxy.app.cli_hints import loopback_only_warning

LOOPBACK_WARNING = "admits loopback names only"


def test_listen_given_as_a_url_says_to_use_host_port() -> None:
    done = bridge(
        "serve", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "http://127.0.0.1:8080"
    )
    assert done.returncode == 2
    assert one_line(done) == (
        "mrtr-bridge: error: invalid setting front.listen (from command line --listen): given "
        "'http://127.0.0.1:8080'; allowed: HOST:PORT, not a URL, e.g. 127.0.0.1:8080 (the "
        "endpoint's path is front.path, /mcp)"
    )


@pytest.mark.parametrize("url", ["127.0.0.1:8931/mcp", "localhost:8931", "ftp://host/mcp"])
def test_upstream_without_http_scheme_is_refused_at_start(url: str) -> None:
    done = bridge("serve", "--upstream", url)
    assert done.returncode == 2
    assert one_line(done) == (
        "mrtr-bridge: error: invalid setting upstream.url (from command line --upstream): given "
        f"'{url}'; allowed: an http:// or https:// URL, e.g. http://127.0.0.1:8931/mcp (a stdio "
        "server goes in upstream.command, --upstream-command)"
    )


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (
            ["check", "http://127.0.0.1:9/mcp"],
            "unrecognized arguments: http://127.0.0.1:9/mcp; the upstream's URL goes in "
            "--upstream http://127.0.0.1:9/mcp",
        ),
        (
            ["stdio", "node", "server.js"],
            "unrecognized arguments: node server.js; a stdio server's command line goes in "
            "--upstream-command 'node server.js'",
        ),
        (
            ["stdio", "--upstream-command", "python3", "server.py", "--port", "3"],
            "unrecognized arguments: server.py --port 3; quote the whole command line: "
            "--upstream-command 'python3 server.py --port 3'",
        ),
        (
            ["serve", "--upstream", "http://127.0.0.1:9/mcp", "--bogus", "1"],
            "unrecognized arguments: --bogus 1",
        ),
        (["keygen", "k1"], "unrecognized arguments: k1"),
    ],
)
def test_an_argument_without_its_flag_says_where_it_goes(args: list[str], hint: str) -> None:
    """An upstream given bare (`check URL`, `stdio node server.js`) or a command line left
    unquoted is one line saying which flag takes it; other strays are named alone."""
    done = bridge(*args)
    assert done.returncode == 2
    assert one_line(done) == f"mrtr-bridge: error: {hint}"


def test_a_refused_proxy_is_named_without_its_credentials() -> None:
    done = bridge(
        "serve",
        "--upstream",
        "http://127.0.0.1:9/mcp",
        env={"MRTR_BRIDGE_UPSTREAM_PROXY": "socks5://bridge:s3cret@proxy.internal:1080"},
    )
    assert done.returncode == 2
    assert one_line(done) == (
        "mrtr-bridge: error: invalid setting upstream.proxy (from environment "
        "MRTR_BRIDGE_UPSTREAM_PROXY): given 'socks5://***@proxy.internal:1080'; allowed: env, "
        "none, or an http:// or https:// proxy URL, e.g. http://proxy.internal:3128"
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"MRTR_BRIDGE_UPSTREAM_TLS_CA_FILE": "/nonexistent/ca.pem"},
            "invalid setting upstream.tls_ca_file (from environment "
            "MRTR_BRIDGE_UPSTREAM_TLS_CA_FILE): cannot load /nonexistent/ca.pem: No such file or "
            "directory",
        ),
        (
            {"MRTR_BRIDGE_UPSTREAM_TLS_CLIENT_CERT": "{garbage}"},
            "invalid setting upstream.tls_client_cert (from environment "
            "MRTR_BRIDGE_UPSTREAM_TLS_CLIENT_CERT): cannot load {garbage}: not a PEM file of the "
            "right kind (SSLError)",
        ),
        (
            {"MRTR_BRIDGE_UPSTREAM_TLS_CLIENT_KEY": "{garbage}"},
            "invalid setting upstream.tls_client_key (from environment "
            "MRTR_BRIDGE_UPSTREAM_TLS_CLIENT_KEY): needs upstream.tls_client_cert",
        ),
    ],
)
def test_tls_files_that_do_not_load_stop_the_start(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    """A CA file or client certificate that cannot be used is one line at start, naming the file
    and never its content, not an error at the first call."""
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    env = {name: value.format(garbage=garbage) for name, value in env.items()}
    done = bridge("serve", "--upstream", "https://localhost:9/mcp", env=env)
    assert done.returncode == 2
    line = one_line(done)
    assert line == f"mrtr-bridge: error: {message.format(garbage=garbage)}"
    assert "not a key" not in line


def test_config_file_error_names_setting_file_value_and_choices(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text('[upstream]\nurl = "http://127.0.0.1:9/mcp"\ntransport = "grpc"\n')
    done = bridge("check", "--config", str(path))
    assert done.returncode == 2
    assert one_line(done) == (
        f"mrtr-bridge: error: invalid setting upstream.transport (from config file {path}): "
        "given 'grpc'; allowed: 'auto', 'streamable-http' or 'sse'"
    )


def test_env_error_names_the_variable_and_never_a_secret() -> None:
    done = bridge(
        "stdio",
        "--upstream",
        "http://127.0.0.1:9/mcp",
        env={"MRTR_BRIDGE_HELD_MAX_ROUNDS": "many", "MRTR_BRIDGE_UPSTREAM_AUTHORIZATION": "x\ty"},
    )
    assert done.returncode == 2
    line = one_line(done)
    assert line.startswith("mrtr-bridge: error: invalid setting ")
    assert "x\ty" not in done.stderr
    secret = bridge(
        "serve",
        "--upstream",
        "http://127.0.0.1:9/mcp",
        env={"MRTR_BRIDGE_UPSTREAM_AUTHORIZATION": "Bearer se\x01cret"},
    )
    assert one_line(secret) == (
        "mrtr-bridge: error: invalid setting upstream.authorization (from environment "
        "MRTR_BRIDGE_UPSTREAM_AUTHORIZATION): authorization must be one line of visible ASCII "
        "(an HTTP header value)"
    )


def test_replicas_without_shared_keys_fail_with_a_clear_line() -> None:
    done = bridge(
        "serve",
        "--upstream",
        "http://demo:8931/mcp",
        env={"MRTR_BRIDGE_CLUSTER_PEERS_DNS": "bridge-peers:8080"},
    )
    assert done.returncode == 2
    assert one_line(done) == (
        "mrtr-bridge: error: missing setting held.keys: required when cluster.peers_dns is set "
        "(from environment MRTR_BRIDGE_CLUSTER_PEERS_DNS): replicas need held.keys shared by "
        "every replica (an ephemeral key cannot open another replica's requestState); make one "
        "with `mrtr-bridge keygen` and set MRTR_BRIDGE_HELD_KEYS on every replica"
    )


def test_address_in_use_is_one_line_and_a_traceback_only_at_debug() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        args = ("serve", "--upstream", "http://127.0.0.1:9/mcp", "--listen", listen)
        done = bridge(*args, "--log-format", "json")
        debug = bridge(*args, "--log-format", "json", "--log-level", "debug")
    assert done.returncode == 1
    message = f"mrtr-bridge: error: cannot listen on {listen}: the address is already in use"
    plain = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert plain == [message]
    assert "Traceback" not in done.stderr
    assert debug.returncode == 1
    assert debug.stderr.splitlines()[-1] == message
    failed = [json.loads(line) for line in debug.stderr.splitlines() if '"bridge_failed"' in line]
    assert len(failed) == 1 and "Traceback" in failed[0]["exception"]


def test_config_example_prints_the_shipped_file_and_it_loads(tmp_path: Path) -> None:
    done = bridge("config", "example")
    assert done.returncode == 0 and done.stderr == ""
    shipped = Path(__file__).resolve().parents[3] / "config" / "bridge.example.toml"
    assert done.stdout == shipped.read_text(encoding="utf-8")
    tomllib.loads(done.stdout)
    path = tmp_path / "bridge.toml"
    path.write_text(done.stdout)
    assert load_settings(path, {}).front.listen == "127.0.0.1:8080"


@pytest.mark.parametrize("command", [[], ["serve"], ["stdio"], ["check"], ["config"]])
def test_help_never_points_at_a_file_an_installed_copy_lacks(command: list[str]) -> None:
    done = bridge(*command, "--help")
    assert done.returncode == 0
    assert "bridge.example.toml" not in done.stdout
    if command in (["serve"], ["stdio"], ["check"]):
        assert "mrtr-bridge config example" in " ".join(done.stdout.split())


@pytest.mark.parametrize(
    ("listen", "allowed", "warned"),
    [
        ("0.0.0.0:8080", ("127.0.0.1", "localhost", "[::1]", "::1"), True),
        ("[::]:8080", ("localhost:8080", "127.0.0.1"), True),
        ("10.1.2.3:8080", ("localhost",), True),
        ("0.0.0.0:8080", ("127.0.0.1", "mcp.example.com"), False),
        ("0.0.0.0:8080", ("*",), False),
        ("127.0.0.1:8080", ("127.0.0.1",), False),
        ("localhost:8080", ("localhost",), False),
        ("[::1]:8080", ("[::1]",), False),
    ],
)
def test_loopback_only_allowed_hosts_beyond_the_loopback(
    listen: str, allowed: tuple[str, ...], warned: bool
) -> None:
    warning = loopback_only_warning(FrontSettings(listen=listen, allowed_hosts=allowed))
    assert (warning is not None) == warned
    if warning is not None:
        assert warning.startswith(f"listening on {listen}, but front.allowed_hosts (")
        assert "MRTR_BRIDGE_FRONT_ALLOWED_HOSTS=" in warning


def test_serve_on_all_interfaces_warns_once_at_start() -> None:
    args = ["serve", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "0.0.0.0:0"]
    process = subprocess.Popen(
        [*BRIDGE, *args, "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)},
    )
    assert process.stderr is not None
    try:
        events: list[dict[str, str]] = []
        for line in process.stderr:
            events.append(json.loads(line))
            if events[-1]["event"] == "allowed_hosts_loopback_only":
                break
        assert "bridge_started" in [event["event"] for event in events]
        assert LOOPBACK_WARNING in events[-1]["hint"]
        assert events[-1]["level"] == "warning"
    finally:
        process.terminate()
        process.wait(TIMEOUT_S)


def test_an_unexpected_failure_in_check_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_args: object) -> int:
        raise RuntimeError("something the bridge did not expect")

    monkeypatch.setattr(cli, "run_check", broken)
    # logging stays as it was: configured here, it would write to capsys's stream after the test
    monkeypatch.setattr(cli, "configure_logging", lambda *_args: None)
    with pytest.raises(SystemExit) as caught:
        cli.main(["check", "--upstream", "http://127.0.0.1:9/mcp"], env={})
    assert caught.value.code == 1
    assert capsys.readouterr().err == (
        "mrtr-bridge: error: something the bridge did not expect (run with --log-level debug for "
        "the traceback)\n"
    )


@pytest.mark.parametrize("kid", ["bad kid!", "k=1", "k,1", "a.b", "ü", "", "k" * 17, "$(id)"])
def test_keygen_refuses_a_key_id_that_would_break_toml_or_the_shell(kid: str) -> None:
    """An id outside letters, digits, '-' and '_' (or longer than 16) is one line naming the
    allowed characters; nothing is printed on stdout, so no broken TOML or shell line."""
    done = bridge("keygen", "--kid", kid)
    assert done.returncode == 2
    assert one_line(done) == (
        f"mrtr-bridge: error: --kid: key id {kid!r} must be 1-16 characters: letters, digits, "
        "'-' and '_'"
    )


def test_keygen_output_with_a_chosen_id_loads_as_toml_and_as_environment(tmp_path: Path) -> None:
    """The longest allowed id with both punctuation marks prints TOML and environment lines that
    the bridge loads as they are."""
    done = bridge("keygen", "--kid", "Key-2026_05-ab12")
    assert (done.returncode, done.stderr) == (0, "")
    toml_part = done.stdout.split("# or in the environment")[0]
    assert tomllib.loads(toml_part)["held"]["active_key"] == "Key-2026_05-ab12"
    path = tmp_path / "keys.toml"
    path.write_text(toml_part, encoding="utf-8")
    assert load_settings(path, {}, {}).held.active_key == "Key-2026_05-ab12"
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("MRTR_"))
    assert list(load_settings(None, env, {}).held.keys) == ["Key-2026_05-ab12"]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--port", "9000"], "--port 9000; the address goes in --listen HOST:PORT, e.g. "
         "--listen 127.0.0.1:9000"),
        (["--port=9000"], "--port=9000; the address goes in --listen HOST:PORT, e.g. "
         "--listen 127.0.0.1:9000"),
        (["--host", "0.0.0.0"], "--host 0.0.0.0; the address goes in --listen HOST:PORT, e.g. "
         "--listen 0.0.0.0:8080"),
    ],
)  # fmt: skip
def test_another_proxys_address_flags_point_to_listen(args: list[str], hint: str) -> None:
    done = bridge("serve", "--upstream", "http://127.0.0.1:9/mcp", *args)
    assert done.returncode == 2
    assert one_line(done) == f"mrtr-bridge: error: unrecognized arguments: {hint}"


def test_listen_without_a_host_names_both_choices() -> None:
    """`:9000` is refused rather than taken as every interface: the bridge never listens beyond
    the loopback unless told so."""
    done = bridge("serve", "--upstream", "http://127.0.0.1:9/mcp", "--listen", ":9000")
    assert done.returncode == 2
    assert one_line(done) == (
        "mrtr-bridge: error: invalid setting front.listen (from command line --listen): given "
        "':9000'; allowed: HOST:PORT with the host: 127.0.0.1:9000 (this machine only) or "
        "0.0.0.0:9000 (every interface)"
    )


def test_the_log_level_is_read_in_any_case(tmp_path: Path) -> None:
    """`--log-level DEBUG`, and DEBUG in the environment, are debug."""
    checked = bridge("check", "--upstream", "http://127.0.0.1:9/mcp", "--log-level", "DEBUG")
    assert checked.returncode == 2 and "invalid choice" not in checked.stderr  # unreachable
    path = tmp_path / "empty.toml"
    path.write_text("", encoding="utf-8")
    done = bridge("config", "validate", str(path), env={"MRTR_BRIDGE_LOG_LEVEL": "Debug"})
    assert done.returncode == 0, done.stderr
    assert tomllib.loads(done.stdout)["log"]["level"] == "debug"
