"""The upstream's address without its MCP path (issue 44, item 1): `serve --upstream
http://127.0.0.1:PORT` for a server at `/mcp`. The bridge says so once at start, `/readyz` answers
503, a call's error and `check` name the likely fix ("did you mean ...mcp?"), all with the same
words (proxy/upstream/errors.py, `likely_endpoint`); with the path, the same server is ready.
Against `@modelcontextprotocol/server-everything` 2025.5.12 (TypeScript SDK 1.12.3, Express: 404
for any other path)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from translators.wire.errors import UpstreamProtocolError

from .harness import Peers, bridge_env
from .mrtr_helpers import call_tool, poster
from .streams_helpers import logged
from .test_check import run_check
from .test_one_session_server import start_everything

T = 60


async def readyz(http: aiohttp.ClientSession, port: int) -> tuple[int, dict[str, Any]]:
    async with http.get(f"http://127.0.0.1:{port}/readyz") as reply:
        return reply.status, await reply.json()


async def test_an_address_without_the_mcp_path_is_not_ready_and_says_the_likely_fix(
    peers: Peers,
) -> None:
    everything = start_everything(peers)
    bare = everything.url.removesuffix("/mcp")
    bridge = peers.bridge(bare, env=bridge_env({"log": {"level": "info"}}))
    right = peers.bridge(everything.url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        status, body = await readyz(http, bridge.port)
        reply = await call_tool(poster(http, bridge.url), "add", {"a": 1, "b": 2})
        right_status, right_body = await readyz(http, right.port)
    verdict = "no MCP endpoint at that path (it answered HTTP 404); did you mean .../mcp?"
    assert (status, body["status"]) == (503, "unavailable")
    assert body["checks"]["upstream"] == f"unreachable: {verdict}"
    error = reply.response["error"]
    assert error["message"] == UpstreamProtocolError.PUBLIC
    assert error["data"]["reason"] == verdict
    assert str(everything.port) not in json.dumps(body) + json.dumps(error)
    (warned,) = logged(bridge, "upstream_endpoint_missing")
    assert warned["level"] == "warning" and warned["url"] == bare
    assert warned["hint"] == f"did you mean {everything.url}?"
    assert (right_status, right_body["checks"]["upstream"]) == (200, "reachable")
    assert logged(right, "upstream_endpoint_missing") == []


def test_check_names_the_likely_endpoint(peers: Peers) -> None:
    everything = start_everything(peers)
    status, report = run_check("--upstream", everything.url.removesuffix("/mcp"))
    assert status == 1 and not report["bridgeable"]
    (problem,) = report["problems"]
    assert problem.startswith("not an MCP server: server/discover got HTTP 404")
    assert problem.endswith(f"; did you mean {everything.url}?")
