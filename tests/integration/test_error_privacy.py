"""What clients are told about failures carries no internals (issue 16, defects 4 and 5).

The probe found the stdio program and pid in the error of a call whose child died, the internal
upstream address in HTTP upstream errors, and an oversized `Authorization` header quoted back in a
400 body. Real peers: `mrtr-bridge serve` in front of the mcp 1.x interactive server (stdio and
HTTP), or of nothing at all. Each error names the failure and carries a `correlationId`; the bridge
log has the details under that id.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import aiohttp

from config import env_name
from translators.wire.errors import BRIDGE_MARKER, INTERNAL_ERROR, UpstreamUnavailable

from .harness import LegacyPoster, PeerProcess, Peers, free_port
from .mrtr_helpers import Journal, call_tool, poster
from .test_modern_upstream import modern_server, readyz

T = 60.0
SECRET_ARG = "s3cret-arg-7f1c"  # part of the stdio command line: it must never reach a client


def log_entry(bridge: PeerProcess, correlation_id: str) -> dict[str, Any]:
    """The bridge's one log line for `correlation_id`."""
    lines = [
        json.loads(line)
        for line in bridge.log_text(1_000_000).splitlines()
        if correlation_id in line
    ]
    assert len(lines) == 1, lines
    entry: dict[str, Any] = lines[0]
    assert entry["correlation_id"] == correlation_id and entry["event"] == "front_request_failed"
    return entry


def public_error(reply_text: str, message: str) -> str:
    """The error is `message` with a correlation id and nothing else; returns the id."""
    error = json.loads(reply_text)["error"]
    correlation_id = error["data"]["correlationId"]
    assert error == {
        "code": INTERNAL_ERROR,
        "message": message,
        "data": {"source": BRIDGE_MARKER, "correlationId": correlation_id},
    }
    assert len(correlation_id) == 16 and int(correlation_id, 16) >= 0
    return str(correlation_id)


async def test_a_dead_stdio_child_is_named_by_its_exit_not_its_command(
    peers: Peers, tmp_path: Path
) -> None:
    """SIGKILL of the child running an attached call: the client learns the exit, the log the
    command."""
    state_dir = tmp_path / SECRET_ARG
    state_dir.mkdir()
    journal = Journal(state_dir)
    bridge = peers.bridge_stdio("interactive_server.py", "--state-dir", str(state_dir))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, bridge.url)
        attached = asyncio.create_task(
            call_tool(post, "slow", {"tag": "privacy-slow", "seconds": 30})
        )
        await journal.wait_for("privacy-slow", "call")
        (pid,) = journal.pids("privacy-slow")
        os.kill(pid, signal.SIGKILL)
        reply = await attached
    text = json.dumps(reply.response)
    correlation_id = public_error(
        text,
        "The upstream session was lost: legacy server process exited with code -9 (killed by "
        "SIGKILL)",
    )
    for internal in (SECRET_ARG, "interactive_server", "python", str(pid), "stdio:"):
        assert internal not in text
    logged = log_entry(bridge, correlation_id)
    assert logged["kind"] == "UpstreamSessionLost" and f"pid {pid}" in logged["error"]


async def test_http_upstream_errors_hide_the_upstream_address(peers: Peers) -> None:
    """Nothing listens at the upstream: 'unavailable' for the client, the address and cause in the
    log."""
    port = free_port()
    bridge = peers.bridge(f"http://127.0.0.1:{port}/mcp")
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await call_tool(poster(http, bridge.url), "echo", {"text": "x"})
    text = json.dumps(reply.response)
    correlation_id = public_error(text, UpstreamUnavailable.PUBLIC)
    assert str(port) not in text and "127.0.0.1" not in text
    logged = log_entry(bridge, correlation_id)
    assert logged["error"].startswith(f"Cannot connect to upstream http://127.0.0.1:{port}/mcp")


async def test_the_legacy_relay_hides_the_upstream_address_and_echoes_the_id(
    peers: Peers,
) -> None:
    """Issue 24 defect 2: a legacy client's initialize to a bridge whose upstream is down got a 502
    naming the upstream URL with `"id": null`. Now: the failure named, the request's own id, a
    correlation id into the log (which has the address)."""
    port = free_port()
    bridge = peers.bridge(f"http://127.0.0.1:{port}/mcp")
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        legacy = LegacyPoster(http, bridge.url, next_id=41)
        reply = await legacy.post(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}},
        )
    assert (reply.status, reply.response["id"]) == (502, 41)
    correlation_id = public_error(reply.text, UpstreamUnavailable.PUBLIC)
    assert str(port) not in reply.text and "127.0.0.1" not in reply.text
    logged = log_entry(bridge, correlation_id)
    assert logged["error"].startswith(f"Cannot connect to upstream http://127.0.0.1:{port}/mcp")


async def test_the_modern_relay_hides_the_upstream_address_and_echoes_the_id(
    peers: Peers,
) -> None:
    """The same for a modern request relayed to a modern upstream that has gone away."""
    modern = modern_server(peers, "--modern-only")
    bridge = peers.bridge(modern.url, env={env_name("upstream.era_probe_interval_s"): "0"})
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        assert (await readyz(bridge))["checks"]["era"] == "modern"
        modern.stop()
        reply = await poster(http, bridge.url).post(
            "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id="call-7"
        )
    assert (reply.status, reply.response["id"]) == (502, "call-7")
    correlation_id = public_error(reply.text, UpstreamUnavailable.PUBLIC)
    assert str(modern.port) not in reply.text and "127.0.0.1" not in reply.text
    assert f"127.0.0.1:{modern.port}" in log_entry(bridge, correlation_id)["error"]


async def test_an_upstream_http_error_page_is_not_relayed(peers: Peers) -> None:
    """An upstream that answers initialize with a 404 page: a named failure, no upstream text or
    address."""
    legacy = peers.legacy("interactive_server.py", "--state-dir", str(peers.log_dir))
    bridge = peers.bridge(legacy.url.removesuffix("/mcp") + "/no-such-endpoint")
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await call_tool(poster(http, bridge.url), "echo", {"text": "x"})
    text = json.dumps(reply.response)
    error = json.loads(text)["error"]
    correlation_id = public_error(text, error["message"])
    assert error["message"].startswith("The upstream ")
    assert (
        str(legacy.port) not in text and "no-such-endpoint" not in text and "Not Found" not in text
    )
    assert "no-such-endpoint" in log_entry(bridge, correlation_id)["error"]


async def test_an_oversized_authorization_header_is_not_echoed(peers: Peers) -> None:
    """A header over 8,190 bytes gets a 400 that says only its status; the next request is
    served."""
    bridge = peers.bridge(f"http://127.0.0.1:{free_port()}/mcp")
    token = "tok-" + "A" * 9000
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{bridge.port}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    async with asyncio.timeout(T):
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
        writer.write(head.encode())
        await writer.drain()
        raw = await reader.read()
        writer.close()
        await writer.wait_closed()
        async with (
            aiohttp.ClientSession() as http,
            http.get(bridge.url.removesuffix("/mcp") + "/healthz") as health,
        ):
            assert health.status == 200
    status_line, _, rest = raw.partition(b"\r\n")
    _, _, body = rest.partition(b"\r\n\r\n")
    assert status_line in (b"HTTP/1.0 400 Bad Request", b"HTTP/1.1 400 Bad Request")
    assert body == b"400 Bad Request"
    assert b"tok-" not in raw and b"AAAA" not in raw and b"Bearer" not in raw
