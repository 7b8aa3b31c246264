"""Every limit once, each with a precise error while every other caller's work completes (issue 6).

The bridge runs in-process (each test picks its own limits) in front of a real legacy server,
`tests/peers/journal_server.py` (mcp 1.x). In every test a bystander, Bob, holds an interactive
call and has a slow call attached while Alice hits the limit; afterwards both of Bob's calls
complete, and so does Alice's own work where the limit left it intact.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from integration.harness import ModernPoster, RawReply
from safety_harness import (
    Held,
    InProcessBridge,
    JournalPeer,
    accept,
    bridge_settings,
    call,
    error_of,
    finish,
    inprocess_bridge,
    journal_peer,
    result_of,
    retry,
    start_held,
    text_of,
)

from translators.wire.errors import BRIDGE_MARKER, INTERNAL_ERROR, PARSE_ERROR
from translators.wire.jsonrpc import JsonObject

TIMEOUT_S = 30.0
ALICE = "Bearer alice"
BOB = "Bearer bob"
CAROL = "Bearer carol"
_bystanders = itertools.count(1)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    """One journaling legacy server for the module."""
    with journal_peer(tmp_path_factory.mktemp("limits")) as peer:
        yield peer


async def while_bob_works(
    bridge: InProcessBridge, upstream: JournalPeer, offend: Callable[[], Awaitable[Any]]
) -> Any:
    """Run `offend` while Bob holds a call and has another attached upstream; both of Bob's then
    complete."""
    n = next(_bystanders)
    bob = bridge.poster(BOB)
    held = await start_held(bob, "ask", tag=f"bob-held-{n}")
    attached = asyncio.create_task(call(bob, "slow_echo", text=f"bob-attached-{n}", seconds=0.5))
    await upstream.wait_for(
        lambda entries: (
            {"event": "call_started", "tag": f"bob-attached-{n}", "tool": "slow_echo"} in entries
        )
    )
    outcome = await offend()
    assert await finish(bob, held, "fine") == f"bob-held-{n}: fine"
    assert text_of(await attached) == f"bob-attached-{n}"
    return outcome


async def next_round(poster: ModernPoster, held: Held) -> Held:
    """Answer one round of `ask_rounds` and expect the next InputRequiredResult."""
    result = result_of(await retry(poster, held, accept(held, "next")))
    assert result["resultType"] == "input_required", result
    return Held(held.tool, held.arguments, result["requestState"], tuple(result["inputRequests"]))


def assert_limit(reply: RawReply, limit: str, *phrases: str) -> None:
    """The reply is the bridge's limit error: `data.limit` names the setting, the message says
    `phrases`."""
    error = error_of(reply)
    assert reply.status == 200
    assert error["code"] == INTERNAL_ERROR
    assert error["data"] == {"source": BRIDGE_MARKER, "limit": limit}
    for phrase in phrases:
        assert phrase in error["message"]


async def test_body_size_limit(upstream: JournalPeer) -> None:
    """A body over front.max_body_bytes gets 413 naming the limit; others are untouched."""
    settings = bridge_settings(upstream.url, front={"max_body_bytes": 4096})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)
        reply = await while_bob_works(
            bridge, upstream, lambda: call(alice, "echo", text="x" * 5000)
        )
        assert reply.status == 413
        assert (
            error_of(reply)["message"]
            == "Request body too large: the limit is 4096 bytes (front.max_body_bytes)"
        )
        assert text_of(await call(alice, "echo", text="small")) == "small"


async def test_json_depth_limit(upstream: JournalPeer) -> None:
    """JSON nested deeper than front.max_json_depth is a parse error naming the depth."""
    settings = bridge_settings(upstream.url, front={"max_json_depth": 8})
    nested: Any = "deep"
    for _ in range(12):
        nested = {"n": nested}
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)
        params = {"name": "echo", "arguments": nested}
        reply = await while_bob_works(bridge, upstream, lambda: alice.post("tools/call", params))
        assert reply.status == 400
        error = error_of(reply)
        assert error["code"] == PARSE_ERROR
        assert error["message"] == "Parse error: JSON nesting exceeds the limit of 8 levels"


@pytest.mark.parametrize(
    ("headers", "path", "served"),
    [
        ({"X-Large": "v" * 2000}, "/mcp", False),
        ({f"X-Many-{n}": "v" for n in range(40)}, "/mcp", False),
        ({}, "/mcp?" + "q" * 2000, False),
        ({"X-Large": "v" * 1000}, "/mcp?" + "q" * 1000, True),
    ],
    ids=["field", "count", "line", "just-under"],
)
async def test_header_limits(
    upstream: JournalPeer, headers: dict[str, str], path: str, served: bool
) -> None:
    """Header values, header count and the request line are bounded by front.max_header_*
    settings; the 400 says only its status (aiohttp's parser message would quote the request)."""
    settings = bridge_settings(
        upstream.url,
        front={"max_header_field_bytes": 1024, "max_header_line_bytes": 1024, "max_headers": 16},
    )
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)
        body = alice.body("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        url = str(bridge.server.make_url(path))

        async def offend() -> tuple[int, str]:
            async with bridge.http.post(
                url, json=body, headers={**alice.request_headers(body), **headers}
            ) as resp:
                return resp.status, await resp.text()

        status, text = await while_bob_works(bridge, upstream, offend)
        if served:  # under every limit
            assert (status, json.loads(text)["result"]["content"][0]["text"]) == (200, "hi")
        else:
            assert (status, text) == (400, "400 Bad Request")
        assert text_of(await call(alice, "echo", text="fits")) == "fits"


async def test_input_responses_count_limit(upstream: JournalPeer) -> None:
    """More inputResponses entries than held.max_input_responses is refused and consumes nothing."""
    settings = bridge_settings(upstream.url, held={"max_input_responses": 4})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)
        held = await start_held(alice, "ask", tag="alice-count")
        padded = {**accept(held, "spam"), **{f"extra-{n}": {"action": "decline"} for n in range(4)}}
        reply = await while_bob_works(bridge, upstream, lambda: retry(alice, held, padded))
        assert_limit(
            reply,
            "held.max_input_responses",
            "inputResponses has 5 entries; the limit is 4",
            "(held.max_input_responses)",
        )
        assert await finish(alice, held, "kept") == "alice-count: kept"
    assert upstream.events("alice-count") == ["call_started", "elicit_answered"]


