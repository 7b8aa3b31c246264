"""Adopting a legacy task an earlier bridge process created (docs/tasks.md § What survives what).

The task's sealed id carries an `UpstreamHandle`: the upstream `Mcp-Session-Id`, the legacy task
id, the revision, the first SSE event id of the old `tasks/result` stream and the capabilities the
creating request declared. The bridge takes the session over without initializing it, asks the
legacy `tasks/get` whether the server still has the task (an error, or a session the server no
longer knows: -32602 "Task not found", like any unknown id), and starts the task as at creation,
replaying the old stream first so that a question asked before the restart is asked again.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable
from typing import Final

import structlog

from proxy.common.front_request import FrontRequest
from proxy.common.shown import shown_id
from proxy.engine.legacy_tasks.running import RunningTask
from proxy.engine.routes.outside_calls import publish
from proxy.engine.routes.route_context import RouteContext
from proxy.upstream.base import Inbound, InboundHandler, UpstreamSession
from translators.tasks_ext.messages import LEGACY_TASKS_GET, LegacyTask, legacy_task
from translators.tasks_ext.task_ids import TaskClaims, UpstreamHandle
from translators.wire.errors import BridgeError
from translators.wire.jsonrpc import JsonObject

# an adopting process numbers its requests from the old `tasks/result` id plus a random offset in
# this range, clear of the ids the old process (and any earlier adopter) used on the session
ADOPTED_ID_OFFSETS: Final = (10**7, 10**12)

log = structlog.get_logger()


class AdoptedLease:
    """A `TaskLease` on a session outside the pool: the task is its only user, and releasing it
    closes the session (with a DELETE, unless the task was detached)."""

    def __init__(self) -> None:
        self._session: UpstreamSession | None = None
        self._handler: InboundHandler | None = None
        self._released = False

    def bind(self, session: UpstreamSession) -> None:
        self._session = session

    @property
    def session(self) -> UpstreamSession:
        assert self._session is not None
        return self._session

    def on_unrelated(self, inbound: Inbound) -> None:
        if self._handler is not None:
            self._handler(inbound)

    def set_unrelated_handler(self, handler: InboundHandler | None) -> None:
        self._handler = None if self._released else handler

    async def release(self, *, discard: bool = False) -> None:
        if self._released or self._session is None:
            return
        self._released = True
        self._handler = None
        await self._session.aclose()


class TaskAdopter:
    """Builds the `RunningTask` for a handle, on behalf of one request (its principal and
    headers)."""

    def __init__(
        self, ctx: RouteContext, on_change: Callable[[RunningTask], None] | None = None
    ) -> None:
        self._ctx = ctx
        self._on_change = on_change

    async def adopt(
        self, request: FrontRequest, claims: TaskClaims, task_id: str
    ) -> RunningTask | None:
        handle = claims.handle
        if handle is None:
            return None
        init_result = await self._init_result(request, handle)
        lease = AdoptedLease()
        headers = self._ctx.headers(request)
        try:
            session = self._ctx.pool.transport.adopt(
                handle.session_id,
                init_result,
                first_request_id=adopted_first_id(handle),
                headers=headers,
                on_unrelated=lease.on_unrelated,
                cookies=handle.cookies,
            )
        except BridgeError as exc:  # a revision this bridge no longer speaks, say
            log.info("legacy_task_not_adopted", error=type(exc).__name__)
            return None
        if session is None:
            return None
        lease.bind(session)
        legacy = await self._still_there(session, handle, headers)
        if legacy is None:
            await lease.release()
            return None
        task = RunningTask(
            task_id=task_id,
            record=claims.record,
            principal=request.principal,
            lease=lease,
            legacy=legacy,
            client_capabilities=handle.capabilities,
            headers=headers,
            settings=self._ctx.settings.tasks,
            owner=self._ctx.tasks,
            on_change=self._on_change,
            publish=functools.partial(publish, self._ctx),
            created_at=handle.created_at_ms / 1000,
        )
        task.start(replay_from=handle)
        log.info("legacy_task_adopted", task=shown_id(claims.record), status=legacy.status)
        return task

    async def _init_result(self, request: FrontRequest, handle: UpstreamHandle) -> JsonObject:
        """What the server answers to `initialize` now (a warm or new session of the caller's:
        this also detects the transport), with the revision the adopted session negotiated."""
        async with self._ctx.shared_lease(request) as lease:
            return {**lease.session.init_result, "protocolVersion": handle.version}

    async def _still_there(
        self, session: UpstreamSession, handle: UpstreamHandle, headers: dict[str, str]
    ) -> LegacyTask | None:
        """The legacy task as the server has it on that session; None if it has not."""
        call = session.start(
            LEGACY_TASKS_GET, {"taskId": handle.legacy_task_id}, headers=headers, on_inbound=None
        )
        try:
            async with asyncio.timeout(self._ctx.settings.tasks.status_timeout_s):
                task = legacy_task(await call.result())
        except (BridgeError, TimeoutError) as exc:
            log.info("legacy_task_not_adopted", error=type(exc).__name__)
            await asyncio.shield(call.cancel("adoption failed"))
            return None
        return task if task is not None and task.task_id == handle.legacy_task_id else None


def adopted_first_id(handle: UpstreamHandle) -> int:
    """Where an adopting process starts numbering its requests on the session."""
    return handle.result_request_id + random.randrange(*ADOPTED_ID_OFFSETS)


__all__ = ["AdoptedLease", "TaskAdopter"]
