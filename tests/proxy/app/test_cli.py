"""The mrtr-bridge command line: flags, help, keygen, and serve's lifecycle."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import signal
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import aiohttp
import pytest

from config import Settings, load_settings
from proxy.app.cli import keygen_text, main, upstream_label
from proxy.app.cli_args import build_parser, overrides_from
from proxy.auth.keys import decode_key, load_keyring
from translators.protocol.eras import MODERN_VERSION
from translators.protocol.revisions import SUPPORTED

WAIT_S = 15.0


def test_version_names_the_bridged_revisions(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version and both protocol revisions."""
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out == (
        f"mrtr-bridge {version('mrtr-bridge')} (modern {MODERN_VERSION} -> legacy {SUPPORTED[-1]} "
        f".. {SUPPORTED[0]})\n"
    )


def test_serve_help_explains_every_flag_and_its_other_sources() -> None:
    """serve --help lists each flag with its environment variable and config key."""
    commands = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    text = commands.choices["serve"].format_help()
    for flag, variable, key in [
        ("--upstream URL", "MRTR_BRIDGE_UPSTREAM_URL", "upstream.url"),
        ("--upstream-transport", "MRTR_BRIDGE_UPSTREAM_TRANSPORT", "upstream.transport"),
        ("--listen HOST:PORT", "MRTR_BRIDGE_FRONT_LISTEN", "front.listen"),
        ("--config FILE", "MRTR_BRIDGE_CONFIG", None),
        ("--log-level", "MRTR_BRIDGE_LOG_LEVEL", "log.level"),
        ("--log-format", "MRTR_BRIDGE_LOG_FORMAT", "log.format"),
        ("--event-loop", "MRTR_BRIDGE_FRONT_EVENT_LOOP", "front.event_loop"),
    ]:
        assert flag in text and variable in " ".join(text.split())
        assert key is None or key in text


