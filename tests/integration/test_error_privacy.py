"""What clients are told about failures carries no internals (issue 16, defects 4 and 5), and
says why (issue 44, item 4).

The probe found the stdio program and pid in the error of a call whose child died, the internal
upstream address in HTTP upstream errors, and an oversized `Authorization` header quoted back in a
400 body. Real peers: `mrtr-bridge serve` in front of the mcp 1.x interactive server (stdio and
HTTP), or of nothing at all. Each error names the failure and carries a `correlationId`; the bridge
log has the details under that id. Where the bridge knows why in words a client may see, the error
says so in `data.reason` (proxy/common/faults.py): a held call whose HTTP server died, a stdio
server that exited before answering `initialize` (its last stderr lines: a desktop user never sees
the bridge's stderr), through `serve` and through `mrtr-bridge stdio`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp import Client, MCPError, StdioServerParameters

from config import env_name
from translators.protocol.eras import MODERN_VERSION
from translators.wire.errors import (
    BRIDGE_MARKER,
    INTERNAL_ERROR,
    UpstreamProtocolError,
    UpstreamUnavailable,
)

from .harness import (
    BRIDGE_EXE,
    LEGACY_PYTHON,
    REPO_ROOT,
    LegacyPoster,
    PeerProcess,
    Peers,
    bridge_env,
    free_port,
)
from .mrtr_helpers import Journal, accept, call_tool, input_required, poster
from .test_modern_upstream import modern_server, readyz

T = 60.0
SECRET_ARG = "s3cret-arg-7f1c"  # part of the stdio command line: it must never reach a client
REFUSED = "cannot connect: connection refused"


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


def public_error(reply_text: str, message: str, reason: str | None = None) -> str:
    """The error is `message` with a correlation id, `reason` (if any) and nothing else; returns
    the id."""
    error = json.loads(reply_text)["error"]
    correlation_id = error["data"]["correlationId"]
    why = {"reason": reason} if reason is not None else {}
    assert error == {
        "code": INTERNAL_ERROR,
        "message": message,
        "data": {"source": BRIDGE_MARKER, "correlationId": correlation_id, **why},
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
    correlation_id = public_error(text, UpstreamUnavailable.PUBLIC, REFUSED)
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
    correlation_id = public_error(reply.text, UpstreamUnavailable.PUBLIC, REFUSED)
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
    correlation_id = public_error(reply.text, UpstreamUnavailable.PUBLIC, REFUSED)
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
    hint = "no MCP endpoint at that path (it answered HTTP 404); did you mean .../mcp?"
    correlation_id = public_error(text, error["message"], hint)
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


async def test_a_held_call_whose_server_died_tells_the_retry_why(peers: Peers) -> None:
    """The interactive server over HTTP stops while a call waits for its client: the retry's
    error says the stream closed before the answer (no address), the log has the rest."""
    legacy = peers.legacy("interactive_server.py", "--state-dir", str(peers.log_dir))
    bridge = peers.bridge(legacy.url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, bridge.url)
        requests, state = input_required(await call_tool(post, "ask", {"tag": "died"}))
        legacy.stop()
        ((key, _request),) = requests.items()
        answers = {key: accept(answer="too late")}
        reply = await call_tool(post, "ask", {"tag": "died"}, responses=answers, state=state)
    text = json.dumps(reply.response)
    reason = "it closed the stream of tools/call before answering"
    correlation_id = public_error(text, UpstreamProtocolError.PUBLIC, reason)
    assert str(legacy.port) not in text and "127.0.0.1" not in text
    assert str(legacy.port) in log_entry(bridge, correlation_id)["error"]


MISSING = "mrtr_no_such_module_5e1"  # what a stdio server that cannot start lacks


def cannot_start() -> str:
    return shlex.join([str(LEGACY_PYTHON), "-m", MISSING, SECRET_ARG])


async def test_a_stdio_server_that_cannot_start_tells_the_client_why(peers: Peers) -> None:
    """`python -m <missing module>` behind `serve`: the client is told the exit and the last
    lines the program wrote to stderr (its own words), which name the missing module."""
    bridge = peers.bridge(None, env=bridge_env({"upstream": {"command": cannot_start()}}))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await call_tool(poster(http, bridge.url), "echo", {"text": "x"})
    error = reply.response["error"]
    assert SECRET_ARG not in json.dumps(reply.response)
    assert error["message"] == UpstreamUnavailable.PUBLIC
    assert error["data"]["reason"] == (
        "legacy server process exited with code 1 before answering initialize; its stderr ended"
        f" with: {LEGACY_PYTHON}: No module named {MISSING}"
    )


async def test_a_desktop_client_is_told_why_its_stdio_server_cannot_start() -> None:
    """The same through `mrtr-bridge stdio`, as a desktop client launches it: the bridge's stderr
    goes where the user never looks, the error's reason does not."""
    server = StdioServerParameters(
        command=str(BRIDGE_EXE),
        args=["stdio", "--upstream-command", cannot_start(), "--log-level", "error"],
        env={"PATH": os.environ.get("PATH", "")},
        cwd=str(REPO_ROOT),
    )
    async with (
        asyncio.timeout(T),
        Client(server, mode=MODERN_VERSION, cache=None) as client,
    ):
        with pytest.raises(MCPError) as failed:
            await client.list_tools()
    assert failed.value.error.message == UpstreamUnavailable.PUBLIC
    data = failed.value.error.data
    assert isinstance(data, dict)
    assert data["reason"].endswith(f": No module named {MISSING}")
    assert data["reason"].startswith("legacy server process exited with code 1 before answering")
