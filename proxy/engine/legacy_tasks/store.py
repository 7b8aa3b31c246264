"""The tasks this replica serves, found by sealed id and principal (docs/tasks.md § Task ids).

A forged id, another principal's id, an expired id and an unknown id all get the same -32602.
Ended tasks are kept for their `ttlMs`, then forgotten; a running task past its `ttlMs` is
cancelled upstream and forgotten too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from config.settings import Settings
from proxy.common.owned_tasks import TaskOwner
from translators.held.request_state import NONCE_SIZE, KeyRing, principal_digest
from translators.tasks_ext.messages import TaskView, task_not_found
from translators.tasks_ext.task_ids import TaskClaims, open_task_id, seal_task_id
from translators.wire.errors import ClientLimitExceeded, InvalidParams
from translators.wire.jsonrpc import JsonObject

Publish = Callable[[str, JsonObject], None]


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

    def mint(self, principal: str) -> tuple[str, bytes]:
        """A fresh sealed id and its record number, after checking the caps."""
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
        record = os.urandom(16)
        expires_ms = int((time.time() * 1000) + self._settings.ttl_ms)
        claims = TaskClaims(record, principal_digest(principal), expires_ms, self._replica)
        return seal_task_id(claims, self._keyring, os.urandom(NONCE_SIZE)), record

    def add(self, task: ServedTask) -> None:
        self._tasks[task.record] = task

    def find(self, task_id: str, principal: str) -> ServedTask:
        self._reap()
        claims = open_task_id(task_id, self._keyring)
        if (
            claims is None
            or claims.principal_digest != principal_digest(principal)
            or claims.expires_at_ms <= time.time() * 1000
        ):
            raise task_not_found()
        task = self._tasks.get(claims.record)
        if task is None or task.principal != principal or task.task_id != task_id:
            raise task_not_found()
        return task

    def owns(self, task_id: str, principal: str) -> bool:
        try:
            self.find(task_id, principal)
        except InvalidParams:
            return False
        return True

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
        for task in self.running():
            await task.abandon()
        self._tasks.clear()


__all__ = ["ServedTask", "TaskStore"]
