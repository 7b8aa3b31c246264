"""Legacy clients through the bridge: an `mcp` 1.x client gets a legacy session relayed to the
legacy server (HTTP and stdio fronts, HTTP and stdio upstreams), next to modern clients on the same
endpoint; legacy sessions are bound to the principal that opened them; `front.legacy_clients =
"refuse"` keeps the modern-only answer; the relay caps sessions per principal and streams large
answers in bounded memory."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
from aiohttp import web
from aiohttp.test_utils import TestServer

from config import env_name

from .cluster_helpers import metric
from .harness import (
    BRIDGE_EXE,
    InputAnswers,
    LegacyPoster,
    Peers,
    legacy_stdio_command,
    modern_client,
    run_legacy_script,
)

T = 60.0
FIXTURE_TOOLS = 27


async def run_legacy_client(*args: str) -> dict[str, Any]:
    """Run tests/peers/legacy_client.py (mcp 1.x) to the end; its one JSON line."""
    return await run_legacy_script("legacy_client.py", *args)


def expected_text(answer: str) -> str:
    return f'User response: action=accept, content={{"response": "{answer}"}}'


async def modern_elicitation(url: str, answer: str) -> str:
    answers = InputAnswers(elicit_content={"response": answer})
    async with modern_client(url, **answers.client_kwargs()) as client:
        result = await client.call_tool("test_elicitation", {"message": "modern asks"})
    assert [method for method, _ in answers.asked] == ["elicitation/create"]
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


async def test_mcp1_and_mcp2_clients_elicit_at_the_same_time_through_one_bridge(
    peers: Peers,
) -> None:
    bridged = peers.bridged()
    async with asyncio.timeout(T):
        legacy, modern, legacy2, modern2 = await asyncio.gather(
            run_legacy_client("--url", bridged.url, "--answer", "old-1"),
            modern_elicitation(bridged.url, "new-1"),
            run_legacy_client("--url", bridged.url, "--answer", "old-2"),
            modern_elicitation(bridged.url, "new-2"),
        )
    for report, answer in ((legacy, "old-1"), (legacy2, "old-2")):
        assert report == {
            "protocolVersion": "2025-11-25",
            "server": "mcp-legacy-conformance-fixture",
            "text": expected_text(answer),
            "asked": [f"legacy says {answer}"],
            "tools": FIXTURE_TOOLS,
            "sessionId": True,
        }
    assert (modern, modern2) == (expected_text("new-1"), expected_text("new-2"))
    assert '"mode": "legacy"' in bridged.bridge.log_text(200_000)


async def test_legacy_session_is_bound_to_the_principal_that_opened_it(peers: Peers) -> None:
    bridged = peers.bridged()
    async with (
        asyncio.timeout(T),
        aiohttp.ClientSession(headers={"Authorization": "Bearer alice"}) as alice,
        aiohttp.ClientSession(headers={"Authorization": "Bearer mallory"}) as mallory,
    ):
        owner = LegacyPoster(alice, bridged.url)
        opened = await owner.initialize()
        assert opened.status == 200 and owner.session_id
        assert opened.response["result"]["protocolVersion"] == "2025-11-25"
        thief = LegacyPoster(mallory, bridged.url, session_id=owner.session_id)
        stolen = await thief.post("tools/list")
        assert (stolen.status, stolen.response["error"]["message"]) == (404, "Session not found")
        assert await thief.close() == 404
        listed = await owner.post("tools/list")
        assert (listed.status, len(listed.response["result"]["tools"])) == (200, FIXTURE_TOOLS)
        session_id = owner.session_id
        assert await owner.close() == 200
        gone = await LegacyPoster(alice, bridged.url, session_id=session_id).post("tools/list")
        assert gone.status == 404


async def test_legacy_get_stream_is_relayed(peers: Peers) -> None:
    """The session's GET stream opens through the bridge (server messages outside any call)."""
    bridged = peers.bridged()
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        owner = LegacyPoster(http, bridged.url)
        await owner.initialize()
        headers = {
            "Mcp-Session-Id": owner.session_id or "",
            "MCP-Protocol-Version": "2025-11-25",
            "Accept": "text/event-stream",
        }
        async with http.get(bridged.url, headers=headers) as stream:
            assert (stream.status, stream.content_type) == (200, "text/event-stream")
        assert await owner.close() == 200


async def test_refused_legacy_clients_get_the_modern_only_answer(peers: Peers) -> None:
    legacy = peers.legacy()
    bridge = peers.bridge(legacy.url, env={env_name("front.legacy_clients"): "refuse"})
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await LegacyPoster(http, bridge.url).post(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        )
    assert (reply.status, reply.response["error"]["code"]) == (404, -32601)
    assert reply.response["error"]["data"] == {"supported": ["2026-07-28"]}


