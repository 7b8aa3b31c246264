"""UpstreamPool against the fake legacy server: reuse, exclusivity, limits, reaping, routing
(docs/decisions.md § 7)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from fake_legacy import FakeCall, FakeLegacy, text_result
from pool_waits import until_waiting

from config.settings import UpstreamSettings
from proxy.app.compose import http_opener
from proxy.upstream.attribution import PushAttribution, call_label
from proxy.upstream.base import (
    STREAMABLE_HTTP,
    FixedTransport,
    Inbound,
    TransportInfo,
    UpstreamSession,
)
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from translators.protocol.eras import ROOTS
from translators.wire.errors import (
    BridgeBug,
    CapacityExceeded,
    ClientLimitExceeded,
    UpstreamTimeout,
    UpstreamUnavailable,
)

ServerFactory = Callable[..., Awaitable[TestServer]]
KEY = SessionKey(principal="alice", fingerprint="elicit")
CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
ONE_CHANNEL = FixedTransport("sse", streams_per_call=False)  # HTTP+SSE: one stream for all
ROOTS_PUSH: dict[str, Any] = {"jsonrpc": "2.0", "id": 900, "method": ROOTS}


class Unowned:
    """Records what the pool hands to `on_unowned`."""

    def __init__(self) -> None:
        self.seen: list[tuple[UpstreamSession, Inbound]] = []

    def __call__(self, session: UpstreamSession, inbound: Inbound) -> None:
        self.seen.append((session, inbound))


@pytest.fixture
def fake() -> FakeLegacy:
    fake = FakeLegacy()

    async def echo(call: FakeCall) -> dict[str, Any]:
        return text_result(str(call.arguments.get("text", "")))

    fake.tools["echo"] = echo
    return fake


@pytest.fixture
async def url(fake: FakeLegacy, aiohttp_server: ServerFactory) -> str:
    server = await aiohttp_server(fake.app)
    return str(server.make_url("/mcp"))


@pytest.fixture
def unowned() -> Unowned:
    return Unowned()


@pytest.fixture
async def make_pool(
    client: aiohttp.ClientSession, url: str, unowned: Unowned
) -> AsyncIterator[Callable[..., UpstreamPool]]:
    pools: list[UpstreamPool] = []

    def make(transport: TransportInfo = STREAMABLE_HTTP, **overrides: Any) -> UpstreamPool:
        options = {
            "url": url,
            "init_timeout_s": 2.0,
            "connect_timeout_s": 1.0,
            "session_limit": "many",
            **overrides,
        }
        settings = UpstreamSettings(**options)
        opener = http_opener(client, settings)
        pool = UpstreamPool(settings, opener, on_unowned=unowned, transport=transport)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        await pool.aclose()


async def lease(pool: UpstreamPool, key: SessionKey = KEY, *, exclusive: bool = False) -> Lease:
    async with asyncio.timeout(5):
        return await pool.lease(
            key, CAPS, exclusive=exclusive, headers={"Authorization": "Bearer t"}
        )


async def echo(session: UpstreamSession, text: str) -> Any:
    call = session.start(
        "tools/call", {"name": "echo", "arguments": {"text": text}}, headers={}, on_inbound=None
    )
    async with asyncio.timeout(5):
        return await call.result()


async def test_warm_session_is_reused(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """A released session serves the next lease of the same key without a new initialize."""
    pool = make_pool()
    first = await lease(pool)
    assert await echo(first.session, "a") == text_result("a")
    await first.release()
    second = await lease(pool, exclusive=True)
    assert second.session is first.session
    assert await echo(second.session, "b") == text_result("b")
    stats = pool.stats()
    assert (stats.sessions_open, stats.created_total, stats.reused_total) == (1, 1, 1)
    assert fake.rpc_methods().count("initialize") == 1


async def test_shared_leases_share_and_exclusive_leases_do_not(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """Shared leases use one session; each concurrent exclusive lease gets a session of its own."""
    pool = make_pool()
    shared = [await lease(pool) for _ in range(3)]
    assert len({id(item.session) for item in shared}) == 1
    exclusive = [await lease(pool, exclusive=True) for _ in range(3)]
    sessions = {id(item.session) for item in exclusive}
    assert len(sessions) == 3
    assert id(shared[0].session) in sessions  # one exclusive lease may join the shared session
    assert pool.stats().created_total == 3


async def test_shared_lease_coexists_with_an_exclusive_one(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """A shared lease reuses a session that one exclusive lease holds, rather than opening
    another."""
    pool = make_pool()
    exclusive = await lease(pool, exclusive=True)
    shared = await lease(pool)
    assert shared.session is exclusive.session
    assert pool.stats().created_total == 1


async def test_keys_are_isolated(make_pool: Callable[..., UpstreamPool], fake: FakeLegacy) -> None:
    """Another principal or another capability fingerprint never gets the same session."""
    pool = make_pool()
    base = await lease(pool)
    other_principal = await lease(pool, SessionKey("bob", KEY.fingerprint))
    other_caps = await lease(pool, SessionKey(KEY.principal, "sampling"))
    assert len({id(base.session), id(other_principal.session), id(other_caps.session)}) == 3
    assert other_caps.key == SessionKey(KEY.principal, "sampling")
    assert len(fake.all_sessions) == 3


async def test_concurrent_first_shared_leases_initialize_once(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """A burst of first shared leases for one key single-flights the initialize."""
    pool = make_pool(plain_calls_per_session=0)
    leases = await asyncio.gather(*(lease(pool) for _ in range(5)))
    assert len({id(item.session) for item in leases}) == 1
    assert fake.rpc_methods().count("initialize") == 1
    assert (pool.stats().created_total, pool.stats().reused_total) == (1, 4)


async def test_crowded_plain_leases_open_another_session_of_their_key(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """Past `plain_calls_per_session` shared leases on the least-used session, the next lease of
    the key opens another session; leases then go to the least used, and a released one frees
    its place."""
    pool = make_pool(plain_calls_per_session=2)
    leases = [await lease(pool) for _ in range(5)]
    sessions = [item.session for item in leases]
    a, b, c = sessions[0], sessions[2], sessions[4]
    assert sessions == [a, a, b, b, c] and len({id(a), id(b), id(c)}) == 3
    assert fake.rpc_methods().count("initialize") == 3
    assert (pool.stats().created_total, pool.stats().reused_total) == (3, 2)
    await leases[0].release()
    assert (await lease(pool)).session is a  # a has room again: no fourth session
    assert fake.rpc_methods().count("initialize") == 3


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"plain_calls_per_session": 0}, "spreading off"),
        ({"max_sessions_per_principal": 2}, "the principal's limit, with an idle session in it"),
        ({"max_sessions": 2}, "the bridge's limit, with an idle session in it"),
    ],
)
async def test_crowded_plain_leases_share_where_another_session_may_not_open(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy, overrides: dict[str, Any], why: str
) -> None:
    """No extra session where it is turned off, or where it would take a place within the
    limits: an idle session is never evicted for it."""
    pool = make_pool(**{"plain_calls_per_session": 1, **overrides})
    idle = await lease(pool, SessionKey(KEY.principal, "other"))
    await idle.release()
    first, second = await lease(pool), await lease(pool)
    assert first.session is second.session, why
    assert fake.rpc_methods().count("initialize") == 2
    assert fake.deleted == []


async def test_crowded_plain_leases_share_where_a_session_is_a_stream_or_a_process(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """HTTP+SSE and stdio: a session is one SSE stream, or one process; lists keep sharing."""
    pool = make_pool(transport=ONE_CHANNEL, plain_calls_per_session=1)
    first, second = await lease(pool), await lease(pool)
    assert first.session is second.session
    assert fake.rpc_methods().count("initialize") == 1


async def test_a_burst_of_crowded_leases_opens_extra_sessions_side_by_side(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """Extra sessions of a key open side by side, as many as the calls in flight need (counting
    those opening), not one handshake after another; a lease that finds room in the sessions
    opening shares a crowded one meanwhile."""
    pool = make_pool(plain_calls_per_session=2, init_timeout_s=30.0)  # no retry while gated
    held = [await lease(pool) for _ in range(4)]  # two sessions, two calls each: full
    assert len({id(item.session) for item in held}) == 2
    fake.initialize_gate = asyncio.Event()
    burst = [asyncio.create_task(lease(pool)) for _ in range(4)]
    # calls 5 and 7 each need a session; 6 and 8 fit in the ones they open
    await fake.wait_until(lambda: fake.rpc_methods().count("initialize") == 4)
    sharing = [await burst[1], await burst[3]]
    assert {id(item.session) for item in sharing} <= {id(item.session) for item in held}
    assert not burst[0].done() and not burst[2].done()
    fake.initialize_gate.set()
    opened = [await burst[0], await burst[2]]
    assert len({id(item.session) for item in held + opened}) == 4
    assert pool.stats().created_total == 4
    assert fake.rpc_methods().count("initialize") == 4  # no session beyond what the calls need


async def test_an_extra_session_that_fails_to_open_pauses_spreading(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """The lease that tried shares the crowded session instead of failing, and the next crowded
    leases share without trying again (SPREAD_BACKOFF_S)."""
    pool = make_pool(plain_calls_per_session=1)
    first = await lease(pool)
    fake.initialize_body = b"not json"
    second = await lease(pool)
    tried = fake.rpc_methods()
    third = await lease(pool)
    assert first.session is second.session is third.session
    # the first session's handshake, then the failed one's (the opener asks twice), nothing since
    assert tried == ["initialize", "notifications/initialized", "initialize", "initialize"]
    assert fake.rpc_methods() == tried


async def test_concurrent_first_exclusive_leases_open_one_each(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """Concurrent exclusive leases for one key each get a distinct session."""
    pool = make_pool()
    leases = await asyncio.gather(*(lease(pool, exclusive=True) for _ in range(3)))
    assert len({id(item.session) for item in leases}) == 3


async def test_per_principal_limit_evicts_idle_then_refuses(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """At the per-principal limit an idle session is evicted; with none idle, ClientLimitExceeded
    names the limit."""
    pool = make_pool(max_sessions_per_principal=2)
    held = await lease(pool, exclusive=True)
    idle = await lease(pool, exclusive=True)
    await idle.release()
    other = await lease(pool, SessionKey(KEY.principal, "other"), exclusive=True)
    assert fake.deleted == ["sess-2"]
    assert pool.stats().sessions_open == 2
    with pytest.raises(ClientLimitExceeded) as info:
        await lease(pool, exclusive=True)
    assert info.value.data["limit"] == "upstream.max_sessions_per_principal"
    assert "max_sessions_per_principal" in info.value.message
    assert (await lease(pool, SessionKey("bob", KEY.fingerprint))).session not in (
        held.session,
        other.session,
    )


async def test_total_limit_refuses_when_nothing_is_idle(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """At max_sessions with every session busy, a new key gets CapacityExceeded naming
    upstream.max_sessions."""
    pool = make_pool(max_sessions=1, session_wait_s=0)
    await lease(pool, exclusive=True)
    with pytest.raises(CapacityExceeded) as info:
        await lease(pool, SessionKey("bob", KEY.fingerprint))
    assert info.value.data["limit"] == "upstream.max_sessions"
    assert info.value.message == (
        "The bridge already has 1 upstream sessions in use (upstream.max_sessions), 1 of them "
        "held by interactive"
        " calls; none became free within 0 s (upstream.session_wait_s); retry later"
    )


async def test_idle_sessions_are_reaped(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """The reaper closes (and DELETEs) sessions idle longer than session_idle_s, never busy ones."""
    pool = make_pool(session_idle_s=0.05)
    await pool.start()
    busy = await lease(pool, exclusive=True)
    idle = await lease(pool, exclusive=True)
    await idle.release()
    async with asyncio.timeout(5):
        while pool.stats().sessions_open != 1:
            await asyncio.sleep(0.01)
    await fake.wait_until(lambda: fake.deleted == ["sess-2"])
    assert busy.session.is_alive


async def test_discard_closes_the_session(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """release(discard=True) closes the session; release is idempotent; the next lease opens a new
    one."""
    pool = make_pool()
    first = await lease(pool, exclusive=True)
    await first.release(discard=True)
    await first.release(discard=True)
    assert fake.deleted == ["sess-1"] and not first.session.is_alive
    second = await lease(pool, exclusive=True)
    assert second.session is not first.session and second.session.is_alive


async def test_discarded_session_waits_for_its_other_leases(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """Discarding while a shared lease still uses the session closes it only after that lease
    returns."""
    pool = make_pool()
    exclusive = await lease(pool, exclusive=True)
    shared = await lease(pool)
    await exclusive.release(discard=True)
    assert await echo(shared.session, "still") == text_result("still")
    assert fake.deleted == []
    assert (await lease(pool)).session is not shared.session  # never handed out again
    await shared.release()
    assert fake.deleted == ["sess-1"]


async def test_dead_session_is_never_handed_out(make_pool: Callable[..., UpstreamPool]) -> None:
    """A session that died while leased is dropped on release and not reused."""
    pool = make_pool()
    first = await lease(pool)
    await first.session.aclose()
    await first.release()
    second = await lease(pool)
    assert second.session is not first.session and second.session.is_alive
    assert pool.stats().sessions_open == 1


async def test_get_stream_messages_follow_the_exclusive_handler(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy, unowned: Unowned
) -> None:
    """GET-stream pushes go to the exclusive lease's handler while set, else to on_unowned."""
    pool = make_pool()
    held = await lease(pool, exclusive=True)
    got: asyncio.Queue[Inbound] = asyncio.Queue()
    held.set_unrelated_handler(got.put_nowait)
    [server_session] = fake.all_sessions
    assert server_session.get_stream is not None
    await server_session.get_stream.add(json.dumps(ROOTS_PUSH))
    async with asyncio.timeout(5):
        inbound = await got.get()
    assert (inbound.message, inbound.related_request_id) == (ROOTS_PUSH, None)
    held.set_unrelated_handler(None)
    await server_session.get_stream.add(json.dumps({**ROOTS_PUSH, "id": 901}))
    async with asyncio.timeout(5):
        while not unowned.seen:
            await asyncio.sleep(0.01)
    [(session, stray)] = unowned.seen
    assert session is held.session and stray.message["id"] == 901


