"""Reverse sessions (`proxy/reverse/sessions.py`): bound to their principal, capped in total and
per principal (the least recently used goes), dropped when idle, and a push answer reaches only a
push of its own session."""

from __future__ import annotations

import asyncio

import pytest

from proxy.reverse import sessions as sessions_module
from proxy.reverse.sessions import ReverseSessions
from translators.protocol.revisions import NEWEST
from translators.reverse.session import ClientView


def view() -> ClientView:
    return ClientView(NEWEST, {}, {"name": "c", "version": "1"})


def test_a_session_is_found_only_by_its_principal() -> None:
    sessions = ReverseSessions(10, 10, 60.0)
    mine = sessions.open("alice", view())
    assert sessions.get(mine.id, "alice") is mine
    assert sessions.get(mine.id, "bob") is None
    assert len(mine.id) == 32  # 24 random bytes, URL-safe


def test_caps_close_the_least_recently_used() -> None:
    sessions = ReverseSessions(3, 2, 60.0)
    a1, a2 = sessions.open("alice", view()), sessions.open("alice", view())
    assert sessions.get(a1.id, "alice") is a1  # a1 used again: a2 is now the oldest
    a3 = sessions.open("alice", view())
    assert (sessions.knows(a1.id), sessions.knows(a2.id), sessions.knows(a3.id)) == (
        True,
        False,
        True,
    )
    assert a2.closed
    b1 = sessions.open("bob", view())
    b2 = sessions.open("bob", view())  # the total cap (3) closes the oldest of all
    assert not sessions.knows(a1.id) and sessions.knows(b1.id) and sessions.knows(b2.id)


def test_idle_sessions_go_when_the_next_one_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(sessions_module.time, "monotonic", lambda: now[0])
    sessions = ReverseSessions(10, 10, 60.0)
    old = sessions.open("alice", view())
    now[0] += 61
    sessions.open("bob", view())
    assert not sessions.knows(old.id) and old.closed


async def test_answers_reach_only_pending_pushes_and_close_cancels() -> None:
    sessions = ReverseSessions(10, 10, 60.0)
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