def _bridge_stdio(*upstream: str) -> str:
    return shlex.join([str(BRIDGE_EXE), "stdio", "--log-level", "warning", *upstream])


async def test_stdio_front_relays_a_legacy_client_to_a_stdio_upstream() -> None:
    async with asyncio.timeout(T):
        report = await run_legacy_client(
            "--command",
            _bridge_stdio("--upstream-command", legacy_stdio_command()),
            "--answer",
            "piped",
        )
    assert report == {
        "protocolVersion": "2025-11-25",
        "server": "mcp-legacy-conformance-fixture",
        "text": expected_text("piped"),
        "asked": ["legacy says piped"],
        "tools": FIXTURE_TOOLS,
    }


async def test_stdio_front_relays_a_legacy_client_to_an_http_upstream(peers: Peers) -> None:
    legacy = peers.legacy()
    async with asyncio.timeout(T):
        report = await run_legacy_client(
            "--command", _bridge_stdio("--upstream", legacy.url), "--answer", "posted"
        )
    assert report == {
        "protocolVersion": "2025-11-25",
        "server": "mcp-legacy-conformance-fixture",
        "text": expected_text("posted"),
        "asked": ["legacy says posted"],
        "tools": FIXTURE_TOOLS,
    }


async def _open(http: aiohttp.ClientSession, url: str, who: str) -> LegacyPoster:
    poster = LegacyPoster(http, url, headers={"Authorization": f"Bearer {who}"})
    opened = await poster.initialize()
    assert opened.status == 200 and poster.session_id, opened.text
    return poster


async def _status(http: aiohttp.ClientSession, url: str, who: str, session_id: str) -> int:
    poster = LegacyPoster(
        http, url, session_id=session_id, headers={"Authorization": f"Bearer {who}"}
    )
    return (await poster.post("tools/list")).status


async def _deleted_upstream(http: aiohttp.ClientSession, url: str, session_ids: list[str]) -> None:
    """Wait (bounded) until the upstream answers 404 for each of `session_ids`."""
    while [sid for sid in session_ids if await _status(http, url, "x", sid) != 404]:
        await asyncio.sleep(0.05)


async def test_the_per_principal_cap_applies_to_relayed_sessions(peers: Peers) -> None:
    """`upstream.max_sessions_per_principal` = 3 and room to spare in total: Mallory's eight
    initializes leave her three live sessions, at the bridge and at the upstream itself (the
    other five were DELETEd); Alice's session is untouched."""
    bridged = peers.bridged(env={env_name("upstream.max_sessions_per_principal"): "3"})
    url, upstream = bridged.url, bridged.legacy.url
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = await _open(http, url, "alice")
        burst = [(await _open(http, url, "mallory")).session_id or "" for _ in range(8)]
        await _deleted_upstream(http, upstream, burst[:5])
        through_bridge = [await _status(http, url, "mallory", sid) for sid in burst]
        at_upstream = [await _status(http, upstream, "x", sid) for sid in burst]
        alices = await _status(http, url, "alice", alice.session_id or "")
    assert through_bridge == at_upstream == [404] * 5 + [200] * 3
    assert alices == 200