async def test_push_before_any_lease_goes_to_unowned(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy, unowned: Unowned
) -> None:
    """A roots/list sent right after initialize (no call owns it) reaches on_unowned with its
    session."""
    fake.on_get_connect = [ROOTS_PUSH]
    pool = make_pool()
    held = await lease(pool, exclusive=True)
    async with asyncio.timeout(5):
        while not unowned.seen:
            await asyncio.sleep(0.01)
    [(session, inbound)] = unowned.seen
    assert session is held.session and inbound.message == ROOTS_PUSH
    await session.respond(ROOTS_PUSH["id"], result={"roots": []})
    assert fake.all_sessions[0].responses == [
        {"jsonrpc": "2.0", "id": ROOTS_PUSH["id"], "result": {"roots": []}}
    ]


async def test_unrelated_handler_is_for_exclusive_leases_only(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """Setting an unrelated handler on a shared lease is a BridgeBug."""
    pool = make_pool()
    shared = await lease(pool)
    with pytest.raises(BridgeBug):
        shared.set_unrelated_handler(lambda inbound: None)


async def test_reinitializations_are_counted(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """An expired session is re-initialized transparently and counted in stats()."""
    fake.get_status = 405
    pool = make_pool()
    held = await lease(pool)
    await fake.expire()
    assert await echo(held.session, "again") == text_result("again")
    assert pool.stats().reinitialized_total == 1
    await held.release(discard=True)
    assert pool.stats().reinitialized_total == 1


async def test_upstream_down_fails_fast_for_every_waiter(
    client: aiohttp.ClientSession, unowned: Unowned, unused_tcp_port: int
) -> None:
    """With nothing listening, concurrent leases all get UpstreamUnavailable quickly and the pool
    stays empty."""
    settings = UpstreamSettings(
        url=f"http://127.0.0.1:{unused_tcp_port}/mcp", connect_timeout_s=1.0
    )
    pool = UpstreamPool(settings, http_opener(client, settings), on_unowned=unowned)
    try:
        async with asyncio.timeout(2):
            results = await asyncio.gather(*(lease(pool) for _ in range(3)), return_exceptions=True)
        assert all(isinstance(result, UpstreamUnavailable) for result in results)
        assert pool.stats().sessions_open == 0
    finally:
        await pool.aclose()


async def test_slow_upstream_times_out_and_the_pool_recovers(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """An initialize that hangs gives UpstreamTimeout; once the upstream answers, leasing works
    again."""
    pool = make_pool(init_timeout_s=0.2)
    fake.hang_initialize = True
    with pytest.raises(UpstreamTimeout):
        await lease(pool)
    fake.hang_initialize = False
    assert await echo((await lease(pool)).session, "ok") == text_result("ok")


async def test_aclose_closes_every_session(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """aclose() DELETEs every session; later leases are refused and late releases are harmless."""
    pool = make_pool()
    one = await lease(pool, exclusive=True)
    await lease(pool, SessionKey("bob", "x"))
    await pool.aclose()
    assert sorted(fake.deleted) == ["sess-1", "sess-2"]
    await one.release()
    with pytest.raises(UpstreamUnavailable, match="shutting down"):
        await lease(pool)


async def test_one_session_scripted_shared_and_exclusive_leases_never_deadlock(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """max_sessions = 1: shared leases join the exclusive holder, a second exclusive lease and
    another key queue, and each gets the session as soon as the leases before it are released:
    the one session, which another key takes over once nobody holds it (never deleted)."""
    pool = make_pool(max_sessions=1, session_wait_s=5)
    shared = await lease(pool)
    first = await lease(pool, exclusive=True)
    assert first.session is shared.session
    since = pool.waits_total
    second = asyncio.create_task(lease(pool, exclusive=True))
    bob = asyncio.create_task(lease(pool, SessionKey("bob", KEY.fingerprint)))
    await until_waiting(pool, since, second, bob)
    assert not second.done() and not bob.done()
    joined = await lease(pool)  # another shared lease joins the exclusive holder at once
    assert joined.session is first.session
    await first.release()
    after = await second
    assert after.session is shared.session
    for alice_lease in (after, joined):
        since = pool.waits_total
        await alice_lease.release()  # wakes bob, who finds no room and waits again
        await until_waiting(pool, since, bob)
        assert not bob.done()  # alice's session is still in use
    await shared.release()
    bob_lease = await bob
    assert bob_lease.key.principal == "bob" and bob_lease.session is shared.session
    assert shared.session.is_alive  # kept for the bridge's life
    assert (pool.stats().created_total, pool.stats().sessions_open) == (1, 1)
    assert fake.deleted == []


async def test_one_session_waiting_is_bounded_and_a_cancelled_waiter_leaves_no_trace(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """A lease that cannot get the only session fails after session_wait_s; a cancelled waiter is
    gone."""
    pool = make_pool(max_sessions=1, session_wait_s=0.2)
    held = await lease(pool, exclusive=True)
    with pytest.raises(CapacityExceeded) as info:
        await lease(pool, exclusive=True)
    assert info.value.data["limit"] == "upstream.max_sessions"
    assert "none became free within 0.2 s (upstream.session_wait_s)" in info.value.message
    since = pool.waits_total
    waiter = asyncio.create_task(lease(pool, SessionKey("bob", KEY.fingerprint)))
    await until_waiting(pool, since, waiter)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await held.release()
    # the one session, now bob's: never replaced while it lives
    assert (await lease(pool, SessionKey("bob", KEY.fingerprint))).session is held.session
    assert pool.stats().sessions_open == 1


# -- interactive calls sharing a session where the server attributes their pushes (§ 28) ------

ASK = "tools/call ask"


async def labelled(pool: UpstreamPool, key: SessionKey = KEY, label: str = ASK) -> Lease:
    """What the first-call route asks for an interactive call: exclusive, with its label."""
    async with asyncio.timeout(5):
        return await pool.lease(key, CAPS, exclusive=True, headers={}, label=label)


async def learned(pool: UpstreamPool, label: str = ASK) -> None:
    """One call of `label` runs on a session of its own, pushes on its own POST stream (recorded
    on the lease by the call, proxy/calls/call.py) and ends with no GET-stream push."""
    first = await labelled(pool, label=label)
    assert first.exclusive
    first.pushed_related = True
    await first.release()


async def test_a_call_that_pushed_nothing_teaches_nothing(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """Ending without any push proves nothing about where the tool's pushes come: the next call
    of the label still gets a session of its own."""
    pool = make_pool()
    first = await labelled(pool)
    await first.release()
    second = await labelled(pool)
    assert second.exclusive
    await second.release()


async def test_held_calls_sharing_a_session_never_spread(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """Attributed interactive calls pack onto their session however many share it: spreading is
    for plain calls (a held call's session costs memory the whole time it is held)."""
    pool = make_pool(plain_calls_per_session=1)
    await learned(pool)
    leases = [await labelled(pool) for _ in range(3)]
    assert not any(item.exclusive for item in leases)
    assert len({id(item.session) for item in leases}) == 1
    assert fake.rpc_methods().count("initialize") == 1


async def get_push(
    fake: FakeLegacy, session_index: int, push_id: int, message: dict[str, Any] | None = None
) -> None:
    server_session = fake.all_sessions[session_index]
    assert server_session.get_stream is not None
    await server_session.get_stream.add(json.dumps(message or {**ROOTS_PUSH, "id": push_id}))


async def wait_unowned(unowned: Unowned, count: int) -> None:
    async with asyncio.timeout(5):
        while len(unowned.seen) < count:
            await asyncio.sleep(0.01)


async def test_a_label_shares_its_session_once_learned(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """An unknown call gets a session of its own; after one such call ended with no GET-stream
    push, the label's calls share one session (shared leases); an exclusive lease joins it only
    once they are done (the warm session, as a direct client would have kept)."""
    pool = make_pool()
    await learned(pool)
    calls = [await labelled(pool) for _ in range(3)]
    assert [call.exclusive for call in calls] == [False, False, False]
    assert len({id(call.session) for call in calls}) == 1
    other = await labelled(pool, label="tools/call other")
    assert other.exclusive and other.session is not calls[0].session
    for call in [*calls, other]:
        await call.release()
    assert await echo(calls[0].session, "still") == text_result("still")
    again = await lease(pool, exclusive=True)
    assert again.session is calls[0].session
    assert pool.stats().created_total == 2
    assert fake.rpc_methods().count("initialize") == 2


async def test_principals_never_share_a_session(make_pool: Callable[..., UpstreamPool]) -> None:
    """The label is learned once, but each principal's calls share only their own session."""
    pool = make_pool()
    await learned(pool)
    bob = SessionKey(principal="bob", fingerprint="elicit")
    alice_calls = [await labelled(pool) for _ in range(2)]
    bob_calls = [await labelled(pool, bob) for _ in range(2)]
    assert not any(call.exclusive for call in alice_calls + bob_calls)
    assert alice_calls[0].session is alice_calls[1].session
    assert bob_calls[0].session is bob_calls[1].session
    assert bob_calls[0].session is not alice_calls[0].session
    assert {call.key.principal for call in bob_calls} == {"bob"}


async def test_capability_sets_never_share_a_session(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    pool = make_pool()
    await learned(pool)
    sampling = SessionKey(principal="alice", fingerprint="sampling")
    first, second = await labelled(pool), await labelled(pool, sampling)
    assert not first.exclusive and not second.exclusive
    assert first.session is not second.session


PROGRESS_ON_GET: dict[str, Any] = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": "mrtr-1", "progress": 1},
}
LIST_CHANGED_ON_GET: dict[str, Any] = {
    "jsonrpc": "2.0",
    "method": "notifications/tools/list_changed",
}


@pytest.mark.parametrize(
    ("message", "shares"),
    [(None, False), (PROGRESS_ON_GET, False), (LIST_CHANGED_ON_GET, True)],
    ids=["push", "progress", "list-changed"],
)
async def test_what_the_get_stream_carries_while_learning(
    make_pool: Callable[..., UpstreamPool],
    fake: FakeLegacy,
    unowned: Unowned,
    message: dict[str, Any] | None,
    shares: bool,
) -> None:
    """A push, or progress, on the GET stream during the label's own-session call: the label
    never shares. A list change concerns the session, not the call: the label still learns."""
    pool = make_pool()
    first = await labelled(pool)
    first.pushed_related = True
    await get_push(fake, 0, 901, message)
    await wait_unowned(unowned, 1)  # no handler set: it goes to policy
    await first.release()
    calls = [await labelled(pool) for _ in range(2)]
    assert [call.exclusive for call in calls] == [not shares, not shares]
    assert (calls[0].session is calls[1].session) is shares


async def test_a_discarded_call_teaches_nothing(make_pool: Callable[..., UpstreamPool]) -> None:
    """A cancelled call (its session discarded) may have stopped before it pushed."""
    pool = make_pool()
    first = await labelled(pool)
    await first.release(discard=True)
    assert (await labelled(pool)).exclusive


async def test_a_cancelled_sharing_call_retires_its_session(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy
) -> None:
    """A cancelled call that shared its session (released with discard) retires it: later calls
    go to a new session, and the old one closes when its last call is done."""
    pool = make_pool()
    await learned(pool)
    cancelled, staying = await labelled(pool), await labelled(pool)
    await cancelled.release(discard=True)
    later = await labelled(pool)
    assert not later.exclusive and later.session is not staying.session
    assert staying.session.is_alive
    await staying.release()
    assert not staying.session.is_alive
    assert pool.stats().sessions_open == 1


async def test_an_unattributable_push_is_refused_and_the_label_never_shares_again(
    make_pool: Callable[..., UpstreamPool], fake: FakeLegacy, unowned: Unowned
) -> None:
    """A GET-stream push on a session two calls share reaches no call (policy refuses it); the
    label is disqualified for good, even after a later clean own-session call."""
    pool = make_pool()
    await learned(pool)
    calls = [await labelled(pool) for _ in range(2)]
    assert calls[0].session is calls[1].session and not calls[0].exclusive
    await get_push(fake, 0, 902)
    await wait_unowned(unowned, 1)
    [(session, inbound)] = unowned.seen
    assert session is calls[0].session and inbound.message["id"] == 902
    later = await labelled(pool)
    assert later.exclusive and later.session is not calls[0].session
    await later.release()
    assert (await labelled(pool)).exclusive


async def test_sharing_off_or_without_streams_per_call_keeps_calls_exclusive(
    make_pool: Callable[..., UpstreamPool],
) -> None:
    """`upstream.share_attributed_calls = false`, or a transport whose pushes share one channel
    (HTTP+SSE, stdio): every labelled call keeps a session of its own."""
    off = make_pool(share_attributed_calls=False)
    await learned(off)
    assert (await labelled(off)).exclusive
    one_channel = make_pool(transport=ONE_CHANNEL)
    await learned(one_channel)
    assert (await labelled(one_channel)).exclusive


def test_learned_labels_are_bounded() -> None:
    attribution = PushAttribution(max_labels=2)
    for name in ("a", "b", "c"):
        attribution.observed_own_session(name)
    assert [attribution.qualifies(name) for name in ("a", "b", "c")] == [True, True, False]
    attribution.disqualify({"a"})
    attribution.observed_own_session("a")
    assert (attribution.qualifies("a"), attribution.qualified) == (False, 1)
    assert call_label("tools/call", {"name": "ask"}) == "tools/call ask"
    assert call_label("resources/read", {"uri": "file:///x"}) == "resources/read"
