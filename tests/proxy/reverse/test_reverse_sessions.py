"""Reverse sessions (`proxy/reverse/sessions.py`): bound to their principal, capped in total and
per principal by the one per-principal table (the opener's own least recently used goes; another
principal's session only when idle past the timeout; else the refusal), dropped when idle, and a
push answer reaches only a push of its own session."""

from __future__ import annotations

import asyncio

import pytest
from fake_clock import FakeClock

from proxy.common.per_principal import Caps
from proxy.reverse.sessions import ReverseSessions
from translators.protocol.revisions import NEWEST
from translators.reverse.session import ClientView
from translators.wire.errors import CapacityExceeded


def view() -> ClientView:
    return ClientView(NEWEST, {}, {"name": "c", "version": "1"})


def reverse_sessions(
    total: int, per_principal: int, idle_s: float = 60.0
) -> tuple[ReverseSessions, FakeClock]:
    caps = Caps(
        per_principal,
        total,
        "reverse.max_sessions_per_principal",
        "front.max_legacy_sessions",
        "legacy sessions",
    )
    clock = FakeClock()
    return ReverseSessions(caps, idle_s, clock), clock


def test_a_session_is_found_only_by_its_principal() -> None:
    sessions, _ = reverse_sessions(10, 10)
    mine = sessions.open("alice", view())
    assert sessions.get(mine.id, "alice") is mine
    assert sessions.get(mine.id, "bob") is None
    assert len(mine.id) == 32  # 24 random bytes, URL-safe


def test_caps_close_the_openers_least_recently_used_never_anothers_in_use() -> None:
    sessions, clock = reverse_sessions(3, 2)
    a1 = sessions.open("alice", view())
    clock.now += 1
    a2 = sessions.open("alice", view())
    clock.now += 1
    sessions.begin(a1.id)  # a1 in use: a2 is now the oldest idle one
    a3 = sessions.open("alice", view())
    assert [sessions.knows(s.id) for s in (a1, a2, a3)] == [True, False, True]
    assert a2.closed and not a1.closed
    b1 = sessions.open("bob", view())
    with pytest.raises(CapacityExceeded) as refused:  # full: nobody's is carol's to take
        sessions.open("carol", view())
    assert refused.value.message == (
        "The bridge already has 3 legacy sessions (front.max_legacy_sessions); retry later"
    )
    b2 = sessions.open("bob", view())  # full: bob gives up his own
    assert [sessions.knows(s.id) for s in (a1, a3, b1, b2)] == [True, True, False, True]


def test_idle_sessions_go_when_the_next_one_opens_not_those_in_use() -> None:
    sessions, clock = reverse_sessions(10, 10)
    old, streaming = sessions.open("alice", view()), sessions.open("alice", view())
    sessions.begin(streaming.id)  # its GET stream stays open
    clock.now += 61
    sessions.open("bob", view())
    assert not sessions.knows(old.id) and old.closed
    assert sessions.knows(streaming.id) and not streaming.closed


async def test_answers_reach_only_pending_pushes_and_close_cancels() -> None:
    sessions, _ = reverse_sessions(10, 10)
    session = sessions.open("alice", view())
    other = sessions.open("bob", view())
    push_id = session.push_id()
    future: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
    session.pending[push_id] = future
    answer = {"jsonrpc": "2.0", "id": push_id, "result": {"action": "decline"}}
    assert other.answered(answer) is False  # another session's push id means nothing there
    assert session.answered(answer) is True
    assert future.result() == answer
    assert session.answered(answer) is False  # answered once
    running = asyncio.get_running_loop().create_task(asyncio.sleep(60))
    session.in_flight[repr(7)] = running
    assert session.cancel(8) is False
    sessions.close(session.id)
    await asyncio.sleep(0)
    assert running.cancelled()