def test_top_level_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a command the help is printed, naming serve, keygen and --version."""
    assert main([], env={}) == 2
    out = capsys.readouterr().out
    assert all(
        word in out for word in ("serve", "keygen", "--version", "never from the command line")
    )


def test_flags_map_to_dotted_settings() -> None:
    """Each serve flag overrides exactly its setting; absent flags override nothing."""
    args = build_parser().parse_args(
        [
            "serve",
            "--upstream",
            "http://u/mcp",
            "--log-level",
            "debug",
            "--upstream-transport",
            "sse",
        ]
    )
    assert overrides_from(args) == {
        "upstream.url": "http://u/mcp",
        "upstream.command": None,
        "upstream.cwd": None,
        "upstream.transport": "sse",
        "front.listen": None,
        "log.level": "debug",
        "log.format": None,
        "held.replica_id": None,
        "cluster.advertise_url": None,
        "cluster.peers": None,
        "cluster.peers_dns": None,
        "front.event_loop": None,
    }
    settings = load_settings(
        None, {"MRTR_BRIDGE_FRONT_LISTEN": "127.0.0.1:9"}, overrides_from(args)
    )
    assert (settings.upstream.url, settings.front.listen) == ("http://u/mcp", "127.0.0.1:9")
    assert (settings.log.level, settings.upstream.transport) == ("debug", "sse")


def test_cluster_flags_configure_a_replica() -> None:
    """--replica-id, --advertise-url, --peers (comma-separated) and --peers-dns reach their
    settings."""
    args = build_parser().parse_args(
        [
            "serve",
            "--upstream",
            "http://u/mcp",
            "--replica-id",
            "r2",
            "--advertise-url",
            "http://10.0.0.6:8080",
            "--peers",
            "http://10.0.0.5:8080,http://10.0.0.6:8080",
            "--peers-dns",
            "peers.local:8080",
        ]
    )
    settings = load_settings(
        None, {"MRTR_BRIDGE_HELD_KEYS": "k1=" + "A" * 43}, overrides_from(args)
    )
    assert settings.held.replica_id == "r2"
    assert settings.cluster.advertise_url == "http://10.0.0.6:8080"
    assert settings.cluster.peers == ("http://10.0.0.5:8080", "http://10.0.0.6:8080")
    assert settings.cluster.peers_dns == "peers.local:8080"


def test_keygen_prints_a_usable_key_for_file_and_environment(tmp_path: Path) -> None:
    """The TOML snippet and the environment form both load into a non-ephemeral key ring."""
    out = io.StringIO()
    assert main(["keygen", "--kid", "k1"], env={}, out=out) == 0
    text = out.getvalue()
    snippet = tomllib.loads(text.split("# or in the environment")[0])
    assert snippet["held"]["active_key"] == "k1"
    assert len(decode_key("k1", snippet["held"]["keys"]["k1"])) == 32
    path = tmp_path / "keys.toml"
    path.write_text(text.split("# or in the environment")[0], encoding="utf-8")
    assert load_keyring(load_settings(path, {}, {}).held)[1] is False
    env = dict(line.split("=", 1) for line in text.splitlines() if line.startswith("MRTR_BRIDGE_"))
    assert load_keyring(load_settings(None, env, {}).held)[1] is False


def test_keygen_makes_a_fresh_key_each_time() -> None:
    """Two runs never print the same secret."""
    first, second = io.StringIO(), io.StringIO()
    main(["keygen"], env={}, out=first)
    main(["keygen"], env={}, out=second)
    assert first.getvalue() != second.getvalue()


def test_keygen_text_shows_both_forms() -> None:
    """The printed text has the [held.keys] table and the environment variables."""
    assert keygen_text("k1", "S3CRET") == (
        "# requestState key: add to your config file (keep it private)\n"
        '[held]\nactive_key = "k1"\n\n[held.keys]\nk1 = "S3CRET"\n\n'
        "# or in the environment (append to existing keys as kid=key pairs, comma-separated):\n"
        "MRTR_BRIDGE_HELD_KEYS=k1=S3CRET\nMRTR_BRIDGE_HELD_ACTIVE_KEY=k1\n"
    )


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            ["serve"],
            {},
            "no upstream: pass --upstream URL or --upstream-command CMD, or set "
            "MRTR_BRIDGE_UPSTREAM_URL",
        ),
        (
            ["serve", "--upstream", "http://u/mcp", "--listen", "8080"],
            {},
            "mrtr-bridge: error: invalid setting front.listen (from command line --listen): given "
            "'8080'; allowed: HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080\n",
        ),
        (
            ["serve", "--upstream", "http://u/mcp"],
            {"MRTR_BRIDGE_HELD_TTL_S": "-1"},
            "mrtr-bridge: error: invalid setting held.ttl_s (from environment "
            "MRTR_BRIDGE_HELD_TTL_S): given '-1'; allowed: a number above 0\n",
        ),
        (
            ["serve", "--upstream", "http://user:pw@127.0.0.1:8931/mcp"],
            {},
            "invalid setting upstream.url (from command line --upstream): given "
            "'http://***@127.0.0.1:8931/mcp'; must not carry credentials "
            "(user:password@host); give them as upstream.authorization",
        ),
        (
            ["stdio"],
            {"MRTR_BRIDGE_UPSTREAM_URL": "http://tok@127.0.0.1:8931/mcp"},
            "invalid setting upstream.url (from environment MRTR_BRIDGE_UPSTREAM_URL): given "
            "'http://***@127.0.0.1:8931/mcp'; must not carry",
        ),
    ],
)
def test_serve_fails_fast_on_bad_settings(
    capsys: pytest.CaptureFixture[str], argv: list[str], env: dict[str, str], message: str
) -> None:
    """A missing upstream or a bad value stops serve with exit status 2 and says why."""
    with pytest.raises(SystemExit) as caught:
        main(argv, env=env)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "pw@" not in err and "tok@" not in err


def test_the_upstream_label_drops_the_query() -> None:
    """The startup line never shows a query string (user info is refused in upstream.url; both go
    through proxy/common/shown.py, tested in tests/proxy/common/test_shown.py)."""
    upstream = {"url": "https://[::1]:8931/mcp?token=x#top"}
    assert (
        upstream_label(Settings.model_validate({"upstream": upstream})) == "https://[::1]:8931/mcp"
    )


async def test_serve_starts_logs_one_line_and_stops_on_sigterm() -> None:
    """serve logs where it listens and what it fronts, serves /healthz, and exits 0 on SIGTERM."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy",
        "serve",
        "--upstream",
        "http://127.0.0.1:9/mcp?token=x",
        "--listen",
        "127.0.0.1:0",
        "--log-format",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None and process.stdout is not None
    try:
        async with asyncio.timeout(WAIT_S):
            started = json.loads(await process.stderr.readline())
            while started["event"] != "bridge_started":
                started = json.loads(await process.stderr.readline())
            assert started["upstream"] == "http://127.0.0.1:9/mcp"
            assert started["listen"].startswith("http://127.0.0.1:") and started["listen"].endswith(
                "/mcp"
            )
            async with aiohttp.ClientSession() as session:
                health_url = started["listen"].removesuffix("/mcp") + "/healthz"
                async with session.get(health_url) as response:
                    assert response.status == 200
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
            assert await process.stdout.read() == b""
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
