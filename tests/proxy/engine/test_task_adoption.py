"""The task store's adoption of an id an earlier process sealed (proxy/engine/legacy_tasks/store.py;
docs/tasks.md § What survives what): only for the caller's own, unexpired id with an upstream
handle, once however many requests ask at the same time, and -32602 when the upstream lost it."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest

from config.settings import Settings
from proxy.common.owned_tasks import TaskOwner
from proxy.engine.legacy_tasks.running import RunningTask
from proxy.engine.legacy_tasks.store import TaskStore
from translators.held.request_state import KeyRing, principal_digest
from translators.tasks_ext.messages import LegacyTask
from translators.tasks_ext.task_ids import TaskClaims, UpstreamHandle, seal_task_id
from translators.wire.errors import InvalidParams

RING = KeyRing({"k1": b"\1" * 32}, "k1")
HANDLE = UpstreamHandle("session-1", "legacy-1", "2025-11-25", 3, "event-0", {}, 0)


class NoLease:
    """A lease the store never touches (the task is not started)."""

    session: Any = None

    def set_unrelated_handler(self, handler: object) -> None:
        raise AssertionError("not started")

    async def release(self, *, discard: bool = False) -> None:
        raise AssertionError("not started")


def sealed(principal: str, *, handle: UpstreamHandle | None = HANDLE, ttl_s: int = 60) -> str:
    expires = int((time.time() + ttl_s) * 1000)
    claims = TaskClaims(os.urandom(16), principal_digest(principal), expires, "r0", handle)
    return seal_task_id(claims, RING, os.urandom(12))


class Adopter:
    """Counts adoptions; answers each after a yield, so concurrent finds overlap."""

    def __init__(self, settings: Settings, *, lost: bool = False) -> None:
        self.calls = 0
        self._settings = settings
        self._lost = lost

    async def __call__(self, claims: TaskClaims, task_id: str) -> RunningTask | None:
        self.calls += 1
        await asyncio.sleep(0.01)
        if self._lost:
            return None
        return RunningTask(
            task_id=task_id,
            record=claims.record,
            principal="alice",
            lease=NoLease(),
            legacy=LegacyTask("legacy-1", "working", None, None, None),
            client_capabilities={},
            headers={},
            settings=self._settings.tasks,
            owner=TaskOwner(),
        )


def store_and_settings() -> tuple[TaskStore, Settings]:
    settings = Settings.model_validate({"upstream": {"url": "http://127.0.0.1:9/mcp"}})
    return TaskStore(settings, RING, TaskOwner(), lambda _p, _n: None), settings


async def test_concurrent_requests_adopt_a_task_once_and_share_it() -> None:
    store, settings = store_and_settings()
    adopt = Adopter(settings)
    task_id = sealed("alice")
    found = await asyncio.gather(*(store.find(task_id, "alice", adopt) for _ in range(5)))
    assert adopt.calls == 1
    assert all(task is found[0] for task in found) and found[0].task_id == task_id
    assert await store.find(task_id, "alice", adopt) is found[0] and adopt.calls == 1
    assert store.owns(task_id, "alice") and not store.owns(task_id, "mallory")


async def test_a_task_the_upstream_lost_is_not_found_and_not_remembered() -> None:
    store, settings = store_and_settings()
    adopt = Adopter(settings, lost=True)
    task_id = sealed("alice")
    for expected_calls in (1, 2):
        with pytest.raises(InvalidParams, match="Task not found"):
            await store.find(task_id, "alice", adopt)
        assert adopt.calls == expected_calls


@pytest.mark.parametrize(
    ("task_id", "caller"),
    [
        (sealed("alice", handle=None), "alice"),  # nothing to adopt with (stdio)
        (sealed("alice"), "mallory"),  # another principal's id
        (sealed("alice", ttl_s=-1), "alice"),  # expired
        ("t1.forged", "alice"),
    ],
)
async def test_no_adoption_without_a_valid_own_id_with_a_handle(task_id: str, caller: str) -> None:
    store, settings = store_and_settings()
    adopt = Adopter(settings)
    with pytest.raises(InvalidParams, match="Task not found"):
        await store.find(task_id, caller, adopt)
    assert adopt.calls == 0
