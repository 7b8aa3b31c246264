"""`mrtr-bridge check` against real upstreams: legacy HTTP and stdio servers (mcp 1.x), the mcp 2.x
SDK's server (dual-era, and modern-only), a stdio server that goes deaf after `server/discover`,
and nothing at all. Each test runs the real command and asserts its JSON and exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from config import ENV_PREFIX, env_name

from .harness import BRIDGE_EXE, PEERS_DIR, PeerProcess, Peers, free_port, legacy_stdio_command

CHECK_TIMEOUT_S = 60
FIXTURE_TOOLS = 27
MODERN_SERVER = PEERS_DIR / "modern_server.py"

RELAYED = (
    "modern requests: relayed untranslated (the upstream's own InputRequiredResult and "
    "requestState pass untouched)"
)
REVERSE = (
    "legacy clients: their sessions served by the bridge, each request sent upstream as 2026-07-28 "
    "(inputRequests pushed to the client, its answers sent back as inputResponses)"
)


def run_check_raw(
    *args: str, env: dict[str, str] | None = None, json_output: bool = True
) -> tuple[int, str, str]:
    """`mrtr-bridge check <args> [--json]`: exit status, stdout and stderr."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    done = subprocess.run(
        [str(BRIDGE_EXE), "check", *args, *(["--json"] if json_output else [])],
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_S,
        env={**base, **(env or {})},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def run_check(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """`mrtr-bridge check <args> --json`: exit status and the one JSON object on stdout."""
    status, stdout, _stderr = run_check_raw(*args, env=env)
    return status, json.loads(stdout)


def modern_server(peers: Peers, *args: str) -> PeerProcess:
    port = free_port()
    return peers.start(
        "modern", [sys.executable, str(MODERN_SERVER), "--port", str(port), *args], port
    )


def _tool(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(tool for tool in report["tools"] if tool["name"] == name)


def test_legacy_http_server_is_bridgeable(peers: Peers) -> None:
    server = peers.legacy()
    status, report = run_check("--upstream", server.url)
    assert status == 0
    assert (report["era"], report["protocolVersion"]) == ("legacy", "2025-11-25")
    assert report["directions"] == {"modernClients": "translated", "legacyClients": "relayed"}
    assert report["transport"] == "streamable-http"
    assert report["sessionLimit"] == "many (learned)"  # a second session answered beside the first
    assert report["serverInfo"]["name"] == "mcp-legacy-conformance-fixture"
    assert set(report["capabilities"]) >= {
        "tools",
        "prompts",
        "resources",
        "logging",
        "completions",
    }
    assert report["supportedVersions"] == []
    assert len(report["tools"]) == FIXTURE_TOOLS
    assert _tool(report, "test_elicitation") == {
        "name": "test_elicitation",
        "annotations": {},
        "bridged": True,
    }
    assert report["pushesOutsideCall"] == {"rootsListAtInitialized": False}
    assert (report["bridgeable"], report["problems"], report["reachable"]) == (True, [], True)
    assert any(line.startswith("elicitation/create") for line in report["bridges"])


def test_legacy_stdio_server_is_bridgeable() -> None:
    status, report = run_check("--upstream-command", legacy_stdio_command())
    assert status == 0
    assert (report["era"], report["protocolVersion"], report["transport"]) == (
        "legacy",
        "2025-11-25",
        "stdio",
    )
    assert report["serverInfo"]["name"] == "mcp-legacy-conformance-fixture"
    assert len(report["tools"]) == FIXTURE_TOOLS
    assert (report["bridgeable"], report["problems"]) == (True, [])


def test_stdio_server_asking_roots_at_initialized_is_reported() -> None:
    status, report = run_check(
        "--upstream-command", legacy_stdio_command("roots_keeping_server.py")
    )
    assert status == 0
    assert report["pushesOutsideCall"] == {"rootsListAtInitialized": True}
    assert any("roots/list right after initialized" in line for line in report["bridges"])


def test_stdio_probe_never_hurts_a_server_that_goes_deaf_after_discover() -> None:
    """The probe runs in a throwaway process: the session process never saw `server/discover`."""
    command = f"{sys.executable} {PEERS_DIR / 'stdio_misbehaving.py'} --mode stunned"
    status, report = run_check(
        "--upstream-command", command, env={env_name("upstream.era_probe_timeout_s"): "1"}
    )
    assert status == 0
    assert (report["era"], report["protocolVersion"], report["transport"]) == (
        "legacy",
        "2025-11-25",
        "stdio",
    )
    assert report["serverInfo"] == {"name": "misbehaving-stunned", "version": "0"}
    assert report["tools"] == [{"name": "echo", "annotations": {}, "bridged": True}]


def test_dual_era_sdk_server_serves_legacy_clients_through_its_modern_side(peers: Peers) -> None:
    server = modern_server(peers)
    status, report = run_check("--upstream", server.url)
    assert status == 0
    assert (report["era"], report["protocolVersion"]) == ("dual", "2025-11-25")
    assert report["transport"] == "streamable-http"
    assert report["supportedVersions"] == ["2026-07-28"]
    assert report["serverInfo"]["name"] == "mrtr-bridge-modern-peer"
    assert _tool(report, "wipe") == {
        "name": "wipe",
        "annotations": {"destructiveHint": True, "idempotentHint": False},
        "bridged": True,
    }
    assert report["bridgeable"] is True
    assert report["bridges"][:2] == [RELAYED, REVERSE]
    assert report["directions"] == {"modernClients": "relayed", "legacyClients": "reverse"}


def test_modern_only_server_is_relayed_and_served_to_legacy_clients(peers: Peers) -> None:
    server = modern_server(peers, "--modern-only")
    status, report = run_check("--upstream", server.url)
    assert status == 0
    assert (report["era"], report["protocolVersion"]) == ("modern", "2026-07-28")
    assert report["transport"] == "streamable-http"
    assert report["serverInfo"]["name"] == "mrtr-bridge-modern-peer"
    assert set(report["capabilities"]) == {"tools", "prompts", "resources"}
    assert _tool(report, "wipe") == {
        "name": "wipe",
        "annotations": {"destructiveHint": True, "idempotentHint": False},
        "bridged": True,
    }
    assert [tool["name"] for tool in report["tools"]] == ["echo", "ask_name", "wipe"]
    assert report["bridgeable"] is True
    assert report["bridges"] == [RELAYED, REVERSE]
    assert report["problems"] == []
    assert report["directions"] == {"modernClients": "relayed", "legacyClients": "reverse"}


def test_unreachable_url_prints_one_object_and_exits_2() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    status, report = run_check("--upstream", url)
    assert status == 2
    assert report["reachable"] is False
    assert (report["era"], report["protocolVersion"], report["transport"]) == (None, None, None)
    assert (report["serverInfo"], report["capabilities"], report["bridgeable"]) == (
        None,
        None,
        False,
    )
    assert len(report["problems"]) == 1
    assert report["problems"][0].startswith(f"unreachable: Cannot connect to upstream {url}")


def test_command_that_cannot_start_is_unreachable() -> None:
    status, report = run_check("--upstream-command", "/nonexistent/mcp-server --stdio")
    assert status == 2
    assert (report["reachable"], report["era"], report["transport"]) == (False, None, "stdio")
    assert report["problems"] == [
        "unreachable: Cannot start legacy stdio server '/nonexistent/mcp-server':"
        " program not found or not executable"
    ]
