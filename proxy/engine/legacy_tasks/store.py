"""The tasks this replica serves, found by sealed id and principal (docs/tasks.md § Task ids).

A forged id, another principal's id, an expired id and an unknown id all get the same -32602.
Ended tasks are kept for their `ttlMs`, then forgotten; a running task past its `ttlMs` is
cancelled upstream and forgotten too. The caps (docs/tasks.md § Caps) count running tasks and the
places taken for tasks being created; a principal keeps its newest `max_per_principal` finished
tasks, and past `max_total` the oldest finished task of the principal with the most is dropped
(its id then answers as an expired one). A valid id this process does not know whose seal carries an
`UpstreamHandle` is adopted (once, however many requests ask at the same time): the task was
created by an earlier process with the same keys (docs/tasks.md § What survives what).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import structlog

from config.settings import Settings
from proxy.common.clock import Clock
from proxy.common.owned_tasks import TaskOwner
from proxy.common.shown import shown_id
from proxy.engine.legacy_tasks.running import RunningTask
from translators.held.request_state import (
    NONCE_SIZE,
    KeyRing,
    RequestBinding,
    check_binding,
    principal_digest,
)
from translators.protocol.subscriptions import TASKS_NOTIFICATION
from translators.tasks_ext.messages import TaskView, task_fields, task_not_found
from translators.tasks_ext.task_ids import (
    TaskClaims,
    UpstreamHandle,
    open_task_id,
    seal_task_id,
)
from translators.wire.errors import ClientLimitExceeded, InvalidParams
from translators.wire.jsonrpc import JsonObject, notification

RECORD_SIZE: Final = 16
log = structlog.get_logger()


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
        self,
        settings: Settings,
        keyring: KeyRing,
        owner: TaskOwner,
        publish: Publish,
        clock: Clock = time.time,
    ) -> None:
        """`clock`: wall-clock seconds, what a task's `createdAt + ttlMs` and its sealed id's
        expiry are compared with (proxy/common/clock.py)."""
        self._clock = clock
        self._publish = publish  # (principal, notifications/tasks) to the listen streams
        self._settings = settings.tasks
        self._replica = settings.held.replica_id
        self._keyring = keyring
        self._owner = owner
        self._tasks: dict[bytes, ServedTask] = {}
        self._reserved: dict[bytes, str] = {}  # record -> principal: places taken, not yet added
        self._suffix = os.urandom(RECORD_SIZE // 2)  # of every record this process mints
        self._adopting: dict[bytes, asyncio.Future[RunningTask | None]] = {}

    def announce(self, task: ServedTask) -> None:
        """The task's new state to its caller's listen streams that asked for it."""
        self._publish(task.principal, notification(TASKS_NOTIFICATION, task_fields(task.view())))

    def reserve(self, principal: str, record: bytes | None = None) -> bytes:
        """A place for one more running task of `principal`, taken at once (before any await);
        the caller `add`s its task there or `release`s it, on every path. Running tasks and places
        count against both caps; finished ones never refuse a task: past `max_total` the oldest
        finished one of the principal with the most finished tasks is dropped (docs/tasks.md §
        Caps). A fresh record ends with this process's own random suffix: never adopted here."""
        finished = self._reap()
        caps = self._settings
        running = Counter(t.principal for t in self._tasks.values() if not t.ended)
        running.update(self._reserved.values())
        if running[principal] >= caps.max_per_principal:
            raise ClientLimitExceeded(
                "Too many running tasks for this caller", "tasks.max_per_principal"
            )
        if running.total() >= caps.max_total:
            raise ClientLimitExceeded(
                "Too many running tasks on this server; try again later", "tasks.max_total"
            )
        if finished and len(self._tasks) + len(self._reserved) >= caps.max_total:
            most = max(finished.values(), key=lambda kept: (len(kept), -kept[0].expires_at))
            self._forget(most[0], "tasks.max_total")
        if record is None:
            record = os.urandom(RECORD_SIZE - len(self._suffix)) + self._suffix
        self._reserved[record] = principal
        return record

    def release(self, record: bytes) -> None:
        """Give back a place `reserve` took whose task was not added (no-op once it was)."""
        self._reserved.pop(record, None)

    def mint(self, record: bytes, principal: str) -> str:
        """A sealed id without an upstream handle for a reserved `record` (a task the bridge
        itself runs: it cannot be adopted elsewhere)."""
        expires_ms = int((self._clock() * 1000) + self._settings.ttl_ms)
        claims = TaskClaims(record, principal_digest(principal), expires_ms, self._replica)
        return seal_task_id(claims, self._keyring, os.urandom(NONCE_SIZE))

    def seal(
        self,
        task: RunningTask,
        handle: UpstreamHandle | None,
        binding: RequestBinding | None = None,
    ) -> str:
        """The task's sealed id (expiring `ttl_ms` after its creation); `binding`: the request
        whose rounds it serves as `requestState` (`tasks.run_in_bridge`)."""
        expires_ms = int(task.expires_at * 1000)
        digest = principal_digest(task.principal)
        claims = TaskClaims(task.record, digest, expires_ms, self._replica, handle, binding)
        return seal_task_id(claims, self._keyring, os.urandom(NONCE_SIZE))

    def add(self, task: ServedTask) -> None:
        """The task in the place `reserve` took for it."""
        self._reserved.pop(task.record, None)
        self._tasks[task.record] = task

    async def find(
        self,
        task_id: str,
        principal: str,
        adopt: Adopt | None = None,
        *,
        bound_to: RequestBinding | None = None,
    ) -> ServedTask:
        """The caller's task; adopted with `adopt` when this process does not know it (an id it
        minted itself, dropped since, is not adopted). `bound_to`: the id is the `requestState`
        of that request, and must have been sealed for it (else the invalid-state error, before
        anything else happens)."""
        claims = self._claims(task_id, principal)
        if bound_to is not None:
            check_binding(claims.binding, bound_to)
        task = self._tasks.get(claims.record)
        if (
            task is None
            and adopt is not None
            and claims.handle is not None
            and not claims.record.endswith(self._suffix)
        ):
            task = await self._adopt_once(claims, task_id, principal, adopt)
        if task is None or task.principal != principal or task.task_id != task_id:
            raise task_not_found()
        return task

    def _claims(self, task_id: str, principal: str) -> TaskClaims:
        self._reap()
        claims = open_task_id(task_id, self._keyring)
        if (
            claims is None
            or claims.principal_digest != principal_digest(principal)
            or claims.expires_at_ms <= self._clock() * 1000
        ):
            raise task_not_found()
        return claims

    async def _adopt_once(
        self, claims: TaskClaims, task_id: str, principal: str, adopt: Adopt
    ) -> RunningTask | None:
        pending = self._adopting.get(claims.record)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[RunningTask | None] = asyncio.get_running_loop().create_future()
        self._adopting[claims.record] = future
        try:
            self.reserve(principal, claims.record)  # an adopted task runs: the same caps
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
            self.release(claims.record)
            del self._adopting[claims.record]

    def owns(self, task_id: str, principal: str) -> bool:
        """Whether this process serves the caller's task now (no adoption)."""
        try:
            claims = self._claims(task_id, principal)
        except InvalidParams:
            return False
        task = self._tasks.get(claims.record)
        return task is not None and task.principal == principal and task.task_id == task_id

    def _reap(self) -> dict[str, list[ServedTask]]:
        """Forget the tasks past their `ttlMs` (cancelling those still running) and each
        principal's finished tasks past its newest `max_per_principal`; the finished tasks left,
        by principal, oldest first."""
        now = self._clock()
        finished: dict[str, list[ServedTask]] = {}
        for record, task in list(self._tasks.items()):
            if task.expires_at <= now:
                del self._tasks[record]
                if not task.ended:
                    self._owner.spawn(task.abandon(), name="legacy-task-expired")
            elif task.ended:
                finished.setdefault(task.principal, []).append(task)
        for kept in finished.values():
            kept.sort(key=lambda task: task.expires_at)
            while len(kept) > self._settings.max_per_principal:
                self._forget(kept.pop(0), "tasks.max_per_principal")
        return finished

    def _forget(self, task: ServedTask, limit: str) -> None:
        """Drop a finished task before its `ttlMs`: its id then answers as an expired one."""
        del self._tasks[task.record]
        log.info("finished_task_dropped", task=shown_id(task.record), limit=limit)

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
