"""The pool learns whether the upstream serves one session at a time
(proxy/upstream/session_limit.py) and routes by preference (`prefer`, `share`): against the fake
legacy server, which can behave like server-everything 2025.5.12 (only the newest session
answers)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from fake_clock import FakeClock
from fake_legacy import FakeLegacy, echo_legacy, text_result
from pool_waits import until_waiting
from structlog.testing import capture_logs

import proxy.upstream.pool_sizing as pool_sizing
from config.settings import UpstreamSettings
from proxy.app.compose import http_opener
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from proxy.upstream.session_limit import LEARN_BACKOFF_S
from translators.wire.errors import CapacityExceeded

ServerFactory = Callable[..., Awaitable[TestServer]]
CAPS: dict[str, Any] = {}
BOUND_S = 5
IDLE_S = 60.0  # upstream.session_idle_s where a test moves the pool's clock past it


def key(principal: str, fingerprint: str = "f") -> SessionKey:
    return SessionKey(principal=principal, fingerprint=fingerprint)


@pytest.fixture
def fake() -> FakeLegacy:
    return echo_legacy()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def make_pool(
    fake: FakeLegacy, aiohttp_server: ServerFactory, clock: FakeClock
) -> AsyncIterator[Callable[..., UpstreamPool]]:
    """Pools on the fake and on `clock`, each closed at the end (unowned messages are ignored
    here)."""
    url = str((await aiohttp_server(fake.app)).make_url("/mcp"))
    async with aiohttp.ClientSession() as client, contextlib.AsyncExitStack() as closing:

        def make(**overrides: Any) -> UpstreamPool:
            settings = UpstreamSettings(url=url, session_check_s=0.3, **overrides)
            opener = http_opener(client, settings)
            pool = UpstreamPool(settings, opener, on_unowned=lambda _s, _i: None, clock=clock)
            closing.push_async_callback(pool.aclose)
            return pool

        yield make


async def lease(pool: UpstreamPool, of: SessionKey, **options: Any) -> Lease:
    async with asyncio.timeout(BOUND_S):
        return await pool.lease(
            of, CAPS, exclusive=options.pop("exclusive", True), headers={}, **options
        )


async def echo(lease: Lease, text: str) -> Any:
    call = lease.session.start(
        "tools/call", {"name": "echo", "arguments": {"text": text}}, headers={}, on_inbound=None
    )
    async with asyncio.timeout(BOUND_S):
        return await call.result()


async def test_a_server_of_many_sessions_is_learned_with_one_ping_and_nothing_changes(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    pool = make_pool()
    first = await lease(pool, key("alice"))
    second = await lease(pool, key("bob"))
    third = await lease(pool, key("carol"))
    assert pool.limit.one is False
    assert fake.rpc_methods().count("ping") == 1  # answered (Method not found is an answer)
    assert [await echo(x, x.key.principal) for x in (first, second, third)] == [
        text_result("alice"),
        text_result("bob"),
        text_result("carol"),
    ]
    assert fake.deleted == [] and pool.stats().sessions_open == 3


async def test_a_one_session_server_is_learned_and_never_sent_a_delete(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy, clock: FakeClock
) -> None:
    """A second session takes the server over: the first is let go without a DELETE, and from
    then on the one session serves every caller in turn, never reaped, replaced or deleted."""
    fake.one_session = True
    pool = make_pool(session_idle_s=IDLE_S)
    first = await lease(pool, key("alice"))
    await first.release()
    second = await lease(pool, key("alice", "other capabilities"))
    assert pool.limit.one is True
    assert not first.session.is_alive and pool.stats().sessions_open == 1
    assert await echo(second, "b") == text_result("b")
    await second.release()
    clock.advance(10 * IDLE_S)  # many idle periods: the reaper keeps the one session
    assert await pool.reap_idle() == 0 and second.session.is_alive
    third = await lease(pool, key("bob"))  # the one session, bob's now: never replaced
    assert await echo(third, "c") == text_result("c")
    assert third.session is second.session and pool.stats().sessions_open == 1
    assert fake.deleted == []
    assert fake.rpc_methods().count("ping") == 1
    assert len(fake.all_sessions) == 2


async def test_another_caller_gets_a_clear_error_while_the_one_session_is_held(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    pool = make_pool(session_limit="one", session_wait_s=0.2)
    held = await lease(pool, key("alice"))
    with pytest.raises(CapacityExceeded) as refused:
        await lease(pool, key("bob"))
    assert refused.value.message == (
        'The upstream server serves one session at a time (upstream.session_limit = "one"), and'
        " another request holds that session; it did not become free within 0.2 s"
        " (upstream.session_wait_s): retry later"
    )
    assert held.session.is_alive


async def test_the_last_session_of_an_unknown_upstream_is_never_reaped(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy, clock: FakeClock
) -> None:
    pool = make_pool(session_idle_s=IDLE_S)
    first = await lease(pool, key("alice"))
    await first.release()
    clock.advance(2 * IDLE_S)
    assert await pool.reap_idle() == 0 and first.session.is_alive
    many = make_pool(session_idle_s=IDLE_S, session_limit="many")
    other = await lease(many, key("alice"))
    await other.release()
    clock.advance(IDLE_S)
    assert await many.reap_idle() == 1 and not other.session.is_alive
    assert len(fake.deleted) == 1


async def test_prefer_picks_that_session_and_share_leases_exactly_it(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    pool = make_pool(session_limit="many")
    alice = key("alice")
    first, second = await lease(pool, alice), await lease(pool, alice)
    await first.release()
    await second.release()
    for wanted in (first.session, second.session):
        chosen = await lease(pool, alice, prefer=wanted)
        assert chosen.session is wanted
        await chosen.release()
    busy = await lease(pool, alice, prefer=second.session)
    other = await lease(pool, alice, prefer=second.session)  # held exclusively: another one
    assert other.session is first.session
    shared = pool.share(second.session)
    assert shared is not None and shared.session is second.session and not shared.exclusive
    await busy.release(discard=True)  # retiring: shared leases on it end, none is handed out
    assert pool.share(second.session) is None
    # a preferred session of another key is never used
    bob = await lease(pool, key("bob"), prefer=first.session)
    assert bob.session is not first.session


@pytest.fixture
def quick_drain(monkeypatch: pytest.MonkeyPatch) -> float:
    """A short drain, so a drain that runs out does not slow the suite."""
    monkeypatch.setattr(pool_sizing, "DRAIN_S", 0.1)
    return 0.1


async def crowd(pool: UpstreamPool) -> tuple[Lease, asyncio.Task[Lease]]:
    """A plain lease of alice's, then a second one crowding it (`plain_calls_per_session = 1`),
    started and waiting at the closed gate."""
    first = await lease(pool, key("alice"), exclusive=False)
    crowded = asyncio.create_task(lease(pool, key("alice"), exclusive=False))
    async with asyncio.timeout(BOUND_S):
        while pool.limit.gate is None:
            await asyncio.sleep(0)
    return first, crowded


async def test_a_crowded_plain_lease_learns_the_limit_once_the_calls_in_flight_end(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """New leases wait at the gate while the running call ends; then the extra session opens
    beside the idle one, one ping learns that the upstream serves many, and both go on."""
    pool = make_pool(plain_calls_per_session=1)
    alice = key("alice")
    first, crowded = await crowd(pool)  # waiting for room: the gate closed before its wait began
    since = pool.waits_total
    other = asyncio.create_task(lease(pool, key("bob"), exclusive=False))
    await until_waiting(pool, since, other)  # at the gate
    assert not crowded.done() and not other.done()  # draining: the first call still runs
    assert fake.rpc_methods().count("initialize") == 1
    assert await echo(first, "a") == text_result("a")
    await first.release()
    second, bob = await crowded, await other
    assert second.session is not first.session and first.session.is_alive
    assert pool.limit.one is False and pool.limit.gate is None
    assert fake.rpc_methods().count("ping") == 1
    assert [await echo(x, x.key.principal) for x in (second, bob)] == [
        text_result("alice"),
        text_result("bob"),
    ]
    third = await lease(pool, alice, exclusive=False)  # the idle first session
    fourth = await lease(pool, alice, exclusive=False)  # known now: spread at once, no drain
    assert third.session is first.session
    assert fourth.session not in (first.session, second.session)
    assert fake.rpc_methods().count("ping") == 1 and fake.deleted == []


async def test_a_one_session_server_is_learned_by_draining_and_no_call_is_lost(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """The second session takes a one-session server over only once no call runs on the first:
    the first call completed, the crowded one runs on the new session, nothing is deleted."""
    fake.one_session = True
    pool = make_pool(plain_calls_per_session=1)
    first, crowded = await crowd(pool)
    assert await echo(first, "first") == text_result("first")
    await first.release()
    second = await crowded
    assert pool.limit.one is True and not first.session.is_alive
    assert await echo(second, "second") == text_result("second")
    assert fake.deleted == [] and pool.stats().sessions_open == 1


async def test_calls_still_running_after_the_drain_leave_the_limit_unknown_for_a_while(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy, quick_drain: float, clock: FakeClock
) -> None:
    """A call that runs on (a long tool, a held call): the crowded lease shares after the drain,
    the log says why and what to set, and crowded leases share without waiting until the
    backoff has passed."""
    pool = make_pool(plain_calls_per_session=1)
    alice = key("alice")
    running = await lease(pool, alice, exclusive=False)
    with capture_logs() as logs:
        second = await lease(pool, alice, exclusive=False)
        third = await lease(pool, alice, exclusive=False)
    assert running.session is second.session is third.session
    assert pool.limit.one is None and pool.limit.gate is None
    assert fake.rpc_methods().count("initialize") == 1 and "ping" not in fake.rpc_methods()
    told = [entry for entry in logs if entry["event"] == "upstream_session_limit_unknown"]
    assert told == [
        {
            "event": "upstream_session_limit_unknown",
            "log_level": "info",
            "busy_sessions": 1,
            "retry_in_s": LEARN_BACKOFF_S,
            "hint": "crowded plain calls share a session until the bridge learns that the"
            " upstream serves many (it waits for a moment with no call running); set"
            ' upstream.session_limit = "many" if it does',
        }
    ]
    assert not pool.limit.may_learn(clock())
    clock.advance(LEARN_BACKOFF_S)
    assert pool.limit.may_learn(clock())
