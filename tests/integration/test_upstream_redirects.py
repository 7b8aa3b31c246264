"""Upstream redirects (issue 40, defect 2; docs/security.md, "Upstream redirects"). The configured
upstream is a tiny proxy in the test that passes everything to a real server and answers what it
is told to redirect with `307` to another origin; that other origin forwards to the same server,
so a bridge that followed would succeed there, with the secret `upstream.headers` on its
requests. On every path (a modern client's call, a relayed legacy client's, a legacy client's in
front of a modern server, a stdio legacy client's, `check`) the other origin receives nothing,
the client gets a JSON-RPC error that names the reason and no internal URL, and `check` says how
to fix the setting. A redirect within the upstream's origin (`mcp` 1.8/1.9: `/mcp` -> `/mcp/`)
is still followed, now by the relay too: a legacy client used directly follows it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from config import ENV_PREFIX
from translators.protocol.eras import TOOLS_CALL
from translators.wire.errors import BRIDGE_MARKER, INTERNAL_ERROR

from .harness import BRIDGE_EXE, PEERS_DIR, PeerProcess, Peers, free_port
from .raw_http import LegacyPoster, ModernPoster, RawReply
from .recording_proxy import RecordingProxy, recording_proxy
from .test_legacy_stdio_lines import legacy_session, line, read_answer

T = 60.0
KEY = "k-5d2e8f-redirected-api-key"
HEADERS = {"MRTR_BRIDGE_UPSTREAM_HEADERS": f"X-API-Key={KEY}"}
OFF_ORIGIN = (
    "The upstream server redirected the request to another origin, which the bridge does not follow"
)
ECHO = {"name": "echo", "arguments": {"text": "hi"}}


def is_call(method: str, path: str, body: bytes) -> bool:
    """A `tools/call` POST (what the tiny upstream redirects in most tests)."""
    try:
        message = json.loads(body) if method == "POST" else None
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == TOOLS_CALL


@asynccontextmanager
async def calls_redirected(
    target: str, redirects: Any = is_call
) -> AsyncIterator[tuple[RecordingProxy, RecordingProxy]]:
    """The configured upstream (passes all to `target`, redirects what `redirects` names) and
    the other origin it redirects to (records, and forwards to `target` too)."""
    async with (
        recording_proxy(target) as other,
        recording_proxy(target, redirect_to=other.url, redirects=redirects) as upstream,
    ):
        yield upstream, other


def journal_server(peers: Peers, tmp_path: Path) -> PeerProcess:
    return peers.legacy("journal_server.py", "--journal", str(tmp_path / "journal.jsonl"))


def modern_only_server(peers: Peers) -> PeerProcess:
    port = free_port()
    argv = [sys.executable, str(PEERS_DIR / "modern_server.py"), "--port", str(port)]
    return peers.start("modern", [*argv, "--modern-only"], port)


async def bridge_for(peers: Peers, upstream: RecordingProxy) -> PeerProcess:
    """The bridge in front of `upstream`, started while the test's loop keeps serving it."""
    return await asyncio.to_thread(peers.bridge, upstream.url, env=HEADERS)


def assert_public_off_origin(error: Any) -> None:
    """The error names the reason, with a correlation id into the log, and no internal URL."""
    assert error["code"] == INTERNAL_ERROR
    assert error["message"] == OFF_ORIGIN
    assert error["data"]["source"] == BRIDGE_MARKER
    assert set(error["data"]) == {"source", "correlationId"}


def assert_logged_not_leaked(bridge: PeerProcess, other: RecordingProxy) -> None:
    log = bridge.log_text(limit=10_000_000)
    assert f"127.0.0.1:{other.port}/mcp" in log  # the target, for the operator
    assert KEY not in log


Send = Callable[[aiohttp.ClientSession, str], Awaitable[RawReply]]


async def modern_echo(http: aiohttp.ClientSession, url: str) -> RawReply:
    return await ModernPoster(http, url).post(TOOLS_CALL, ECHO)


async def legacy_echo(http: aiohttp.ClientSession, url: str) -> RawReply:
    client = LegacyPoster(http, url)
    await client.initialize()
    return await client.post(TOOLS_CALL, ECHO)


async def through_the_bridge(
    peers: Peers, server: PeerProcess, send: Send
) -> tuple[RawReply, RecordingProxy, RecordingProxy, PeerProcess]:
    """`send` through a bridge whose upstream redirects `server`'s calls to another origin: the
    reply, the upstream, the other origin and the bridge."""
    async with asyncio.timeout(T), calls_redirected(server.url) as (upstream, other):
        bridge = await bridge_for(peers, upstream)
        async with aiohttp.ClientSession() as http:
            reply = await send(http, bridge.url)
    return reply, upstream, other, bridge