async def test_one_principal_cannot_evict_anothers_legacy_sessions(peers: Peers) -> None:
    """Issue 24 defect 3: with a small `front.max_legacy_sessions`, another token's burst of
    initializes pushed the victim's session out, the relay ignored
    `upstream.max_sessions_per_principal` and never DELETEd what it evicted. Now a principal at its
    cap loses its own oldest session (DELETEd upstream), and with the bridge full a newcomer is
    refused while every session in use stays."""
    caps = {
        env_name("upstream.max_sessions_per_principal"): "2",
        env_name("front.max_legacy_sessions"): "4",
    }
    bridged = peers.bridged(env=caps)
    url, upstream = bridged.url, bridged.legacy.url
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = await _open(http, url, "alice")
        bob = [await _open(http, url, "bob") for _ in range(2)]
        burst = [await _open(http, url, "mallory") for _ in range(6)]
        evicted = [poster.session_id or "" for poster in burst[:-1]]
        kept = burst[-1].session_id or ""
        await _deleted_upstream(http, upstream, evicted)
        seen = {
            "alice": await _status(http, url, "alice", alice.session_id or ""),
            "bob": [await _status(http, url, "bob", p.session_id or "") for p in bob],
            "mallory evicted": [await _status(http, url, "mallory", sid) for sid in evicted],
            "mallory kept": await _status(http, url, "mallory", kept),
            "kept upstream": await _status(http, upstream, "x", kept),
        }
        carol = LegacyPoster(http, url, next_id=5, headers={"Authorization": "Bearer carol"})
        refused = await carol.post(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}},
        )
        after = await _status(http, url, "alice", alice.session_id or "")
        async with http.get(url.removesuffix("/mcp") + "/metrics") as response:
            metrics = await response.text()
    assert seen == {
        "alice": 200,
        "bob": [200, 200],
        "mallory evicted": [404] * 5,
        "mallory kept": 200,
        "kept upstream": 200,
    }
    assert (refused.status, refused.response["id"], after) == (503, 5, 200)
    assert refused.response["error"] == {
        "code": -32603,
        "message": "The bridge already has 4 legacy sessions (front.max_legacy_sessions); "
        "retry later",
        "data": {"source": "mrtr-bridge", "limit": "front.max_legacy_sessions"},
    }
    assert "mcp-session-id" not in refused.headers
    rejections = "mrtr_bridge_limit_rejections_total"
    assert metric(metrics, rejections, limit="front.max_legacy_sessions") == 1


BIG_BYTES = 100 * 1024 * 1024
BIG_CHUNK = b"x" * (1024 * 1024)


def _big_body(request_id: object) -> tuple[bytes, bytes]:
    """A `tools/call` result of about BIG_BYTES: (head, tail) around BIG_BYTES of `x`."""
    head = json.dumps({"jsonrpc": "2.0", "id": request_id}).encode()[:-1]
    return head + b', "result": {"content": [{"type": "text", "text": "', b'"}]}}'


async def _big_upstream(request: web.Request) -> web.StreamResponse:
    """A legacy server whose every tool answers ~100 MB of JSON (in 1 MiB writes)."""
    if request.method != "POST":
        return web.Response(status=405)
    message = await request.json()
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "big", "version": "1"},
        }
        reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
        return web.json_response(reply, headers={"Mcp-Session-Id": "big-session"})
    if request_id is None:
        return web.Response(status=202)
    if method != "tools/call":
        error = {"code": -32601, "message": "Method not found"}
        return web.json_response({"jsonrpc": "2.0", "id": request_id, "error": error})
    head, tail = _big_body(request_id)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(head) + BIG_BYTES + len(tail)
    await response.prepare(request)
    await response.write(head)
    for _ in range(BIG_BYTES // len(BIG_CHUNK)):
        await response.write(BIG_CHUNK)
    await response.write(tail)
    await response.write_eof()
    return response


def _peak_rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(line.split()[1]) * 1024


async def test_a_large_json_answer_is_streamed_in_bounded_memory(peers: Peers) -> None:
    """Issue 24 defect 6: the relay read any `application/json` answer whole (a 100 MB body took
    the bridge from 65 to 261 MB). Now it streams it: the legacy client gets every byte, and the
    bridge's peak memory grows by less than a quarter of the body."""
    app = web.Application()
    app.router.add_route("*", "/mcp", _big_upstream)
    upstream = TestServer(app, host="127.0.0.1")
    await upstream.start_server()
    try:
        bridge = peers.bridge(str(upstream.make_url("/mcp")))
        async with asyncio.timeout(T), aiohttp.ClientSession() as http:
            poster = await _open(http, bridge.url, "alice")
            before = _peak_rss_bytes(bridge.popen.pid)
            message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "t"}}
            headers = {
                "Mcp-Session-Id": poster.session_id or "",
                "MCP-Protocol-Version": "2025-11-25",
                "Accept": "application/json, text/event-stream",
                "Authorization": "Bearer alice",
            }
            digest, size = hashlib.sha256(), 0
            async with http.post(bridge.url, json=message, headers=headers) as response:
                status, declared = response.status, response.content_length
                async for chunk in response.content.iter_chunked(1 << 16):
                    digest.update(chunk)
                    size += len(chunk)
            growth = _peak_rss_bytes(bridge.popen.pid) - before
    finally:
        await upstream.close()
    head, tail = _big_body(9)
    expected = hashlib.sha256(head + BIG_CHUNK * (BIG_BYTES // len(BIG_CHUNK)) + tail)
    assert (status, declared, size) == (200, len(head) + BIG_BYTES + len(tail), declared)
    assert digest.hexdigest() == expected.hexdigest()
    assert growth < BIG_BYTES // 4, f"the bridge's peak RSS grew by {growth} bytes"
