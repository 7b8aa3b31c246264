"""Modern upstreams behind the bridge: detected, relayed untranslated (every request reaches the
upstream byte for byte), re-detected when the server behind a running bridge is upgraded, and a
legacy client in front of a modern-only upstream gets a session served by the bridge."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import aiohttp
import mcp_types as types

from config import env_name

from .harness import (
    PEERS_DIR,
    InputAnswers,
    LegacyPoster,
    PeerProcess,
    Peers,
    free_port,
    modern_client,
)
from .recording_proxy import recording_proxy

T = 60.0
MODERN_SERVER = PEERS_DIR / "modern_server.py"


def modern_server(peers: Peers, *args: str, port: int | None = None) -> PeerProcess:
    port = port or free_port()
    return peers.start(
        "modern", [sys.executable, str(MODERN_SERVER), "--port", str(port), *args], port
    )


async def readyz(bridge: PeerProcess) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{bridge.port}/readyz") as response,
    ):
        body: dict[str, Any] = await response.json()
        return body


def text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


async def exercise(url: str) -> tuple[list[str], str, str, list[str]]:
    """tools/list, an elicitation round trip (InputRequiredResult, retry) and a plain call."""
    answers = InputAnswers(elicit_content={"name": "Ada"})
    async with modern_client(url, **answers.client_kwargs()) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        asked = text(await client.call_tool("ask_name", {}))
        echoed = text(await client.call_tool("echo", {"text": "unchanged"}))
    return tools, asked, echoed, [method for method, _ in answers.asked]


async def test_modern_requests_reach_a_modern_upstream_unchanged(peers: Peers) -> None:
    server = modern_server(peers, "--modern-only")
    async with asyncio.timeout(T), recording_proxy(server.url) as upstream_side:
        # the proxy answers meanwhile
        bridge = await asyncio.to_thread(peers.bridge, upstream_side.url)
        probes = len(upstream_side.requests)
        async with recording_proxy(bridge.url) as client_side:
            tools, asked, echoed, questions = await exercise(client_side.url)
    assert (tools, asked, echoed, questions) == (
        ["echo", "ask_name", "wipe"],
        "Hello Ada",
        "unchanged",
        ["elicitation/create"],
    )
    sent = [(r.method, r.body, r.headers) for r in client_side.requests]
    received = [(r.method, r.body, r.headers) for r in upstream_side.requests[probes:]]
    assert received == sent
    methods = [json.loads(body)["method"] for _, body, _ in sent]
    # ask_name twice (first round, retry with inputResponses), echo
    assert methods.count("tools/call") == 3
    retry = json.loads(sent[methods.index("tools/call") + 1][1])
    assert "inputResponses" in retry["params"]  # the upstream's own requestState round, untouched


async def test_bridge_reports_the_era_and_relays(peers: Peers) -> None:
    server = modern_server(peers)
    bridge = peers.bridge(server.url)
    async with asyncio.timeout(T):
        report = await readyz(bridge)
        tools, asked, _, _ = await exercise(bridge.url)
    assert report["checks"]["era"] == "dual"
    assert (tools, asked) == (["echo", "ask_name", "wipe"], "Hello Ada")
    assert '"event": "upstream_era_detected"' in bridge.log_text(100_000)
    assert '"mode": "relayed"' in bridge.log_text(100_000)


async def test_legacy_client_in_front_of_a_modern_only_upstream_gets_a_session(
    peers: Peers,
) -> None:
    """The bridge answers the legacy initialize itself, from the upstream's server/discover."""
    server = modern_server(peers, "--modern-only")
    bridge = peers.bridge(server.url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        poster = LegacyPoster(http, bridge.url)
        reply = await poster.initialize()
        listed = await poster.post("tools/list")
        closed = await poster.close()
    assert reply.status == 200
    result = reply.response["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "mrtr-bridge-modern-peer"
    assert len(reply.headers["mcp-session-id"]) >= 32 and closed == 200
    tools = listed.response["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["echo", "ask_name", "wipe"]
    assert "resultType" not in listed.response["result"]


async def test_upstream_upgraded_while_the_bridge_runs(peers: Peers) -> None:
    """A legacy server is replaced by a modern one on the same port: the next calls work, no
    restart."""
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url, env={env_name("upstream.era_probe_interval_s"): "0"})
    async with asyncio.timeout(T):
        assert (await readyz(bridge))["checks"]["era"] == "legacy"
        async with modern_client(bridge.url) as client:
            before = text(await client.call_tool("test_simple_text", {}))
        legacy.stop()
        modern_server(peers, "--modern-only", port=legacy.port)
        tools, asked, echoed, _ = await exercise(bridge.url)
        after = await readyz(bridge)
    assert before == "This is a simple text response for testing."
    assert (tools, asked, echoed) == (["echo", "ask_name", "wipe"], "Hello Ada", "unchanged")
    assert (after["status"], after["checks"]["era"]) == ("ready", "modern")
    assert '"event": "upstream_era_changed"' in bridge.log_text(200_000)
