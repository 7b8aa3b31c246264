"""Long plain calls as tasks the bridge owns (docs/tasks.md, "Long plain calls as tasks").

A `tools/call` (first attempt or MRTR retry) whose own request declared the Tasks extension, on a
tool that does not run as a legacy task, and still running after `tasks.promote_after_ms`, is
answered with a task instead of waiting: the held call (proxy/calls/call.py) goes on, with the
same machine, session and push handling as an MRTR call. The front request's attempt stays attached
until the call replies; an `InputRequiredResult` round becomes the task's `inputRequests`, and
`tasks/update` answers them as a detached retry of that round. The task is registered in the store
before the `CreateTaskResult` goes out, so a `tasks/get` for it resolves at once.

The task lives in this process: a restart, or the loss of the replica that runs it, loses it (then
-32602 "Task not found"), as it loses the held call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

import structlog

from config.settings import Settings
from proxy.calls.attempt import Attempt, Reply
from proxy.calls.call import Call
from proxy.common.faults import reported_error
from proxy.common.front_request import FrontRequest, NullSink
from proxy.common.owned_tasks import TaskOwner
from proxy.engine.legacy_tasks.running import iso
from proxy.engine.legacy_tasks.store import TaskStore
from translators.held.events import ReplyError, ReplyInputRequired, ReplyResult
from translators.held.machine import HeldCallState
from translators.protocol.pushes import input_response_to_legacy
from translators.protocol.results import legacy_error_to_modern
from translators.tasks_ext.messages import (
    TERMINAL,
    Status,
    TaskView,
    create_task_result,
    task_result_payload,
)
from translators.wire.errors import INTERNAL_ERROR, BridgeError
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()

_T = TypeVar("_T")
NextAttempt = Callable[[], int]
Announce = Callable[["PromotedTask"], None]
# a call's next reply; its first attempt's may be the legacy result of a call that ended plain
Outcome = JsonObject | Reply


class PromotedTask:
    """A plain legacy call the bridge serves as a task: its held call and what the client has
    seen of it. Keys shown to the client are never reused in the task's life (an input key of the
    held call may come back in a later round: it then gets a fresh task key)."""

    def __init__(
        self,
        *,
        task_id: str,
        record: bytes,
        principal: str,
        call: Call,
        settings: Settings,
        owner: TaskOwner,
        next_attempt: NextAttempt,
        on_change: Announce,
    ) -> None:
        self.task_id = task_id
        self.record = record
        self.principal = principal
        self._call = call
        self._ttl_ms = settings.tasks.ttl_ms
        self._poll_ms = settings.tasks.poll_interval_ms
        self._owner = owner
        self._next_attempt = next_attempt
        self._on_change = on_change
        now = time.time()
        self.created_at = self.updated_at = now
        self.expires_at = now + self._ttl_ms / 1000
        self.status: Status = "working"
        self.result: JsonObject | None = None
        self.error: JsonObject | None = None
        self._asked: dict[str, str] = {}  # task key -> the held call's key, this round
        self._requests: dict[str, JsonObject] = {}  # task key -> inputRequest
        self._used_keys: set[str] = set()
        self._log = log.bind(task=task_id[-12:])

    # ---- what the store and the task routes need -----------------------------------------------

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    @property
    def pending(self) -> Mapping[str, JsonObject]:
        return self._requests

    async def refresh(self) -> None:
        """Nothing to read upstream: the held call reports every change itself."""

    def view(self) -> TaskView:
        return TaskView(
            task_id=self.task_id,
            status=self.status,
            created_at=iso(self.created_at),
            updated_at=iso(self.updated_at),
            ttl_ms=self._ttl_ms,
            poll_interval_ms=self._poll_ms,
            input_requests=dict(self._requests),
            result=self.result,
            error=self.error,
        )

    def follow(self, reply: Awaitable[Outcome]) -> None:
        """Take the held call's next reply when it comes."""
        self._owner.spawn(self._take(reply), name=f"promoted-task-{self.task_id[-8:]}")

    async def answer(self, responses: JsonObject) -> None:
        """Send the answers for the questions shown now, as one retry of the held call's round;
        unknown and already answered keys are ignored, and every answer is checked before any is
        sent (a bad one fails the update and consumes nothing)."""
        machine = self._call.machine
        if self.ended or machine.state is not HeldCallState.WAITING_CLIENT:
            return
        chosen = {
            self._asked[key]: value
            for key, value in responses.items()
            if key in self._asked and self._asked[key] in machine.pending
        }
        if not chosen:
            return
        for held_key, value in chosen.items():
            input_response_to_legacy(held_key, machine.pending[held_key], value)
        for key in [k for k, held_key in self._asked.items() if held_key in chosen]:
            del self._asked[key]  # answered once: a repeated update finds nothing
            del self._requests[key]
        if not self._requests:
            self._set("working")
        attempt = Attempt(self._next_attempt(), NullSink(), None, None)
        self.follow(self._call.answer_detached(attempt, machine.round, chosen))

    async def cancel(self) -> None:
        """`cancelled` now, and the held call abandoned: its pushes refused and
        `notifications/cancelled` sent upstream before this returns."""
        if self.ended:
            return
        self._finish("cancelled")
        await self._call.abandon("task cancelled")

    async def abandon(self) -> None:
        """The bridge stops or the task expired: as a cancel."""
        await self.cancel()

    # ---- the held call's replies ---------------------------------------------------------------

    async def _take(self, reply: Awaitable[Outcome]) -> None:
        try:
            outcome = await reply
        except BridgeError as exc:  # a held-call cap refused the round
            self._finish("failed", error=reported_error(exc))
            return
        if self.ended:
            return
        if isinstance(outcome, dict):  # the call ended plain just as it was taken over
            self._finish("completed", result=task_result_payload(outcome))
        elif isinstance(outcome, ReplyResult):
            self._finish("completed", result=task_result_payload(outcome.result))
        elif isinstance(outcome, ReplyError):
            self._finish("failed", error=_error_of(outcome))
        else:
            self._show(outcome)

    def _show(self, reply: ReplyInputRequired) -> None:
        """The round's questions as `inputRequests`; a stale reply (its round already answered by
        a later update) shows only what the held call still waits for."""
        machine = self._call.machine
        if machine.state is not HeldCallState.WAITING_CLIENT or reply.round != machine.round:
            return
        shown = {held: key for key, held in self._asked.items()}
        asked: dict[str, str] = {}
        requests: dict[str, JsonObject] = {}
        for held_key, request in reply.input_requests.items():
            if held_key not in machine.pending:
                continue
            key = shown.get(held_key) or self._fresh_key(held_key)
            asked[key] = held_key
            requests[key] = request
        self._asked, self._requests = asked, requests
        self._set("input_required" if requests else "working")

    def _fresh_key(self, held_key: str) -> str:
        key, n = held_key, 1
        while key in self._used_keys:
            n += 1
            key = f"{held_key}~{n}"
        self._used_keys.add(key)
        return key

    def _set(self, status: Status) -> None:
        self.status = status
        self.updated_at = time.time()
        self._on_change(self)

    def _finish(
        self, status: Status, *, result: JsonObject | None = None, error: JsonObject | None = None
    ) -> None:
        if self.ended:
            return
        self.result, self.error = result, error
        self._asked, self._requests = {}, {}
        self._set(status)
        self._log.info("promoted_task_ended", status=status)


