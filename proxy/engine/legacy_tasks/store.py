"""The tasks this replica serves, found by sealed id and principal (docs/tasks.md § Task ids).

A forged id, another principal's id, an expired id and an unknown id all get the same -32602.
Ended tasks are kept for their `ttlMs`, then forgotten; a running task past its `ttlMs` is
cancelled upstream and forgotten too. A valid id this process does not know whose seal carries an
`UpstreamHandle` is adopted (once, however many requests ask at the same time): the task was
created by an earlier process with the same keys (docs/tasks.md § What survives what).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from config.settings import Settings
from proxy.common.owned_tasks import TaskOwner
from proxy.engine.legacy_tasks.running import RunningTask
from translators.held.request_state import NONCE_SIZE, KeyRing, principal_digest
from translators.tasks_ext.messages import TaskView, task_not_found
from translators.tasks_ext.task_ids import (
    TaskClaims,
    UpstreamHandle,
    open_task_id,
    seal_task_id,
)
from translators.wire.errors import ClientLimitExceeded, InvalidParams
from translators.wire.jsonrpc import JsonObject


class ServedTask(Protocol):
    """A task the store serves: a legacy task (`RunningTask`) or a plain call the bridge turned
    into one (`proxy/engine/legacy_tasks/promoted.py`)."""

    task_id: str
    principal: str
    expires_at: float

    @property
    def record(self) -> bytes: ...

    @property
    def ended(self) -> bool: ...

    @property
    def pending(self) -> Mapping[str, Any]: ...

    async def refresh(self) -> None: ...

    async def answer(self, responses: JsonObject) -> None: ...

    async def cancel(self) -> None: ...

    async def abandon(self) -> None: ...

    def view(self) -> TaskView: ...


Publish = Callable[[str, JsonObject], None]
# (claims with a handle, the id) -> the adopted task, started; None if the upstream lost it
Adopt = Callable[[TaskClaims, str], Awaitable[RunningTask | None]]


class TaskStore:
    def __init__(
        self, settings: Settings, keyring: KeyRing, owner: TaskOwner, publish: Publish
    ) -> None:
        self.publish = publish  # (principal, notifications/tasks) to the listen streams
        self._settings = settings.tasks
        self._replica = settings.held.replica_id
        self._keyring = keyring
        self._owner = owner
        self._tasks: dict[bytes, ServedTask] = {}
        self._adopting: dict[bytes, asyncio.Future[RunningTask | None]] = {}

    def mint(self, principal: str) -> tuple[str, bytes]:
        """A fresh sealed id without an upstream handle and its record number, after checking
        the caps (a task the bridge itself runs: it cannot be adopted elsewhere)."""
        record = self.reserve(principal)
        expires_ms = int((time.time() * 1000) + self._settings.ttl_ms)
        claims = TaskClaims(record, principal_digest(principal), expires_ms, self._replica)
        return seal_task_id(claims, self._keyring, os.urandom(NONCE_SIZE)), record

    def reserve(self, principal: str) -> bytes:
        """A fresh record number, after checking the caps."""
        self._reap()
        running = [t for t in self._tasks.values() if not t.ended]
        if len(self._tasks) >= self._settings.max_total:
            raise ClientLimitExceeded(
                "Too many tasks on this server; try again later", "tasks.max_total"
            )
        if sum(t.principal == principal for t in running) >= self._settings.max_per_principal:
            raise ClientLimitExceeded(
                "Too many running tasks for this caller", "tasks.max_per_principal"
            )
        return os.urandom(16)

    def seal(self, task: RunningTask, handle: UpstreamHandle | None) -> str:
        """The task's sealed id (expiring `ttl_ms` after its creation)."""
        expires_ms = int(task.expires_at * 1000)
        claims = TaskClaims(
            task.record, principal_digest(task.principal), expires_ms, self._replica, handle
        )
        return seal_task_id(claims, self._keyring, os.urandom(NONCE_SIZE))

    def add(self, task: ServedTask) -> None:
        self._tasks[task.record] = task

    async def find(self, task_id: str, principal: str, adopt: Adopt | None = None) -> ServedTask:
        """The caller's task; adopted with `adopt` when this process does not know it."""
        claims = self._claims(task_id, principal)
        task = self._tasks.get(claims.record)
        if task is None and adopt is not None and claims.handle is not None:
            task = await self._adopt_once(claims, task_id, adopt)
        if task is None or task.principal != principal or task.task_id != task_id:
            raise task_not_found()
        return task

    def _claims(self, task_id: str, principal: str) -> TaskClaims:
        self._reap()
        claims = open_task_id(task_id, self._keyring)
        if (
            claims is None
            or claims.principal_digest != principal_digest(principal)
            or claims.expires_at_ms <= time.time() * 1000
        ):
            raise task_not_found()
        return claims

    async def _adopt_once(
        self, claims: TaskClaims, task_id: str, adopt: Adopt
    ) -> RunningTask | None:
        pending = self._adopting.get(claims.record)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[RunningTask | None] = asyncio.get_running_loop().create_future()
        self._adopting[claims.record] = future
        try:
            task = await adopt(claims, task_id)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a concurrent asker re-raises it, nobody else must
            raise
        else:
            if task is not None:
                self.add(task)
            future.set_result(task)
            return task
        finally:
            del self._adopting[claims.record]

    def owns(self, task_id: str, principal: str) -> bool:
        """Whether this process serves the caller's task now (no adoption)."""
        try:
            claims = self._claims(task_id, principal)
        except InvalidParams:
            return False
        task = self._tasks.get(claims.record)
        return task is not None and task.principal == principal and task.task_id == task_id

    def _reap(self) -> None:
        now = time.time()
        for record, task in list(self._tasks.items()):
            if task.expires_at <= now:
                del self._tasks[record]
                if not task.ended:
                    self._owner.spawn(task.abandon(), name="legacy-task-expired")

    def running(self) -> list[ServedTask]:
        return [t for t in self._tasks.values() if not t.ended]

    async def aclose(self) -> None:
        """At shutdown a task another process can adopt is detached (it goes on upstream); any
        other running task is cancelled upstream."""
        for task in self.running():
            if isinstance(task, RunningTask) and task.survives_restart:
                await task.detach()
            else:
                await task.abandon()
        self._tasks.clear()


__all__ = ["ServedTask", "TaskStore"]
