"""The task caps (proxy/engine/legacy_tasks/store.py; docs/tasks.md § Caps): a place is taken at
once and given back, running tasks count against `max_per_principal` and `max_total`, finished
ones never refuse a task, a principal keeps its newest `max_per_principal` finished tasks, past
`max_total` the principal with the most finished tasks gives way, and a dropped task of this
process is never adopted back."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from fake_clock import FakeClock

from config.settings import Settings
from proxy.common.clock import Clock
from proxy.common.owned_tasks import TaskOwner
from proxy.engine.legacy_tasks.running import RunningTask
from proxy.engine.legacy_tasks.store import TaskStore
from translators.held.request_state import KeyRing, principal_digest
from translators.tasks_ext.task_ids import TaskClaims, UpstreamHandle, seal_task_id
from translators.wire.errors import ClientLimitExceeded, InvalidParams

RING = KeyRing({"k1": b"\1" * 32}, "k1")
HANDLE = UpstreamHandle("session-1", "legacy-1", "2025-11-25", 3, "event-0", {}, 0)
PER_PRINCIPAL = "Too many running tasks for this caller"
TOTAL = "Too many running tasks on this server; try again later"


@dataclass
class Task:
    """What the store reads of a task (a `RunningTask` or a `PromotedTask`)."""

    task_id: str
    record: bytes
    principal: str
    expires_at: float
    ended: bool = False
    pending: dict[str, Any] = field(default_factory=dict)
    abandoned: asyncio.Event = field(default_factory=asyncio.Event)

    async def abandon(self) -> None:
        self.ended = True
        self.abandoned.set()


TTL_S = 600


def new_store(per: int = 2, total: int = 4, clock: Clock = time.time) -> TaskStore:
    settings = Settings.model_validate(
        {
            "upstream": {"url": "http://127.0.0.1:9/mcp"},
            "tasks": {"max_per_principal": per, "max_total": total, "ttl_ms": TTL_S * 1000},
        }
    )
    return TaskStore(settings, RING, TaskOwner(), lambda _p, _n: None, clock)


def start(store: TaskStore, principal: str, *, age_s: float = 0.0, now: float = 0.0) -> Task:
    """A task created through the store as the routes do: reserve, mint, add (`now`: the store's
    clock, if not the wall clock)."""
    record = store.reserve(principal)
    created = (now or time.time()) - age_s
    task = Task(store.mint(record, principal), record, principal, created + TTL_S)
    store.add(task)  # type: ignore[arg-type]
    return task


async def found(store: TaskStore, task: Task) -> bool:
    try:
        await store.find(task.task_id, task.principal)
    except InvalidParams:
        return False
    return True


def test_places_are_taken_at_once_and_given_back() -> None:
    """Reservations not yet filled count as running tasks: no await between check and record."""
    store = new_store(per=2, total=3)
    first, second = store.reserve("alice"), store.reserve("alice")
    with pytest.raises(ClientLimitExceeded, match=PER_PRINCIPAL):
        store.reserve("alice")
    store.reserve("bob")
    with pytest.raises(ClientLimitExceeded, match=TOTAL) as refused:
        store.reserve("carol")
    assert refused.value.data == {"source": "mrtr-bridge", "limit": "tasks.max_total"}
    store.release(first)
    store.release(first)  # twice: nothing more
    store.reserve("carol")
    with pytest.raises(ClientLimitExceeded, match=TOTAL):
        store.reserve("alice")
    assert second != first


async def test_a_principals_finished_tasks_past_its_cap_are_dropped_oldest_first() -> None:
    store = new_store(per=2, total=10)
    tasks = [start(store, "alice", age_s=10 - n) for n in range(2)]
    for task in tasks:
        task.ended = True
    newer = [start(store, "alice", age_s=5 - n) for n in range(2)]
    for task in newer:
        task.ended = True
    assert [await found(store, t) for t in tasks + newer] == [False, False, True, True]


async def test_finished_tasks_never_refuse_and_the_principal_with_most_gives_way() -> None:
    """`max_total` 4: Alice's three finished tasks and Bob's one leave Carol her task; Alice's
    oldest goes, Bob's stays. Running tasks still refuse."""
    store = new_store(per=3, total=4)
    alice = [start(store, "alice", age_s=30 - n) for n in range(3)]
    bob = start(store, "bob", age_s=40)
    for task in [*alice, bob]:
        task.ended = True
    carol = start(store, "carol")
    assert [await found(store, t) for t in [*alice, bob, carol]] == [False, True, True, True, True]
    running = [start(store, who) for who in ("carol", "dave", "erin")]
    assert [await found(store, t) for t in [*alice, bob]] == [False] * 4
    with pytest.raises(ClientLimitExceeded, match=TOTAL):
        store.reserve("frank")
    assert all([await found(store, t) for t in [carol, *running]])


async def test_a_dropped_task_of_this_process_is_never_adopted_back() -> None:
    """Its id still opens (unexpired), but the store does not take its old session over again: it
    answers as an expired id; an id another process minted is adopted, within the caps."""
    store = new_store(per=1, total=4)
    dropped = start(store, "alice", age_s=20)
    dropped.ended = True
    start(store, "alice").ended = True
    expires = int(dropped.expires_at * 1000)
    own = TaskClaims(dropped.record, principal_digest("alice"), expires, "r0", HANDLE)
    adoptions: list[TaskClaims] = []

    async def adopt(claims: TaskClaims, task_id: str) -> RunningTask | None:
        adoptions.append(claims)
        return None

    with pytest.raises(InvalidParams, match="Task not found"):
        await store.find(seal_task_id(own, RING, os.urandom(12)), "alice", adopt)
    assert adoptions == []
    foreign = TaskClaims(os.urandom(16), principal_digest("alice"), expires, "r0", HANDLE)
    with pytest.raises(InvalidParams, match="Task not found"):
        await store.find(seal_task_id(foreign, RING, os.urandom(12)), "alice", adopt)
    assert adoptions == [foreign]
    start(store, "alice")  # running: Alice at her cap, an adoption is refused before it starts
    with pytest.raises(ClientLimitExceeded, match=PER_PRINCIPAL):
        await store.find(seal_task_id(foreign, RING, os.urandom(12)), "alice", adopt)
    assert adoptions == [foreign]


async def test_past_its_ttl_a_task_is_not_found_and_if_running_is_abandoned() -> None:
    """At `createdAt + ttlMs` on the store's clock a task is gone, finished or not (a running one
    is cancelled upstream); a moment before, it is found."""
    clock = FakeClock(time.time())
    store = new_store(clock=clock)
    running, finished = start(store, "alice", now=clock()), start(store, "bob", now=clock())
    finished.ended = True
    clock.advance(TTL_S - 1)
    assert [await found(store, task) for task in (running, finished)] == [True, True]
    clock.advance(1)
    assert [await found(store, task) for task in (running, finished)] == [False, False]
    async with asyncio.timeout(5):
        await running.abandoned.wait()  # cancelled upstream
    assert not finished.abandoned.is_set()
