"""The integration harness itself: peers start, answer and stop; raw requests are well formed."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from schema_check import assert_valid, errors

from config import load_settings
from translators.protocol.eras import (
    LEGACY_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    TOOLS_CALL,
    TOOLS_LIST,
)

from . import ports
from .harness import (
    CLIENT_INFO,
    DEMO_SERVER,
    FIXTURE_SERVER,
    LegacyPoster,
    ModernPoster,
    PeerProcess,
    Peers,
    PeerStartError,
    bridge_env,
    encode_header_value,
    free_port,
    is_listening,
    parse_sse,
)

FIXTURE_NAME = "mcp-legacy-conformance-fixture"
DEMO_NAME = "mrtr-bridge-demo"


def test_legacy_server_starts_listening_and_stops(peers: Peers) -> None:
    """A started legacy server listens on its port and is gone after close()."""
    server = peers.legacy(FIXTURE_SERVER)
    assert is_listening(server.port)
    assert server.url == f"http://127.0.0.1:{server.port}/mcp"
    peers.close()
    assert server.popen.poll() is not None
    assert not is_listening(server.port)


def test_failed_start_raises_with_the_peer_log(peers: Peers) -> None:
    """A peer that exits during start-up raises PeerStartError carrying its own error output."""
    with pytest.raises(PeerStartError) as failure:
        peers.legacy(FIXTURE_SERVER, "--transport", "carrier-pigeon")
    assert "exited with status 2" in str(failure.value)
    assert "invalid choice: 'carrier-pigeon'" in str(failure.value)


def test_a_peer_whose_port_another_process_listens_on_is_never_used(peers: Peers) -> None:
    """A port taken between its pick and the peer's bind (another test session's server) makes
    the start fail, naming it, instead of handing out the other process's server."""
    port = free_port()
    with socket.create_server(("127.0.0.1", port)):
        argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
        with pytest.raises(PeerStartError) as failure:
            peers.start("http.server", argv, port)
    assert "(another process listens on its port)" in str(failure.value)


def test_a_port_another_process_claimed_is_not_picked() -> None:
    """While one test process holds its claim on a port, no other one picks it; once it is gone,
    the port can be claimed."""
    claimer = subprocess.Popen(
        [sys.executable, "-c", CLAIMER],
        cwd=Path(__file__).parent.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert claimer.stdout is not None and claimer.stdin is not None
    try:
        port = int(claimer.stdout.readline())
        assert not ports._claim(port)
    finally:
        claimer.stdin.close()
        claimer.wait(10)
    assert ports._claim(port)
    ports.release(port)


CLAIMER = (
    "import sys\nfrom integration.ports import free_port\n"
    "print(free_port(), flush=True)\nsys.stdin.read()"
)


async def test_raw_legacy_initialize_against_the_fixture(
    legacy_server: PeerProcess, http: aiohttp.ClientSession
) -> None:
    """A hand-made legacy initialize gets a session id and a valid 2025-11-25 InitializeResult."""
    legacy = LegacyPoster(http, legacy_server.url)
    async with asyncio.timeout(20):
        reply = await legacy.initialize()
        tools = await legacy.post(TOOLS_LIST)
        closed = await legacy.close()
    assert reply.status == 200
    assert reply.headers["mcp-session-id"]
    result = reply.response["result"]
    assert_valid(result, "InitializeResult", "legacy")
    assert result["protocolVersion"] == LEGACY_VERSION
    assert result["serverInfo"]["name"] == FIXTURE_NAME
    assert_valid(tools.response["result"], "ListToolsResult", "legacy")
    assert "test_simple_text" in {tool["name"] for tool in tools.response["result"]["tools"]}
    assert closed == 200


async def test_demo_server_answers_a_legacy_tool_call(
    peers: Peers, http: aiohttp.ClientSession
) -> None:
    """The `make run` demo server initializes and answers its echo tool the legacy way."""
    demo = peers.legacy(DEMO_SERVER)
    legacy = LegacyPoster(http, demo.url)
    async with asyncio.timeout(20):
        reply = await legacy.initialize()
        echoed = await legacy.post(TOOLS_CALL, {"name": "echo", "arguments": {"text": "hi there"}})
        await legacy.close()
    assert reply.response["result"]["serverInfo"]["name"] == DEMO_NAME
    assert_valid(echoed.response["result"], "CallToolResult", "legacy")
    assert echoed.response["result"]["content"] == [{"type": "text", "text": "hi there"}]


async def test_modern_poster_fills_headers_and_meta(http: aiohttp.ClientSession) -> None:
    """A raw modern tools/call carries the three headers and the required `_meta`, and is
    schema-valid."""
    poster = ModernPoster(
        http, "http://127.0.0.1:9/mcp", capabilities={"elicitation": {"form": {}}}
    )
    body = poster.body(TOOLS_CALL, {"name": "café", "arguments": {}})
    headers = poster.request_headers(body)
    assert_valid(body, "CallToolRequest", "modern")
    assert body["params"]["_meta"] == {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_INFO: CLIENT_INFO,
        META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}}},
    }
    assert headers["MCP-Protocol-Version"] == MODERN_VERSION
    assert headers["Mcp-Method"] == TOOLS_CALL
    assert headers["Mcp-Name"] == "=?base64?Y2Fmw6k=?="
    assert poster.body(TOOLS_LIST, {"_meta": {META_CLIENT_INFO: None}})["params"][
        "_meta"
    ].keys() == {
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
    }


