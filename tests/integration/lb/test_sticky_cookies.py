"""Legacy server replicas behind a load balancer that pins a session to its replica with a cookie
(HAProxy from Debian, `make test-lb`): each upstream session keeps its own cookies, as each client
used directly keeps its own jar (docs/decisions.md § 33); so does a legacy client's session that
the bridge relays.

Two replicas of the real journaling server (`mcp` 1.x), HAProxy in front with round robin and
`cookie SRV insert`. Two legacy clients used directly, each with its own cookie jar, land on
different replicas and stay there; two principals through the bridge must do the same. With one
jar for the bridge's whole upstream client, the second principal's handshake carried the first
one's cookie: both were pinned to one replica, and the first principal's cookie went out with the
second principal's requests.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from translators.protocol.eras import RESULT_COMPLETE, TOOLS_CALL
from translators.wire.jsonrpc import JsonObject

from ..harness import PeerProcess, Peers, free_port
from ..raw_http import ModernPoster
from .sticky_haproxy import start_sticky_haproxy

T = 60.0  # bound on each test body, seconds
CALLS = 3


class Replicas:
    """Two journaling servers and HAProxy in front; `url` names the balancer by host name (a jar
    keeps no cookies for an IP address)."""

    def __init__(self, directory: Path, transport: str) -> None:
        self.peers = Peers(log_dir=directory)
        self.journals = {name: directory / f"journal-{name}.jsonl" for name in ("a", "b")}
        self.path = "/sse" if transport == "sse" else "/mcp"
        try:
            servers: dict[str, PeerProcess] = {
                name: self.peers.legacy(
                    "journal_server.py", "--journal", str(path), "--transport", transport
                )
                for name, path in self.journals.items()
            }
            self.port = free_port()
            ports = {name: server.port for name, server in servers.items()}
            start_sticky_haproxy(self.peers, directory / "haproxy.cfg", self.port, ports)
        except BaseException:
            self.peers.close()
            raise

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}{self.path}"

    def seen(self) -> dict[str, set[tuple[str | None, str | None]]]:
        """Per replica, the (Authorization, Mcp-Session-Id) pairs its `whoami` calls came with."""
        seen: dict[str, set[tuple[str | None, str | None]]] = {}
        for name, path in self.journals.items():
            lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
            entries = [json.loads(line) for line in lines if line.strip()]
            seen[name] = {
                (entry.get("authorization"), entry.get("session"))
                for entry in entries
                if entry["event"] == "whoami"
            }
        return seen


@pytest.fixture
def replicas(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Replicas]:
    """The replicas over Streamable HTTP, or the transport a test names (`indirect`)."""
    replicas = Replicas(tmp_path, getattr(request, "param", "http"))
    try:
        yield replicas
    finally:
        replicas.peers.close()


async def _legacy_client(url: str, authorization: str) -> None:
    """A legacy client with its own HTTP client and cookie jar (as the `mcp` SDK's): one session at
    `url` (the balancer, or the bridge), `CALLS` whoami calls."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": authorization}
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar()) as http:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "direct", "version": "1"},
            },
        }
        async with http.post(url, json=init, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
            headers["MCP-Protocol-Version"] = "2025-06-18"
            await resp.read()
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(url, json=done, headers=headers) as resp:
            assert resp.status == 202
        for index in range(CALLS):
            message = {
                "jsonrpc": "2.0",
                "id": index + 1,
                "method": "tools/call",
                "params": {"name": "whoami", "arguments": {}},
            }
            async with http.post(url, json=message, headers=headers) as resp:
                assert resp.status == 200, await resp.text()
                assert b'"isError":false' in await resp.read()


async def _whoami(poster: ModernPoster) -> str:
    """The upstream session id a `whoami` call through the bridge arrived with."""
    reply = await poster.post(TOOLS_CALL, {"name": "whoami", "arguments": {}})
    result: JsonObject = reply.response["result"]
    assert result["resultType"] == RESULT_COMPLETE, result
    session: str = json.loads(result["content"][0]["text"])["session"]
    return session


def _pinned(seen: dict[str, set[tuple[str | None, str | None]]]) -> dict[str, set[str]]:
    """Per replica, the principals whose calls it served, each with one session there."""
    pinned: dict[str, set[str]] = {}
    for name, pairs in seen.items():
        principals = [authorization for authorization, _ in pairs if authorization]
        assert len(principals) == len(set(principals)), f"{name} saw a principal twice: {pairs}"
        pinned[name] = set(principals)
    return pinned


async def test_legacy_clients_stay_on_their_replicas(replicas: Replicas) -> None:
    """The ground truth: two clients used directly, one after the other, are pinned to one replica
    each by the balancer's cookie, every call on the replica that served their handshake."""
    async with asyncio.timeout(T):
        await _legacy_client(replicas.url, "Bearer alice")
        await _legacy_client(replicas.url, "Bearer bob")
    pinned = _pinned(replicas.seen())
    assert sorted(map(sorted, pinned.values())) == [["Bearer alice"], ["Bearer bob"]]


@pytest.mark.parametrize("replicas", ["http", "sse"], indirect=True)
async def test_each_principal_keeps_its_own_cookies_through_the_bridge(
    replicas: Replicas,
) -> None:
    """Through the bridge, two principals' sessions are pinned as the direct clients were: one
    replica each, every call of a session on its replica, and neither principal's cookie sent with
    the other's requests (else both would share the first one's replica). Over HTTP+SSE the
    cookie set on the GET stream goes with the session's POSTs (else they would reach the other
    replica, which does not know the session)."""
    bridge = replicas.peers.bridge(replicas.url, env={"MRTR_BRIDGE_UPSTREAM_SESSION_LIMIT": "many"})
    sessions: dict[str, set[str]] = {"alice": set(), "bob": set()}
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        posters = {
            who: ModernPoster(http, bridge.url, headers={"Authorization": f"Bearer {who}"})
            for who in sessions
        }
        for _ in range(CALLS):  # alice's handshake first, then bob's; then their calls in turn
            for who, poster in posters.items():
                sessions[who].add(await _whoami(poster))
    assert [len(ids) for ids in sessions.values()] == [1, 1]  # no session lost, none re-opened
    pinned = _pinned(replicas.seen())
    assert sorted(map(sorted, pinned.values())) == [["Bearer alice"], ["Bearer bob"]]


async def test_relayed_legacy_clients_keep_their_own_cookies(replicas: Replicas) -> None:
    """Legacy clients whose sessions the bridge relays are pinned as when used directly: the
    relay keeps each relayed session's cookies, not one jar for every client."""
    bridge = replicas.peers.bridge(replicas.url, env={"MRTR_BRIDGE_UPSTREAM_SESSION_LIMIT": "many"})
    async with asyncio.timeout(T):
        await _legacy_client(bridge.url, "Bearer alice")
        await _legacy_client(bridge.url, "Bearer bob")
    pinned = _pinned(replicas.seen())
    assert sorted(map(sorted, pinned.values())) == [["Bearer alice"], ["Bearer bob"]]