async def test_a_modern_clients_call_is_never_sent_to_another_origin(
    peers: Peers, tmp_path: Path
) -> None:
    server = journal_server(peers, tmp_path)
    reply, upstream, other, bridge = await through_the_bridge(peers, server, modern_echo)
    assert len(upstream.redirected) == 1
    assert other.requests == []
    assert_public_off_origin(reply.response["error"])
    assert_logged_not_leaked(bridge, other)


async def test_a_relayed_legacy_clients_call_gets_an_error_not_the_redirect(
    peers: Peers, tmp_path: Path
) -> None:
    server = journal_server(peers, tmp_path)
    reply, upstream, other, bridge = await through_the_bridge(peers, server, legacy_echo)
    assert len(upstream.redirected) == 1
    assert other.requests == []
    assert reply.status == 502
    assert "location" not in reply.headers
    assert reply.response["id"] == 2
    assert_public_off_origin(reply.response["error"])
    assert_logged_not_leaked(bridge, other)


async def test_a_legacy_clients_call_in_front_of_a_modern_server_is_not_followed(
    peers: Peers,
) -> None:
    server = modern_only_server(peers)
    reply, upstream, other, bridge = await through_the_bridge(peers, server, legacy_echo)
    assert len(upstream.redirected) == 1
    assert other.requests == []
    assert_public_off_origin(reply.response["error"])  # as on every path, with its correlation id
    assert '"mode": "reverse"' in bridge.log_text(limit=10_000_000)
    assert_logged_not_leaked(bridge, other)


async def test_a_stdio_legacy_clients_call_is_not_followed(peers: Peers, tmp_path: Path) -> None:
    server = journal_server(peers, tmp_path)
    headers = {"upstream": {"headers": {"X-API-Key": KEY}}}
    async with (
        asyncio.timeout(T),
        calls_redirected(server.url) as (upstream, other),
        legacy_session(upstream.url, **headers) as (_, stdin, stdout),
    ):
        stdin.write(line({"jsonrpc": "2.0", "id": 7, "method": TOOLS_CALL, "params": ECHO}))
        await stdin.drain()
        answer = await read_answer(stdout, 7)
    assert len(upstream.redirected) == 1
    assert other.requests == []
    assert_public_off_origin(answer["error"])


async def test_a_redirect_within_the_origin_is_followed_by_the_relay_too(
    peers: Peers, tmp_path: Path
) -> None:
    """`/mcp` answered 307 to `/mcp/` on the same origin (FastMCP on `mcp` 1.8/1.9): a legacy
    client used directly follows it, and so does the relay for a legacy client of the bridge."""
    server = journal_server(peers, tmp_path)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        direct, bridged = await _echo_both_ways(peers, http, server.url)
    assert direct == bridged == "hi"


async def _echo_both_ways(
    peers: Peers, http: aiohttp.ClientSession, server_url: str
) -> tuple[str, str]:
    """A legacy client's echo through an upstream whose `/mcp` redirects to `/mcp/`, used directly
    and through the bridge's relay; the two answers' texts."""
    texts = []
    async with _slash_redirecting(server_url) as upstream:
        bridge = await asyncio.to_thread(peers.bridge, upstream.url)
        for url in (upstream.url, bridge.url):
            reply = await legacy_echo(http, url)
            texts.append(reply.response["result"]["content"][0]["text"])
        assert {r.method for r in upstream.redirected} == {"POST"}
    return texts[0], texts[1]


@asynccontextmanager
async def _slash_redirecting(target: str) -> AsyncIterator[RecordingProxy]:
    """Forwards `/mcp/` to `target` and answers `/mcp` with 307 to `/mcp/` on its own origin."""
    async with recording_proxy(target, "/mcp/", lambda m, path, b: path == "/mcp") as proxy:
        yield proxy


async def test_check_reports_a_redirect_to_another_origin_with_the_fix(
    peers: Peers, tmp_path: Path
) -> None:
    server = journal_server(peers, tmp_path)
    async with (
        asyncio.timeout(T),
        calls_redirected(server.url, lambda m, p, b: True) as (
            upstream,
            other,
        ),
    ):
        status, report = await run_check("--upstream", upstream.url)
    assert other.requests == []
    assert status == 1  # answered, but not bridgeable
    assert report["reachable"] is True and report["bridgeable"] is False
    assert report["problems"] == [
        f"redirects to another origin ({other.url}): the bridge never follows a redirect off"
        f" the origin of upstream.url; set upstream.url to the final URL"
    ]


async def run_check(*args: str) -> tuple[int, dict[str, Any]]:
    """`mrtr-bridge check <args> --json` without blocking the loop the tiny upstream runs on."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    process = await asyncio.create_subprocess_exec(
        str(BRIDGE_EXE),
        "check",
        *args,
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env={**base, **HEADERS},
    )
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, json.loads(out)
