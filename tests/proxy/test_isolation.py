"""Isolation by principal (issue 6): two callers share no upstream session, held call or state, and
neither can resume, enumerate or exhaust the other's held calls.

The bridge runs in-process in front of a real legacy server (`tests/peers/journal_server.py`,
mcp 1.x) that journals what reached it, so "nothing was sent upstream" is checked on the upstream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from integration.harness import ModernPoster
from safety_harness import (
    Held,
    JournalPeer,
    accept,
    bridge_settings,
    call,
    error_of,
    finish,
    inprocess_bridge,
    journal_peer,
    retry,
    start_held,
    text_of,
)

from config.settings import IdentitySettings
from proxy.auth.principal import principal_of
from translators.wire.errors import INVALID_PARAMS, INVALID_REQUEST_STATE_MESSAGE

TIMEOUT_S = 30.0
ALICE = "Bearer alice-token"
BOB = "Bearer bob-token"
REJECTED = {"code": INVALID_PARAMS, "message": INVALID_REQUEST_STATE_MESSAGE}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JournalPeer]:
    """One journaling legacy server for the module."""
    with journal_peer(tmp_path_factory.mktemp("isolation")) as peer:
        yield peer


async def whoami(poster: ModernPoster) -> dict[str, str]:
    seen: dict[str, str] = json.loads(text_of(await call(poster, "whoami")))
    return seen


async def test_principals_never_share_an_upstream_session(upstream: JournalPeer) -> None:
    """Interleaved calls of two principals land on disjoint upstream sessions, each with its own
    credential."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_bridge(bridge_settings(upstream.url)) as bridge,
    ):
        alice, bob = bridge.poster(ALICE), bridge.poster(BOB)
        seen = await asyncio.gather(*(whoami(poster) for _ in range(4) for poster in (alice, bob)))
    alice_seen, bob_seen = seen[0::2], seen[1::2]
    assert {entry["authorization"] for entry in alice_seen} == {ALICE}
    assert {entry["authorization"] for entry in bob_seen} == {BOB}
    assert not {entry["session"] for entry in alice_seen} & {entry["session"] for entry in bob_seen}


async def test_another_principal_cannot_resume_a_held_call(upstream: JournalPeer) -> None:
    """Bob replaying Alice's exact retry is refused with the fixed message, nothing goes upstream,
    Alice completes."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_bridge(bridge_settings(upstream.url)) as bridge,
    ):
        alice, bob = bridge.poster(ALICE), bridge.poster(BOB)
        held = await start_held(alice, "ask", tag="alice-resume")
        stolen = await retry(bob, held, accept(held, "bob was here"))
        assert error_of(stolen) == REJECTED
        assert upstream.events("alice-resume") == ["call_started"]
        assert await finish(alice, held, "mine") == "alice-resume: mine"
        rejected = "mrtr_bridge_request_state_rejections_total"
        assert bridge.sample(rejected, reason="other_principal") == 1


async def test_held_calls_cannot_be_enumerated(upstream: JournalPeer) -> None:
    """A stolen, a forged, a truncated and an unknown state all get one identical answer, and no id
    leaks."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_bridge(bridge_settings(upstream.url)) as bridge,
    ):
        alice, bob = bridge.poster(ALICE), bridge.poster(BOB)
        held = await start_held(alice, "ask", tag="alice-enum")
        mine = await start_held(bob, "ask", tag="bob-enum")
        await finish(bob, mine, "used")  # Bob's own state, now spent: its held call is gone
        probes = [
            held.request_state,
            "v1." + "A" * 120,
            held.request_state[:-8],
            mine.request_state,
        ]
        replies = [
            await retry(bob, Held(held.tool, held.arguments, state, held.keys), accept(held, "x"))
            for state in probes
        ]
        assert [error_of(reply) for reply in replies] == [REJECTED] * 4
        assert {(reply.status, reply.headers["content-type"]) for reply in replies} == {
            (200, "application/json")
        }
        metrics = bridge.metrics_text()
        assert held.request_state not in metrics
        assert principal_of({"authorization": ALICE}, IdentitySettings()) not in metrics
        assert await finish(alice, held, "still mine") == "alice-enum: still mine"