def test_header_encoding_and_sse_parsing() -> None:
    """Plain names pass unchanged, odd ones get the Base64 sentinel; SSE bodies yield their JSON
    data."""
    assert encode_header_value("get_weather") == "get_weather"
    assert encode_header_value(" padded") == "=?base64?IHBhZGRlZA==?="
    assert encode_header_value("=?base64?abc?=") == "=?base64?PT9iYXNlNjQ/YWJjPz0=?="
    body = (
        ': keep-alive\r\n\r\nevent: message\r\ndata: {"a": 1}\r\n\r\nid: 7\ndata: '
        '{"b":\ndata: 2}\n\n'
    )
    assert parse_sse(body) == [{"a": 1}, {"b": 2}]


def test_bridge_env_and_schema_check() -> None:
    """Settings become MRTR_BRIDGE_* variables; the schema check names what is wrong."""
    settings = {
        "held": {"ttl_s": 5, "keys": {"k1": "a", "k2": "b"}},
        "front": {"allowed_hosts": ["localhost", "bridge"]},
        "upstream": {"forward_authorization": False},
        "server_identity": "bridge",
    }
    assert bridge_env(settings) == {
        "MRTR_BRIDGE_HELD_TTL_S": "5",
        "MRTR_BRIDGE_HELD_KEYS": "k1=a,k2=b",
        "MRTR_BRIDGE_FRONT_ALLOWED_HOSTS": "localhost,bridge",
        "MRTR_BRIDGE_UPSTREAM_FORWARD_AUTHORIZATION": "false",
        "MRTR_BRIDGE_SERVER_IDENTITY": "bridge",
    }
    loaded = load_settings(config_file=None, env=bridge_env(settings))
    assert (loaded.held.ttl_s, set(loaded.held.keys), loaded.front.allowed_hosts) == (
        5,
        {"k1", "k2"},
        ("localhost", "bridge"),
    )
    assert (loaded.upstream.forward_authorization, loaded.server_identity) == (False, "bridge")
    assert errors({"content": [], "resultType": "complete"}, "CallToolResult", "modern") == []
    assert errors({"content": "nope"}, "CallToolResult", "modern") == [
        "<root>: 'resultType' is a required property",
        "content: 'nope' is not of type 'array'",
    ]
    with pytest.raises(AssertionError, match="not a valid legacy InitializeResult"):
        assert_valid({}, "InitializeResult", "legacy")
