"""The reverse direction by hand (raw HTTP, a legacy client's messages written out) in front of the
real modern-only `mcp` 2.x interactive server: a client that never answers a push, one that goes
away mid-round, cancellation, the session's principal, every legacy revision, the GET stream's list
changes and resource updates, and malformed or misplaced messages."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from config import env_name
from translators.wire.sse import SSEDecoder

from .harness import PEERS_DIR, PeerProcess, Peers, free_port
from .streams_helpers import wait_logged
from .test_reverse_http import modern_interactive

T = 60.0
ELICIT_CAPS = {"elicitation": {}}


class Legacy:
    """One hand-made legacy session: `initialize` at `version`, then the session id on each
    message."""

    def __init__(self, http: aiohttp.ClientSession, url: str, authorization: str = "Bearer a"):
        self.http, self.url, self.authorization = http, url, authorization
        self.session_id: str | None = None
        self.ids = 0

    def headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": self.authorization,
        }
        return headers | ({"Mcp-Session-Id": self.session_id} if self.session_id else {})

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        return {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params or {}}

    async def initialize(self, version: str = "2025-11-25", caps: Any = None) -> dict[str, Any]:
        status, reply = await self.open(version, caps)
        assert status == 200, reply
        return reply["result"]

    async def open(self, version: str = "2025-11-25", caps: Any = None) -> tuple[int, Any]:
        """`initialize` (then `initialized` when it succeeded): the status and the reply."""
        params = {
            "protocolVersion": version,
            "capabilities": ELICIT_CAPS if caps is None else caps,
            "clientInfo": {"name": "raw-legacy", "version": "1"},
        }
        status, reply, headers = await self.send(self.request("initialize", params))
        if status == 200:
            self.session_id = headers["Mcp-Session-Id"]
            sent, _, _ = await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert sent == 202
        return status, reply

    async def send(self, message: Any) -> tuple[int, Any, Any]:
        async with self.http.post(self.url, json=message, headers=self.headers()) as response:
            text = await response.text()
            if response.content_type == "text/event-stream":
                return response.status, sse_messages(text)[-1], response.headers
            return response.status, json.loads(text) if text else None, response.headers

    @asynccontextmanager
    async def stream(self, message: Any) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """POST `message` and iterate the messages of its SSE reply as they come."""
        async with self.http.post(self.url, json=message, headers=self.headers()) as response:
            assert response.content_type == "text/event-stream", await response.text()
            yield messages_of(response)


def sse_messages(text: str) -> list[Any]:
    events = SSEDecoder(max_event_size=1 << 20).feed(text.encode() + b"\n\n")
    return [json.loads(event.data) for event in events if event.data]


async def messages_of(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    decoder = SSEDecoder(max_event_size=1 << 20)
    async for chunk in response.content.iter_any():
        for event in decoder.feed(chunk):
            if event.data:
                yield json.loads(event.data)


def started(peers: Peers, **settings: str) -> PeerProcess:
    return started_with_server(peers, **settings)[0]


def started_with_server(peers: Peers, **settings: str) -> tuple[PeerProcess, PeerProcess]:
    """The bridge, and the modern-only server behind it."""
    server = modern_interactive(peers, "--modern-only")
    env = {env_name(k): v for k, v in settings.items()}
    return peers.bridge(server.url, env=env), server


async def test_a_client_that_never_answers_gets_the_push_cancelled(peers: Peers) -> None:
    bridge = started(peers, **{"reverse.push_timeout_s": "1"})
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        client = Legacy(http, bridge.url)
        await client.initialize()
        began = time.monotonic()
        async with client.stream(
            client.request("tools/call", {"name": "ask", "arguments": {"tag": "x"}})
        ) as replies:
            seen = [message async for message in replies]
        took = time.monotonic() - began
    push, cancelled, final = seen
    assert push["method"] == "elicitation/create"
    assert cancelled == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": push["id"], "reason": "The request was cancelled or timed out"},
    }
    assert final["error"] == {
        "code": -32603,
        "message": "The client did not answer elicitation/create within 1 s",
        "data": {"inputKey": "answer"},
    }
    assert 1.0 <= took < 20.0


async def test_a_client_that_goes_away_mid_round_leaves_the_session_usable(peers: Peers) -> None:
    bridge = started(peers)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        client = Legacy(http, bridge.url)
        await client.initialize()
        async with client.stream(
            client.request("tools/call", {"name": "ask", "arguments": {"tag": "y"}})
        ) as replies:
            push = await anext(replies)  # then the connection is dropped
        late = {"jsonrpc": "2.0", "id": push["id"], "result": {"action": "accept", "content": {}}}
        late_status, _, _ = await client.send(late)
        status, echoed, _ = await client.send(
            client.request("tools/call", {"name": "echo", "arguments": {"text": "still here"}})
        )
    assert push["method"] == "elicitation/create"
    assert late_status == 202  # accepted and dropped: nothing waits for it any more
    assert (status, echoed["result"]["content"][0]["text"]) == (200, "still here")
    log = bridge.final_log()
    finished = [json.loads(line) for line in log.splitlines() if '"front_request_finished"' in line]
    assert any(entry["method"] == "tools/call" and entry["cancelled"] for entry in finished)


async def test_notifications_cancelled_ends_the_request(peers: Peers) -> None:
    bridge, server = started_with_server(peers)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        client = Legacy(http, bridge.url)
        await client.initialize()
        slow = client.request(
            "tools/call", {"name": "slow", "arguments": {"tag": "z", "seconds": 30}}
        )
        began = time.monotonic()
        call = asyncio.create_task(client.send(slow))
        await server.until_logged("slow_started z")  # running upstream
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": slow["id"]},
        }
        status, _, _ = await client.send(cancel)
        try:
            await call
            ended = "answered"
        except (aiohttp.ClientError, json.JSONDecodeError):
            ended = "closed"
        took = time.monotonic() - began
    assert status == 202
    assert ended == "closed" and took < 15.0  # long before the tool's 30 s
    assert '"event": "reverse_request_cancelled"' in bridge.log_text(100_000)


async def test_a_session_belongs_to_the_principal_that_opened_it(peers: Peers) -> None:
    bridge = started(peers)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        owner = Legacy(http, bridge.url, "Bearer owner")
        await owner.initialize()
        thief = Legacy(http, bridge.url, "Bearer thief")
        thief.session_id = owner.session_id
        stolen = await thief.send(thief.request("tools/list"))
        anonymous = Legacy(http, bridge.url, "Bearer owner")
        headers = {**anonymous.headers(), "MCP-Protocol-Version": "2025-11-25"}
        async with http.post(bridge.url, json=anonymous.request("ping"), headers=headers) as reply:
            missing = (reply.status, await reply.json())
        async with http.delete(bridge.url, headers=owner.headers()) as response:
            deleted = response.status
        after = await owner.send(owner.request("tools/list"))
    assert (stolen[0], stolen[1]["error"]) == (
        404,
        {"code": -32001, "message": "Session not found"},
    )
    assert missing[0] == 400 and missing[1]["error"]["message"] == "Bad Request: Missing session ID"
    assert deleted == 200
    assert (after[0], after[1]["error"]["code"]) == (404, -32001)


async def test_every_legacy_revision_is_negotiated_as_a_2025_11_25_server_does(
    peers: Peers,
) -> None:
    bridge = started(peers)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        negotiated = {}
        for asked in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2099-01-01"):
            client = Legacy(http, bridge.url)
            negotiated[asked] = (await client.initialize(asked))["protocolVersion"]
        older = Legacy(http, bridge.url)
        await older.initialize("2025-06-18")
        ask = older.request("tools/call", {"name": "ask", "arguments": {"tag": "v"}})
        async with older.stream(ask) as replies:
            push = await anext(replies)
            answer = {"jsonrpc": "2.0", "id": push["id"], "result": {"action": "decline"}}
            await older.send(answer)
            final = await anext(replies)
        oldest = Legacy(http, bridge.url)
        await oldest.initialize("2025-03-26")
        refused = await oldest.send(
            oldest.request("tools/call", {"name": "ask", "arguments": {"tag": "w"}})
        )
    assert negotiated == {
        "2025-11-25": "2025-11-25",
        "2025-06-18": "2025-06-18",
        "2025-03-26": "2025-03-26",
        "2024-11-05": "2024-11-05",
        "2099-01-01": "2025-11-25",
    }
    assert push["params"] == {
        "message": "What is your answer?",
        "requestedSchema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    }  # no `mode`: 2025-06-18 has none
    assert json.loads(final["result"]["content"][0]["text"]) == {
        "action": "decline",
        "content": None,
    }
    assert refused[1]["error"] == {
        "code": -32602,
        "message": "Client does not support elicitation",
        "data": {"inputKey": "answer"},
    }  # 2025-03-26 has no elicitation


async def test_list_changes_and_resource_updates_reach_the_get_stream(peers: Peers) -> None:
    bridge = started(peers)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        client = Legacy(http, bridge.url)
        await client.initialize()
        async with http.get(bridge.url, headers=client.headers()) as stream:
            assert stream.status == 200
            second = await http.get(bridge.url, headers=client.headers())
            subscribed = await client.send(
                client.request("resources/subscribe", {"uri": "interactive://ask/u"})
            )
            # the upstream listen opens again, with the subscription
            await wait_logged(bridge, "reverse_listen_opened", resource_subscriptions=1)
            touched = await client.send(
                client.request("tools/call", {"name": "touch", "arguments": {"tag": "u"}})
            )
            got = []
            async for message in messages_of(stream):
                got.append(message)
                if len(got) == 2:
                    break
    assert second.status == 409
    assert subscribed[1]["result"] == {}
    assert touched[1]["result"]["content"][0]["text"] == "touched"
    assert sorted(got, key=lambda m: m["method"]) == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "interactive://ask/u"},
        },
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
    ]


async def test_misplaced_and_malformed_messages_get_precise_errors(peers: Peers) -> None:
    bridge = started(peers)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        client = Legacy(http, bridge.url)
        await client.initialize()
        batch = await client.send([client.request("ping"), client.request("ping")])
        not_rpc = await client.send({"hello": "world"})
        stray = await client.send({"jsonrpc": "2.0", "id": "nobody", "result": {}})
        level = await client.send(client.request("logging/setLevel", {"level": "loud"}))
        ping = await client.send(client.request("ping"))
        unknown = await client.send(client.request("tools/call", {"name": "nope", "arguments": {}}))
    assert (batch[0], batch[1]["error"]) == (
        400,
        {"code": -32600, "message": "Batches are not supported by this server"},
    )
    assert (not_rpc[0], not_rpc[1]["error"]["code"]) == (400, -32600)
    assert stray[0] == 202
    assert (level[0], level[1]["error"]) == (
        400,
        {"code": -32602, "message": "Invalid log level: loud"},
    )
    assert ping[1] == {"jsonrpc": "2.0", "id": ping[1]["id"], "result": {}}
    assert unknown[1]["result"] == {
        "content": [{"type": "text", "text": "Unknown tool: nope"}],
        "isError": True,
    }  # the upstream's answer, without its modern-only serverInfo _meta


async def test_sessions_are_bounded_per_principal(peers: Peers) -> None:
    bridge = started(peers, **{"reverse.max_sessions_per_principal": "2"})
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        mine = [Legacy(http, bridge.url, "Bearer me") for _ in range(3)]
        other = Legacy(http, bridge.url, "Bearer other")
        for client in (mine[0], other, mine[1], mine[2]):
            await client.initialize()
        statuses = [(await client.send(client.request("ping")))[0] for client in (*mine, other)]
    assert statuses == [404, 200, 200, 200]  # my oldest went; another principal's stayed
    assert '"reason": "evicted"' in bridge.log_text(100_000)


async def test_x_mcp_header_arguments_are_mirrored_for_legacy_clients(peers: Peers) -> None:
    """A legacy client knows no Mcp-Param-* headers: the bridge adds them (listing the tools
    after the upstream's -32020 when it has not seen them yet)."""
    port = free_port()
    argv = [sys.executable, str(PEERS_DIR / "modern_fixture_server.py"), "--port", str(port)]
    bridge = peers.bridge(peers.start("modern-fixture", argv, port).url)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        client = Legacy(http, bridge.url)
        await client.initialize()
        call = {"name": "test_x_mcp_header", "arguments": {"region": "eu west ü"}}
        first = await client.send(client.request("tools/call", call))
        second = await client.send(client.request("tools/call", call))
    for _, reply, _ in (first, second):
        assert reply["result"]["content"] == [{"type": "text", "text": "region=eu west ü"}]