async def test_input_response_size_limit(upstream: JournalPeer) -> None:
    """An inputResponses entry over held.max_input_response_bytes is refused and consumes
    nothing."""
    settings = bridge_settings(upstream.url, held={"max_input_response_bytes": 256})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)
        held = await start_held(alice, "ask", tag="alice-size")
        reply = await while_bob_works(
            bridge, upstream, lambda: retry(alice, held, accept(held, "x" * 1000))
        )
        (key,) = held.keys
        size = len(json.dumps(accept(held, "x" * 1000)[key], separators=(",", ":")))
        assert_limit(
            reply,
            "held.max_input_response_bytes",
            f'inputResponses["{key}"] is {size} bytes',
            "limit is 256",
        )
        assert await finish(alice, held, "short") == "alice-size: short"


def refused_upstream(upstream: JournalPeer, tag: str) -> list[JsonObject]:
    """What the legacy server saw of a call refused when it asked for input: its push refused, then
    the call cancelled."""
    return [
        {k: v for k, v in entry.items() if k != "tag"}
        for entry in upstream.entries()
        if entry.get("tag") == tag
    ]


REFUSED_ASK = [
    {"event": "call_started", "tool": "ask"},
    {"event": "elicit_answered", "action": "cancel"},
    {"event": "cancelled"},
]


async def test_held_calls_per_principal_limit(upstream: JournalPeer) -> None:
    """A third call of Alice's that asks for input over held.max_per_principal is refused (and
    abandoned upstream); her plain calls still go through while she is at the cap."""
    settings = bridge_settings(upstream.url, held={"max_per_principal": 2})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)
        first = await start_held(alice, "ask", tag="alice-1")
        second = await start_held(alice, "ask", tag="alice-2")
        reply = await while_bob_works(
            bridge, upstream, lambda: call(alice, "ask", tag="alice-3", linger=30)
        )
        assert_limit(
            reply,
            "held.max_per_principal",
            "already has 2 calls waiting for input",
            "(held.max_per_principal)",
        )
        assert text_of(await call(alice, "echo", text="plain at the cap")) == "plain at the cap"
        assert (
            text_of(await call(alice, "slow_echo", text="alice-slow-at-cap", seconds=0.1))
            == "alice-slow-at-cap"
        )
        await upstream.wait_for(lambda entries: {"event": "cancelled", "tag": "alice-3"} in entries)
        assert [await finish(alice, held, "ok") for held in (first, second)] == [
            "alice-1: ok",
            "alice-2: ok",
        ]
        assert text_of(await call(alice, "echo", text="room again")) == "room again"
    assert refused_upstream(upstream, "alice-3") == REFUSED_ASK


async def test_held_calls_total_limit(upstream: JournalPeer) -> None:
    """Beyond held.max_total no call may wait for input; plain calls from a new principal that
    declares elicitation still succeed, and the held ones complete."""
    settings = bridge_settings(upstream.url, held={"max_total": 2})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice, carol, dave = (
            bridge.poster(ALICE),
            bridge.poster(CAROL),
            bridge.poster("Bearer dave"),
        )
        mine = await start_held(alice, "ask", tag="alice-total")

        # Bob holds one (two in all with Alice's) and has one attached
        async def offend() -> RawReply:
            assert "elicitation" in dave.capabilities
            assert text_of(await call(dave, "echo", text="dave plain")) == "dave plain"
            return await call(carol, "ask", tag="carol-total", linger=30)

        reply = await while_bob_works(bridge, upstream, offend)
        assert_limit(
            reply, "held.max_total", "already has 2 calls waiting for input (held.max_total)"
        )
        await upstream.wait_for(
            lambda entries: {"event": "cancelled", "tag": "carol-total"} in entries
        )
        assert await finish(alice, mine, "done") == "alice-total: done"
        assert text_of(await call(carol, "echo", text="carol later")) == "carol later"
    assert refused_upstream(upstream, "carol-total") == REFUSED_ASK


