"""`upstream.max_sessions = 1`: every call queues for the one upstream session (issue 9).

Some legacy servers work with only one session at a time. With one session allowed, the bridge
opens it once and keeps it: calls of other principals or capabilities take it in turn when nobody
holds it (`upstream.session_wait_s`), an interactive call holding it makes the others wait and
then fail with a bounded error naming the settings, and a shared lease and an exclusive one on the
same session never deadlock. The bridge runs in-process in front of the real
journaling server (`tests/peers/journal_server.py`, mcp 1.x), once over Streamable HTTP and once
over HTTP+SSE; each scenario is scripted step by step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from integration.harness import ModernPoster
from pool_waits import until_waiting
from safety_harness import (
    InProcessBridge,
    JournalPeer,
    bridge_settings,
    call,
    error_of,
    finish,
    inprocess_bridge,
    journal_peer,
    result_of,
    start_held,
    text_of,
)

from translators.protocol.eras import TOOLS_LIST
from translators.wire.errors import BRIDGE_MARKER, INTERNAL_ERROR

T = 30.0  # bound on every test body, seconds
ALICE, BOB, CAROL = "Bearer alice", "Bearer bob", "Bearer carol"


@pytest.fixture(scope="module", params=["streamable-http", "sse"])
def upstream(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JournalPeer]:
    """The journaling server over each HTTP transport."""
    transport = str(request.param)
    extra = ("--transport", "sse") if transport == "sse" else ()
    with journal_peer(tmp_path_factory.mktemp(f"single-{transport}"), *extra) as peer:
        if transport == "sse":
            assert peer.process is not None
            peer.process.path = "/sse"
        yield peer


@pytest.fixture
async def single(upstream: JournalPeer) -> AsyncIterator[InProcessBridge]:
    """A bridge allowed one upstream session, which waits up to 20 s for it."""
    settings = bridge_settings(upstream.url, upstream={"max_sessions": 1, "session_wait_s": 20})
    async with inprocess_bridge(settings) as bridge:
        yield bridge


def plain(bridge: InProcessBridge, authorization: str) -> ModernPoster:
    """A caller that declares no client capabilities (its calls cannot be interactive)."""
    return ModernPoster(
        bridge.http, bridge.url, capabilities={}, headers={"Authorization": authorization}
    )


async def test_calls_of_different_callers_queue_for_the_one_session(
    single: InProcessBridge,
) -> None:
    """Plain calls of three principals, all at once, all complete, taking the one session in
    turn: it is opened once and kept."""
    async with asyncio.timeout(T):
        replies = await asyncio.gather(
            *(
                call(plain(single, who), "slow_echo", text=f"{who[7:]}-{n}", seconds=0.1)
                for who in (ALICE, BOB, CAROL)
                for n in range(3)
            )
        )
    assert single.pool.most_open == 1
    assert [text_of(reply) for reply in replies] == [
        f"{who}-{n}" for who in ("alice", "bob", "carol") for n in range(3)
    ]
    assert single.pool.stats().created_total == 1


async def test_a_waiting_call_gets_the_session_when_the_interactive_call_ends(
    single: InProcessBridge,
) -> None:
    """An interactive call holds the one session; another caller's call waits and runs once it is
    released."""
    async with asyncio.timeout(T):
        bob = single.poster(BOB)
        held = await start_held(bob, "ask", tag="queue-bob")
        since = single.pool.waits_total
        waiting = asyncio.create_task(call(plain(single, CAROL), "echo", text="carol after bob"))
        await until_waiting(single.pool, since, waiting)
        assert not waiting.done()  # the only session is Bob's until his call ends
        assert await finish(bob, held, "done") == "queue-bob: done"
        assert text_of(await waiting) == "carol after bob"


async def test_an_interactive_call_holding_the_session_makes_others_fail_bounded(
    upstream: JournalPeer,
) -> None:
    """While an interactive call holds the only session, another caller gets the limit error after
    `session_wait_s`, naming both settings; the held call then completes, and so does the next call.
    """
    settings = bridge_settings(upstream.url, upstream={"max_sessions": 1, "session_wait_s": 0.5})
    async with asyncio.timeout(T), inprocess_bridge(settings) as bridge:
        bob = bridge.poster(BOB)
        held = await start_held(bob, "ask", tag="bounded-bob")
        started = asyncio.get_running_loop().time()
        error = error_of(await call(bridge.poster(CAROL), "echo", text="no room"))
        assert asyncio.get_running_loop().time() - started < 10.0
        assert error == {
            "code": INTERNAL_ERROR,
            "message": "The bridge already has 1 upstream sessions in use "
            "(upstream.max_sessions), 1 of them held by"
            " interactive calls; none became free within 0.5 s (upstream.session_wait_s); retry "
            "later",
            "data": {"source": BRIDGE_MARKER, "limit": "upstream.max_sessions"},
        }
        assert await finish(bob, held, "fine") == "bounded-bob: fine"
        assert text_of(await call(bridge.poster(CAROL), "echo", text="room now")) == "room now"


async def test_shared_and_exclusive_leases_of_one_caller_do_not_deadlock(
    single: InProcessBridge,
) -> None:
    """One caller: a list and a slow plain request share the session its interactive call holds; a
    second interactive call waits for the first and then runs on the same session."""
    async with asyncio.timeout(T):
        alice = single.poster(ALICE)
        first = await start_held(alice, "ask", tag="mix-1")
        listed = result_of(await alice.post(TOOLS_LIST, {}))
        assert "ask" in [tool["name"] for tool in listed["tools"]]
        since = single.pool.waits_total
        second = asyncio.create_task(start_held(alice, "ask", tag="mix-2"))
        await until_waiting(single.pool, since, second)
        assert not second.done()  # it needs the session to itself
        assert await finish(alice, first, "one") == "mix-1: one"
        assert await finish(alice, await second, "two") == "mix-2: two"
        # the one session only: no roots probe (it would need a session of its own)
        assert single.pool.stats().created_total == 1