async def test_one_principal_cannot_exhaust_another(upstream: JournalPeer) -> None:
    """Alice at her held-call cap is refused while Bob starts and completes as many as his own cap
    allows."""
    settings = bridge_settings(upstream.url, held={"max_per_principal": 2})
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        alice, bob = bridge.poster(ALICE), bridge.poster(BOB)
        alice_held = [await start_held(alice, "ask", tag=f"alice-cap-{n}") for n in range(2)]
        assert (
            error_of(await call(alice, "ask", tag="alice-cap-2"))["data"]["limit"]
            == "held.max_per_principal"
        )
        bob_held = [await start_held(bob, "ask", tag=f"bob-cap-{n}") for n in range(2)]
        assert [await finish(bob, h, "b") for h in bob_held] == ["bob-cap-0: b", "bob-cap-1: b"]
        assert [await finish(alice, h, "a") for h in alice_held] == [
            "alice-cap-0: a",
            "alice-cap-1: a",
        ]


async def test_two_principals_in_parallel_try_every_cross_access(upstream: JournalPeer) -> None:
    """Both principals at once hold calls and replay each other's states: all crossings fail, own
    calls complete."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_bridge(bridge_settings(upstream.url)) as bridge,
    ):
        callers = {"alice": bridge.poster(ALICE), "bob": bridge.poster(BOB)}
        held = dict(
            zip(
                callers,
                await asyncio.gather(
                    *(
                        asyncio.gather(
                            *(start_held(poster, "ask", tag=f"{name}-x{n}") for n in range(3))
                        )
                        for name, poster in callers.items()
                    )
                ),
                strict=True,
            )
        )
        crossings = [
            retry(callers[thief], victim_call, accept(victim_call, thief))
            for thief, victim in (("alice", "bob"), ("bob", "alice"))
            for victim_call in held[victim]
        ]
        assert [error_of(reply) for reply in await asyncio.gather(*crossings)] == [REJECTED] * 6
        finals = await asyncio.gather(
            *(finish(callers[name], h, name) for name in callers for h in held[name])
        )
    assert finals == [f"{name}-x{n}: {name}" for name in callers for n in range(3)]
    assert all(
        upstream.events(f"{name}-x{n}") == ["call_started", "elicit_answered"]
        for name in callers
        for n in range(3)
    )


async def test_token_refresh_mid_flow_changes_the_principal(upstream: JournalPeer) -> None:
    """With the default Authorization-digest principal, a retry under a refreshed token is another
    principal."""
    async with (
        asyncio.timeout(TIMEOUT_S),
        inprocess_bridge(bridge_settings(upstream.url)) as bridge,
    ):
        before, after = bridge.poster("Bearer alice-v1"), bridge.poster("Bearer alice-v2")
        held = await start_held(before, "ask", tag="refresh-digest")
        assert error_of(await retry(after, held, accept(held, "refreshed"))) == REJECTED
        assert await finish(before, held, "old token") == "refresh-digest: old token"


async def test_token_refresh_mid_flow_with_a_trusted_identity_header(upstream: JournalPeer) -> None:
    """With identity.principal = "header", a refreshed token keeps the principal, so the retry
    completes."""
    settings = bridge_settings(
        upstream.url, identity={"principal": "header", "principal_header": "X-User"}
    )
    async with asyncio.timeout(TIMEOUT_S), inprocess_bridge(settings) as bridge:
        before = bridge.poster("Bearer alice-v1", **{"X-User": "alice"})
        after = bridge.poster("Bearer alice-v2", **{"X-User": "alice"})
        intruder = bridge.poster("Bearer alice-v2", **{"X-User": "mallory"})
        held = await start_held(before, "ask", tag="refresh-header")
        assert error_of(await retry(intruder, held, accept(held, "nope"))) == REJECTED
        assert await finish(after, held, "new token") == "refresh-header: new token"