async def test_upstream_sessions_per_principal_limit(upstream: JournalPeer) -> None:
    """Past upstream.max_sessions_per_principal a caller is refused; its held calls and others go
    on."""
    settings = bridge_settings(
        upstream.url, upstream={"max_sessions_per_principal": 2}, held={"max_per_principal": 8}
    )
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)
        held = [await start_held(alice, "ask", tag=f"alice-s{n}") for n in range(2)]
        reply = await while_bob_works(bridge, upstream, lambda: call(alice, "echo", text="no room"))
        assert_limit(
            reply,
            "upstream.max_sessions_per_principal",
            "already has 2 upstream sessions in use (upstream.max_sessions_per_principal)",
        )
        assert [await finish(alice, h, "ok") for h in held] == ["alice-s0: ok", "alice-s1: ok"]
        assert text_of(await call(alice, "echo", text="room")) == "room"


async def test_upstream_sessions_total_limit(upstream: JournalPeer) -> None:
    """Past upstream.max_sessions a new caller is refused while everyone else's work completes."""
    settings = bridge_settings(upstream.url, upstream={"max_sessions": 3, "session_wait_s": 0})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice, carol = bridge.poster(ALICE), bridge.poster(CAROL)
        mine = await start_held(alice, "ask", tag="alice-pool")
        reply = await while_bob_works(
            bridge, upstream, lambda: call(carol, "echo", text="no session")
        )
        assert_limit(
            reply,
            "upstream.max_sessions",
            "already has 3 upstream sessions in use (upstream.max_sessions)",
        )
        assert await finish(alice, mine, "ok") == "alice-pool: ok"
        assert text_of(await call(carol, "echo", text="carol fits")) == "carol fits"


async def test_rounds_per_call_limit(upstream: JournalPeer) -> None:
    """A call needing more than held.max_rounds rounds ends with the limit error; its push is
    refused upstream."""
    settings = bridge_settings(upstream.url, held={"max_rounds": 2})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice = bridge.poster(ALICE)

        async def offend() -> RawReply:
            held = await start_held(alice, "ask_rounds", rounds=3)
            held = await next_round(alice, held)
            return await retry(alice, held, accept(held, "r2"))

        reply = await while_bob_works(bridge, upstream, offend)
        assert_limit(reply, "held.max_rounds", "The call needed more than 2 input rounds")
        assert text_of(await call(alice, "ask_rounds", rounds=0)) == "0 rounds done"
    refusal = {"event": "elicit_answered", "tag": "rounds-3", "action": "cancel", "round": 2}
    # the third push was refused upstream
    await upstream.wait_for(lambda entries: refusal in entries)


def test_limit_settings_exist_with_safe_defaults() -> None:
    """Every limit of issue 6 (and the push caps of issue 24) is a setting with a finite
    default."""
    settings = bridge_settings("http://127.0.0.1:1/mcp")
    limits = {
        "front.max_body_bytes": settings.front.max_body_bytes,
        "front.max_json_depth": settings.front.max_json_depth,
        "front.max_header_line_bytes": settings.front.max_header_line_bytes,
        "front.max_header_field_bytes": settings.front.max_header_field_bytes,
        "front.max_headers": settings.front.max_headers,
        "held.max_input_responses": settings.held.max_input_responses,
        "held.max_input_response_bytes": settings.held.max_input_response_bytes,
        "held.max_per_principal": settings.held.max_per_principal,
        "held.max_total": settings.held.max_total,
        "held.max_rounds": settings.held.max_rounds,
        "held.max_pushes_per_round": settings.held.max_pushes_per_round,
        "held.max_pushes_per_call": settings.held.max_pushes_per_call,
        "upstream.max_sessions": settings.upstream.max_sessions,
        "upstream.max_sessions_per_principal": settings.upstream.max_sessions_per_principal,
    }
    assert limits == {
        "front.max_body_bytes": 1_048_576,
        "front.max_json_depth": 64,
        "front.max_header_line_bytes": 8190,
        "front.max_header_field_bytes": 8190,
        "front.max_headers": 128,
        "held.max_input_responses": 64,
        "held.max_input_response_bytes": 524_288,
        "held.max_per_principal": 64,
        "held.max_total": 4096,
        "held.max_rounds": 32,
        "held.max_pushes_per_round": 64,
        "held.max_pushes_per_call": 1024,
        "upstream.max_sessions": 256,
        "upstream.max_sessions_per_principal": 64,
    }
