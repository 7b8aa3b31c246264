"""Crowded plain calls spread over sessions of their key (docs/decisions.md § 31), against the
real journaling server (`tests/peers/journal_server.py`, mcp 1.x) over Streamable HTTP.

`whoami` reports the `Mcp-Session-Id` each call arrived with, so each test shows exactly which
upstream session served which call: while a slow call runs, the next call of the same client goes
to a session of its own where the upstream is known to serve many sessions; where that is not
known yet, it waits for the slow call to end and learns it (or shares the session, when the slow
call outlasts the drain); once the slow call is done, calls go back to the first session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from integration.harness import ModernPoster
from safety_harness import (
    InProcessBridge,
    JournalPeer,
    bridge_settings,
    call,
    inprocess_bridge,
    journal_peer,
    text_of,
)

from proxy.upstream.session_limit import DRAIN_S

T = 30.0  # bound on every test body, seconds


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    with journal_peer(tmp_path_factory.mktemp("spreading")) as peer:
        yield peer


async def _sessions_around_a_slow_call(
    bridge: InProcessBridge, upstream: JournalPeer, seconds: float = 1.5
) -> list[str]:
    """The sessions of: a call; a call while a slow one runs (the slow one's own); after it."""
    alice = ModernPoster(
        bridge.http, bridge.url, capabilities={}, headers={"Authorization": "Bearer alice"}
    )

    async def session() -> str:
        seen: str = json.loads(text_of(await call(alice, "whoami")))["session"]
        return seen

    tag = f"slow-{id(bridge)}"
    first = await session()
    slow = asyncio.create_task(call(alice, "slow_echo", text=tag, seconds=seconds))
    await upstream.wait_for(lambda entries: any(e.get("tag") == tag for e in entries))
    during = await session()
    assert text_of(await slow) == tag
    return [first, during, await session()]


async def test_a_call_beside_a_running_one_gets_a_session_of_its_own(
    upstream: JournalPeer,
) -> None:
    settings = bridge_settings(upstream.url, upstream={"plain_calls_per_session": 1})
    async with asyncio.timeout(T), inprocess_bridge(settings) as bridge:
        first, during, after = await _sessions_around_a_slow_call(bridge, upstream)
        assert during != first and after == first
        assert bridge.pool.stats().created_total == 2


async def test_a_crowded_call_learns_the_limit_once_the_running_call_ends(
    upstream: JournalPeer,
) -> None:
    """`session_limit = "auto"`: the call beside a short running one waits for it to end, then
    opens a second session, which the real server serves beside the first (one ping)."""
    settings = bridge_settings(
        upstream.url, upstream={"plain_calls_per_session": 1, "session_limit": "auto"}
    )
    async with asyncio.timeout(T), inprocess_bridge(settings) as bridge:
        first, during, after = await _sessions_around_a_slow_call(bridge, upstream, seconds=0.2)
        assert during != first and after == first
        assert bridge.pool.limit.one is False
        assert bridge.pool.stats().created_total == 2


async def test_a_call_beside_a_long_one_shares_while_the_limit_is_unknown(
    upstream: JournalPeer,
) -> None:
    """The running call outlasts the drain (`DRAIN_S`): the crowded call shares the session, and
    the limit stays unknown (a second `initialize` could take a one-session server over and lose
    the running call)."""
    settings = bridge_settings(
        upstream.url, upstream={"plain_calls_per_session": 1, "session_limit": "auto"}
    )
    async with asyncio.timeout(T), inprocess_bridge(settings) as bridge:
        first, during, after = await _sessions_around_a_slow_call(
            bridge, upstream, seconds=DRAIN_S + 1.0
        )
        assert during == first == after
        assert bridge.pool.limit.one is None
        assert bridge.pool.stats().created_total == 1
