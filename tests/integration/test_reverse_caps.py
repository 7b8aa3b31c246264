"""The reverse direction's per-principal caps, against the real modern-only `mcp` 2.x interactive
server (issue 40 defect 1): other principals' sessions never push out a session in use."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from .harness import Peers
from .test_reverse_raw import Legacy, started

T = 120.0


async def metrics_of(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url.removesuffix("/mcp") + "/metrics") as response:
        return await response.text()


def ask(client: Legacy, tag: str) -> dict[str, Any]:
    return client.request("tools/call", {"name": "ask", "arguments": {"tag": tag}})


def accept(push: dict[str, Any], answer: str) -> dict[str, Any]:
    content = {"answer": answer}
    return {"jsonrpc": "2.0", "id": push["id"], "result": {"action": "accept", "content": content}}


def answered(final: dict[str, Any]) -> Any:
    return json.loads(final["result"]["content"][0]["text"])


def refusal(request_id: int, message: str, limit: str) -> dict[str, Any]:
    data = {"source": "mrtr-bridge", "limit": limit}
    error = {"code": -32603, "message": message, "data": data}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def test_other_principals_never_cut_a_session_in_use(peers: Peers) -> None:
    """Issue 40 defect 1: with 40 sessions in all and 8 per principal, six other principals
    opening 8 each cut the victim's two sessions (404) and its stream mid-way. Now the victim
    keeps both and its call ends with its result; the fifth principal makes room from its own
    oldest, and the sixth, holding none, is refused with 503 and the setting's name."""
    bridge = started(
        peers, **{"front.max_legacy_sessions": "40", "reverse.max_sessions_per_principal": "8"}
    )
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        victim, second = (Legacy(http, bridge.url, "Bearer victim") for _ in range(2))
        await victim.initialize()
        await second.initialize()
        crowd = [Legacy(http, bridge.url, f"Bearer other-{n}") for n in range(6) for _ in range(8)]
        async with victim.stream(ask(victim, "kept")) as replies:
            push = await anext(replies)
            opened = [await client.open() for client in crowd]
            status, _, _ = await victim.send(accept(push, "still mine"))
            final = await anext(replies)
        pings = [
            (await client.send(client.request("ping")))[0]
            for client in (victim, second, *crowd[:40])
        ]
        metrics = await metrics_of(http, bridge.url)
    assert status == 202
    assert answered(final) == {"action": "accept", "content": {"answer": "still mine"}}
    assert [status for status, _ in opened] == [200] * 40 + [503] * 8
    message = "The bridge already has 40 legacy sessions (front.max_legacy_sessions); retry later"
    assert opened[-1][1] == refusal(1, message, "front.max_legacy_sessions")
    assert pings == [200, 200] + [200] * 32 + [404, 404] + [200] * 6
    assert 'mrtr_bridge_limit_rejections_total{limit="front.max_legacy_sessions"} 8.0' in metrics
