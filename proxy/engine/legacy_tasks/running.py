"""One legacy task served through the Tasks extension (docs/tasks.md § Lifetime).

The task pins the upstream session it was created on (legacy tasks are session-scoped) with an
exclusive lease until it ends. Right after creation it opens the legacy `tasks/result`, which
blocks until the task is terminal: the server's pushes for the task arrive on that request's
stream (or, over stdio and on the GET stream, as the session's unrelated messages, which an
exclusive lease receives), and its response is the final payload. Each push becomes an
`inputRequests` entry under a key never reused in the task's life; `answer()` sends a client's
answer back onto exactly that push, once.

On a Streamable HTTP upstream the task's sealed id carries an `UpstreamHandle`: a new bridge
process adopts the session, replays the old `tasks/result` stream from its first event (the
questions asked before the restart) and opens a `tasks/result` of its own; at shutdown a task is
detached, its session closed here but not DELETEd upstream (docs/tasks.md § What survives what).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import structlog

from config.tasks import TasksSettings
from proxy.calls.attempt import Attempt
from proxy.calls.inbound import Publish, route_inbound
from proxy.common.owned_tasks import TaskOwner
from proxy.common.shown import shown_id
from proxy.engine.legacy_tasks.restart import TaskLease, upstream_handle
from proxy.upstream.base import Inbound, UpstreamCall, UpstreamSession
from translators.held.push_ledger import Answer
from translators.protocol.pushes import (
    PendingPush,
    PushAnswer,
    input_response_to_legacy,
    refusal,
)
from translators.protocol.results import legacy_error_to_modern
from translators.tasks_ext.messages import (
    LEGACY_TASKS_CANCEL,
    LEGACY_TASKS_GET,
    LEGACY_TASKS_RESULT,
    LOST_ERROR,
    TERMINAL,
    LegacyTask,
    Status,
    TaskView,
    legacy_task,
    task_result_payload,
)
from translators.tasks_ext.questions import admit_question
from translators.tasks_ext.task_ids import UpstreamHandle
from translators.wire.errors import INTERNAL_ERROR, BridgeError, UpstreamReturnedError
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()


class RunningTask:
    """A legacy task, its pinned session and what the client has seen of it."""

    def __init__(
        self,
        *,
        task_id: str,
        record: bytes,
        principal: str,
        lease: TaskLease,
        legacy: LegacyTask,
        client_capabilities: JsonObject,
        headers: Mapping[str, str],
        settings: TasksSettings,
        owner: TaskOwner,
        on_change: Callable[[RunningTask], None] | None = None,
        publish: Publish | None = None,
        created_at: float | None = None,
    ) -> None:
        """`publish`: where the session-wide notifications the server sends while the task runs
        go (the principal's listen streams; proxy/calls/inbound.py)."""
        self.task_id = task_id
        self.record = record
        self.principal = principal
        self.legacy_id = legacy.task_id
        self._lease = lease
        self._caps = client_capabilities
        self._headers = dict(headers)
        self._settings = settings
        self._owner = owner
        now = time.time()
        self.created_at = now if created_at is None else created_at
        self.updated_at = now
        self.expires_at = self.created_at + settings.ttl_ms / 1000
        self.poll_interval_ms = legacy.poll_interval_ms or settings.poll_interval_ms
        self.status: Status = "cancelled" if legacy.status == "cancelled" else "working"
        self.status_message = legacy.status_message
        self.result: JsonObject | None = None
        self.error: JsonObject | None = None
        self.legacy_error: JsonObject | None = None  # the upstream's own, for in-bridge tasks
        self.pending: dict[str, PendingPush] = {}
        self.used_keys: set[str] = set()
        self._result_call: UpstreamCall | None = None
        self._replay: UpstreamCall | None = None  # the old tasks/result stream, when adopted
        self._detached = False
        self._ended = asyncio.Event()
        self._changed = asyncio.Event()  # a push arrived or the task ended
        self._on_change = on_change  # notifications/tasks to listen streams
        self._publish = publish
        self._log = log.bind(task=shown_id(record))

    # ---- lifetime ------------------------------------------------------------------------------

    def start(self, replay_from: UpstreamHandle | None = None) -> None:
        """Open the legacy `tasks/result` (and, for an adopted task, replay the old one's stream
        first, so that its questions come before anything new)."""
        self._lease.set_unrelated_handler(self._on_inbound)
        session = self._lease.session
        if replay_from is not None and replay_from.resume_event_id is not None:
            self._replay = session.resume(
                LEGACY_TASKS_RESULT,
                replay_from.result_request_id,
                replay_from.resume_event_id,
                headers=self._headers,
                on_inbound=self._on_inbound,
            )
        call = session.start(
            LEGACY_TASKS_RESULT,
            {"taskId": self.legacy_id},
            headers=self._headers,
            on_inbound=self._on_inbound,
        )
        self._result_call = call
        self._owner.spawn(self._await_result(call), name="legacy-task-result")

    async def _await_result(self, call: UpstreamCall) -> None:
        try:
            payload = await call.result()
        except UpstreamReturnedError as exc:
            self.legacy_error = exc.error
            self._finish("failed", error=legacy_error_to_modern(exc.error))
        except BridgeError as exc:
            if self._detached:
                return  # the bridge stops: the task goes on upstream, for a new process
            if not self.ended:  # else a second tasks/result brought the outcome
                self._log.warning("legacy_task_lost", error=type(exc).__name__)
                self._finish("failed", error=LOST_ERROR)
        except asyncio.CancelledError:
            if self._detached:
                raise
            self._finish("cancelled")
            await self._release(discard=True)
            raise
        else:
            await self._settle_payload(payload)
        await self._release(discard=self.status == "cancelled")

    async def _settle_payload(self, payload: JsonObject) -> None:
        """A tool result (an `isError` one too, whatever the legacy status said) is `completed`;
        a payload without content from a task the server reports `failed` (the `mcp` 1.x SDK's
        failed task) is `failed`, with the server's status message."""
        if not isinstance(payload.get("content"), list):
            task = await self._ask(LEGACY_TASKS_GET)
            if task is not None and task.status == "failed":
                message = task.status_message or "Task failed"
                self._finish("failed", error={"code": INTERNAL_ERROR, "message": message})
                return
            if task is not None and task.status == "cancelled":
                self._finish("cancelled")
                return
        self._finish("completed", result=task_result_payload(payload))

    def _finish(
        self, status: Status, *, result: JsonObject | None = None, error: JsonObject | None = None
    ) -> None:
        if self.status in TERMINAL:
            return
        self.status, self.result, self.error = status, result, error
        self.updated_at = time.time()
        for push in self.pending.values():
            if push.push_id is not None:
                self._send(push.push_id, refusal(push.method))
        self.pending.clear()
        self._ended.set()
        self._changed.set()
        self._announce()
        self._log.info("legacy_task_ended", status=status)

    async def _release(self, *, discard: bool) -> None:
        if self._replay is not None and not self._detached:
            await self._replay.cancel("task ended")
        await self._lease.release(discard=discard)

    @property
    def session(self) -> UpstreamSession:
        return self._lease.session

    # ---- surviving a restart (restart.py) ------------------------------------------------------

    async def upstream_handle(self) -> UpstreamHandle | None:
        """What a new bridge process needs to adopt this task; None when it cannot."""
        return await upstream_handle(
            self._lease.session,
            self._result_call,
            legacy_id=self.legacy_id,
            capabilities=self._caps,
            created_at=self.created_at,
        )

    @property
    def survives_restart(self) -> bool:
        """Whether a new bridge process can adopt this task (its session has an id)."""
        return self._lease.session.session_id is not None

    async def detach(self) -> None:
        """The bridge stops and the task can be adopted: close the session here without a
        DELETE and without cancelling anything upstream (no `notifications/cancelled`, which
        would end the legacy `tasks/result` whose stream the next process replays)."""
        self._detached = True
        self._lease.session.forget_on_close()
        await self._lease.release(discard=True)

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    # ---- pushes and answers --------------------------------------------------------------------

    upstream_progress_token: str | None = None  # progress and logs: not on tasks (extension)

    def _on_inbound(self, inbound: Inbound) -> None:
        route_inbound(inbound, self, self._publish or _dropped)

    def current_attempt(self) -> Attempt | None:
        return None

    def on_push_cancelled(self, params: JsonObject) -> None:
        """The server withdrew a push it asked: the question goes from `inputRequests`."""
        push_id = params.get("requestId")
        withdrawn = [key for key, push in self.pending.items() if push.push_id == push_id]
        for key in withdrawn:
            del self.pending[key]
        if withdrawn:
            self._asked_all()

    def on_push(self, inbound: Inbound) -> None:
        message = inbound.message
        admission = admit_question(
            message,
            legacy_id=self.legacy_id,
            ended=self.status in TERMINAL,
            pending=self.pending,
            used_keys=self.used_keys,
            client_capabilities=self._caps,
            revision=self._lease.session.revision,
        )
        if isinstance(admission, Answer):
            if admission.reason is not None:
                self._log.info(
                    "push_refused", method=message.get("method"), reason=admission.reason
                )
            self._send(message["id"], admission.answer)
            return
        question = admission.pending
        self.used_keys.add(question.key)
        self.pending[question.key] = question
        self.status = "input_required"
        self.updated_at = time.time()
        self._changed.set()
        self._announce()

    def _asked_all(self) -> None:
        """Questions went (answered or withdrawn): with none left, the task works again."""
        if not self.pending and self.status == "input_required":
            self.status = "working"
            self.updated_at = time.time()
            self._announce()

    def _announce(self) -> None:
        if self._on_change is not None and self.task_id:
            self._on_change(self)

    def _send(self, push_id: int | str, answer: PushAnswer) -> None:
        self._owner.spawn(
            self._lease.session.respond(push_id, result=answer.result, error=answer.error),
            name="legacy-task-answer",
        )

    async def answer(self, responses: JsonObject) -> None:
        """Send each answer to its outstanding push; unknown and answered keys are ignored. All
        answers are checked before any is sent."""
        chosen: list[tuple[PendingPush, PushAnswer]] = []
        for key, value in responses.items():
            push = self.pending.get(key)
            if push is None or push.push_id is None:
                continue
            chosen.append((push, input_response_to_legacy(key, push, value)))
        for push, _ in chosen:
            del self.pending[push.key]  # answered once: a repeated update finds nothing
        if chosen:
            self._asked_all()
        for push, answer in chosen:
            assert push.push_id is not None
            await self._lease.session.respond(
                push.push_id, result=answer.result, error=answer.error
            )

    async def settle(self, timeout_s: float) -> bool:
        """Wait until the task has ended or asks something; False if `timeout_s` passed first."""
        try:
            async with asyncio.timeout(timeout_s):
                while not (self.ended or self.pending):
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            return False
        return True

    # ---- status and cancel ---------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read the legacy status (statusMessage, pollInterval) while the task runs; a slow or
        failed answer keeps what is known."""
        task = await self._ask(LEGACY_TASKS_GET)
        if task is None or self.ended:
            return
        if task.status_message != self.status_message:
            self.status_message = task.status_message
            self.updated_at = time.time()
            self._announce()
        if task.poll_interval_ms:
            self.poll_interval_ms = task.poll_interval_ms
        if task.status in TERMINAL:
            await self._reread_result()

    async def _reread_result(self) -> None:
        """The server says the task ended, yet its `tasks/result` has not answered: the `mcp` 1.x
        SDK can miss the task's last update while that request waits (its store makes a fresh event
        on each wait, and an update before it is lost) and then never answers. A second
        `tasks/result` for a terminal task answers at once; the first is then cancelled
        (docs/tasks.md, "Conformance")."""
        stuck = self._result_call
        call = self._lease.session.start(
            LEGACY_TASKS_RESULT, {"taskId": self.legacy_id}, headers=self._headers, on_inbound=None
        )
        try:
            async with asyncio.timeout(self._settings.status_timeout_s):
                payload = await call.result()
        except UpstreamReturnedError as exc:
            self.legacy_error = exc.error
            self._finish("failed", error=legacy_error_to_modern(exc.error))
        except (BridgeError, TimeoutError):
            await asyncio.shield(call.cancel("tasks/result timed out"))
            return  # the first tasks/result may still answer
        else:
            self._log.info("legacy_task_result_reread")
            await self._settle_payload(payload)
        if stuck is not None:
            await stuck.cancel("answered by a second tasks/result")

    async def cancel(self) -> None:
        """Legacy `tasks/cancel`; a task already terminal upstream (its -32602) is acknowledged
        all the same: `tasks/result` brings its outcome."""
        task = await self._ask(LEGACY_TASKS_CANCEL)
        if task is not None and task.status == "cancelled":
            self._finish("cancelled")
            if self._result_call is not None:
                await self._result_call.cancel("task cancelled")

    async def _ask(self, method: str) -> LegacyTask | None:
        """The legacy Task that `method` answers for this task; None if the task has ended here,
        or the server answered with an error, too late or not with a Task."""
        if self.ended:
            return None
        call = self._lease.session.start(
            method, {"taskId": self.legacy_id}, headers=self._headers, on_inbound=None
        )
        try:
            async with asyncio.timeout(self._settings.status_timeout_s):
                return legacy_task(await call.result())
        except UpstreamReturnedError:
            return None
        except (BridgeError, TimeoutError):
            await asyncio.shield(call.cancel(f"{method} timed out"))
            return None

    def view(self) -> TaskView:
        return TaskView(
            task_id=self.task_id,
            status=self.status,
            created_at=iso(self.created_at),
            updated_at=iso(self.updated_at),
            ttl_ms=self._settings.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            status_message=self.status_message,
            input_requests={k: p.input_request for k, p in self.pending.items()},
            result=self.result,
            error=self.error,
        )

    async def abandon(self) -> None:
        """The bridge stops or the task expired: cancel upstream and give the session up."""
        if not self.ended:
            await self.cancel()
        if self._result_call is not None:
            await self._result_call.cancel("task abandoned")
        await self._release(discard=not self.ended)


def _dropped(principal: str, message: JsonObject) -> None:
    """No listen streams to publish to (a task built without them: tests)."""


def iso(epoch_s: float) -> str:
    """`createdAt` / `lastUpdatedAt`: ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


__all__ = ["RunningTask", "TaskLease"]
