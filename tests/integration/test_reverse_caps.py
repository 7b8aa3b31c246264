"""The reverse direction's per-principal caps, against the real modern-only `mcp` 2.x interactive
server (issue 40 defects 1 and 4): other principals' sessions never push out a session in use,
and the requests waiting for a client's answer are bounded per principal and in total, with the
same refusals as held calls in the other direction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from .cluster_helpers import metric
from .harness import Peers
from .test_reverse_raw import Legacy, messages_of, started

T = 120.0
FLOOD = 300  # calls, each with arguments of ARGUMENT_BYTES, whose pushes are never answered
ARGUMENT_BYTES = 256 * 1024
HELD_PER_PRINCIPAL = 16
AT_ONCE = 32  # flood requests being sent or answered at once (the rest wait, or are held)


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
    rejections = "mrtr_bridge_limit_rejections_total"
    assert metric(metrics, rejections, limit="front.max_legacy_sessions") == 8


async def flood(
    http: aiohttp.ClientSession, client: Legacy, held: list[aiohttp.ClientResponse]
) -> list[dict[str, Any]]:
    """`FLOOD` concurrent `ask` calls with big arguments, `AT_ONCE` in flight until the first
    message of their reply: each call's push (its stream then kept open in `held`, never
    answered) or its JSON answer. The first messages, by call."""
    gate = asyncio.Semaphore(AT_ONCE)
    big = "x" * ARGUMENT_BYTES

    async def one(n: int) -> dict[str, Any]:
        message = ask(client, f"{n}:{big}")
        async with gate:
            response = await http.post(client.url, json=message, headers=client.headers())
            if response.content_type == "text/event-stream":
                held.append(response)
                return await anext(messages_of(response))
            reply: dict[str, Any] = await response.json()
            response.release()
            return reply

    return await asyncio.gather(*(one(n) for n in range(FLOOD)))


def peak_rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(line.split()[1]) * 1024


async def test_requests_waiting_for_the_client_are_capped_per_principal(peers: Peers) -> None:
    """Issue 40 defect 4: one principal's 300 concurrent calls with 256 KB arguments, pushes never
    answered, were all held (up to `reverse.push_timeout_s`), +235 MB. Now only
    `held.max_per_principal` wait; the rest are refused at once with the held-call refusal, the
    bridge's memory stays bounded, and another principal's call goes through."""
    bridge = started(peers, **{"held.max_per_principal": str(HELD_PER_PRINCIPAL)})
    connector = aiohttp.TCPConnector(limit=0)
    async with asyncio.timeout(T), aiohttp.ClientSession(connector=connector) as http:
        flooder, other = Legacy(http, bridge.url, "Bearer flood"), Legacy(http, bridge.url)
        await flooder.initialize()
        await other.initialize()
        before = peak_rss_bytes(bridge.popen.pid)
        held: list[aiohttp.ClientResponse] = []
        firsts = await flood(http, flooder, held)
        growth = peak_rss_bytes(bridge.popen.pid) - before
        _, echoed, _ = await flooder.send(
            flooder.request("tools/call", {"name": "echo", "arguments": {"text": "plain"}})
        )
        async with other.stream(ask(other, "bystander")) as replies:
            push = await anext(replies)
            await other.send(accept(push, "through"))
            final = await anext(replies)
        for response in held:
            response.close()
    pushes = [first for first in firsts if first.get("method") == "elicitation/create"]
    refused = [first for first in firsts if "error" in first]
    assert (len(pushes), len(refused)) == (HELD_PER_PRINCIPAL, FLOOD - HELD_PER_PRINCIPAL)
    message = (
        f"This caller already has {HELD_PER_PRINCIPAL} calls waiting for input "
        "(held.max_per_principal); finish or abandon one first"
    )
    for first in refused:
        assert first == refusal(first["id"], message, "held.max_per_principal")
    assert echoed["result"]["content"][0]["text"] == "plain"  # only waiting calls count
    assert answered(final) == {"action": "accept", "content": {"answer": "through"}}
    assert growth < 96 * 1024 * 1024, f"the bridge's peak RSS grew by {growth} bytes"


async def test_requests_waiting_for_the_client_are_capped_in_total(peers: Peers) -> None:
    """`held.max_total` bounds the requests waiting for their client across principals: past it a
    newcomer's call that asks is refused as the bridge being full (counted by its setting), its
    plain calls still work, and it goes through once a waiting request ends."""
    bridge = started(peers, **{"held.max_total": "2", "reverse.push_timeout_s": "10"})
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice, bob = (
            Legacy(http, bridge.url, "Bearer alice"),
            Legacy(http, bridge.url, "Bearer bob"),
        )
        await alice.initialize()
        await bob.initialize()
        async with (
            alice.stream(ask(alice, "a1")) as first,
            alice.stream(ask(alice, "a2")) as second,
        ):
            pushes = [await anext(first), await anext(second)]
            _, refused, _ = await bob.send(ask(bob, "b1"))
            _, echoed, _ = await bob.send(
                bob.request("tools/call", {"name": "echo", "arguments": {"text": "plain"}})
            )
            await alice.send(accept(pushes[0], "done"))
            alice_final = await anext(first)
            async with bob.stream(ask(bob, "b2")) as replies:
                bob_push = await anext(replies)
                await bob.send(accept(bob_push, "room again"))
                bob_final = await anext(replies)
            await alice.send(accept(pushes[1], "done too"))
            await anext(second)
        metrics = await metrics_of(http, bridge.url)
    message = "The bridge already has 2 calls waiting for input (held.max_total); retry later"
    assert refused == refusal(refused["id"], message, "held.max_total")
    assert echoed["result"]["content"][0]["text"] == "plain"
    assert answered(alice_final) == {"action": "accept", "content": {"answer": "done"}}
    assert answered(bob_final) == {"action": "accept", "content": {"answer": "room again"}}
    assert metric(metrics, "mrtr_bridge_limit_rejections_total", limit="held.max_total") == 1