@dataclass(frozen=True)
class TaskCreated:
    """A call answered with a task: its `CreateTaskResult`."""

    result: JsonObject


def _error_of(reply: ReplyError) -> JsonObject:
    if reply.error is not None:
        return legacy_error_to_modern(reply.error)
    if reply.fault is not None:
        return reported_error(reply.fault)
    return {"code": INTERNAL_ERROR, "message": "Task failed"}


class Promotion:
    """Decides whether an attempt may become a task, and makes it one when it runs too long."""

    def __init__(
        self,
        settings: Settings,
        store: TaskStore,
        owner: TaskOwner,
        next_attempt: NextAttempt,
    ) -> None:
        self._settings = settings
        self._store = store
        self._owner = owner
        self._next_attempt = next_attempt

    async def first(self, call: Call, request: FrontRequest) -> JsonObject | Reply | TaskCreated:
        """A first attempt: its outcome if it comes within `tasks.promote_after_ms` (the plain
        result, or the held call's first reply); else the call is made a held call now and a task
        takes it over, following the same first reply."""
        waiter = await self._wait(call.first())
        if waiter.done() or not call.hold():  # in, or it ended just now
            return await waiter
        created = self._create(request, call, waiter)
        return created if created is not None else await waiter

    async def reply(
        self, request: FrontRequest, call: Call, reply: Awaitable[Reply]
    ) -> Reply | TaskCreated:
        """A held call's reply if it comes within `tasks.promote_after_ms`; else a
        `CreateTaskResult` for the task that now owns the call."""
        waiter = await self._wait(reply)
        if waiter.done():
            return waiter.result()
        created = self._create(request, call, waiter)
        return created if created is not None else await waiter

    async def _wait(self, work: Awaitable[_T]) -> asyncio.Future[_T]:
        waiter = asyncio.ensure_future(work)
        try:
            await asyncio.wait({waiter}, timeout=self._settings.tasks.promote_after_ms / 1000)
        except asyncio.CancelledError:  # the client went away first: as for any attempt
            waiter.cancel()
            raise
        return waiter

    def _create(
        self, request: FrontRequest, call: Call, reply: Awaitable[Outcome]
    ) -> TaskCreated | None:
        """The task that owns the held call from now on; None if the task caps refuse it (the
        call then stays what it was)."""
        store = self._store
        try:
            record = store.reserve(request.principal)
        except BridgeError as refused:
            log.info("call_not_promoted", reason=refused.message)
            return None
        try:
            task_id = store.mint(record, request.principal)
            return TaskCreated(self._promote(request, call, reply, task_id, record))
        finally:
            store.release(record)  # no-op once the task is added

    def _promote(
        self,
        request: FrontRequest,
        call: Call,
        reply: Awaitable[Outcome],
        task_id: str,
        record: bytes,
    ) -> JsonObject:
        task = PromotedTask(
            task_id=task_id,
            record=record,
            principal=request.principal,
            call=call,
            settings=self._settings,
            owner=self._owner,
            next_attempt=self._next_attempt,
            on_change=self._store.announce,
        )
        life_s = self._settings.tasks.ttl_ms / 1000
        call.relimit(replace(call.machine.limits, attempt_timeout_s=life_s, held_ttl_s=life_s))
        self._store.add(task)  # registered before the answer: tasks/get resolves at once
        task.follow(reply)
        log.info("call_promoted_to_task", task=task_id[-12:])
        return create_task_result(task.view())


__all__ = ["PromotedTask", "Promotion", "TaskCreated"]
