"""Long plain legacy calls as bridge-owned tasks (`tasks.long_calls_after_s`; docs/tasks.md
§ Long calls).

A `tools/call` from a client that declared the Tasks extension, to a tool that does not run as a
legacy task, starts as an ordinary first call (held call, MRTR). If that first round has not
answered after `long_calls_after_s`, the client gets a task instead, registered before the answer
goes out, so `tasks/get` resolves it at once. The round goes on: its final result completes the
task; an `InputRequiredResult` becomes the task's `inputRequests` (its `requestState` stays inside
the bridge); `tasks/update` sends the answers as the MRTR retry a client would send, through the
retry route, so every held-call rule applies unchanged; `tasks/cancel` cancels the round, or
aborts the parked held call (both tell the legacy server `notifications/cancelled`).

Such a task lives in this process only: it cannot be adopted after a restart or by another
replica (the legacy call's response stream belongs to this process).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from proxy.common.faults import reported_error
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.owned_tasks import TaskOwner
from proxy.engine.legacy_tasks.running import iso
from proxy.engine.routes.route_context import RouteContext
from translators.held.request_state import KeyRing, open_state
from translators.protocol.eras import RESULT_INPUT_REQUIRED
from translators.protocol.results import legacy_error_to_modern
from translators.tasks_ext.messages import TERMINAL, Status, TaskView, task_result_payload
from translators.wire.errors import (
    INTERNAL_ERROR,
    BridgeError,
    InvalidRequestState,
    UpstreamReturnedError,
    UpstreamTimeout,
)
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()

Route = Callable[[FrontRequest, NotificationSink], Awaitable[JsonObject]]
ASKED_NOTHING: JsonObject = {"code": INTERNAL_ERROR, "message": "The call asked nothing"}


class _Dropped:
    """The sink of a round that runs after its client got a task: nothing is streamed."""

    def send(self, notification: JsonObject) -> None:
        return None


DROPPED = _Dropped()


class BridgeTask:
    """One plain legacy call the bridge turned into a task: the same surface as `RunningTask`
    for the store and the routes."""

    survives_restart = False

    def __init__(
        self,
        *,
        record: bytes,
        request: FrontRequest,
        ctx: RouteContext,
        retry: Route,
        keyring: KeyRing,
        on_change: Callable[[BridgeTask], None] | None = None,
    ) -> None:
        self.task_id = ""  # sealed by the caller once registered
        self.record = record
        self.principal = request.principal
        self._request = request
        self._ctx = ctx
        self._retry = retry
        self._keyring = keyring
        self._owner = ctx.tasks
        self._on_change = on_change
        settings = ctx.settings.tasks
        self._ttl_ms = settings.ttl_ms
        self.poll_interval_ms = settings.poll_interval_ms
        now = time.time()
        self.created_at = self.updated_at = now
        self.expires_at = now + settings.ttl_ms / 1000
        self.status: Status = "working"
        self.result: JsonObject | None = None
        self.error: JsonObject | None = None
        self.pending: dict[str, JsonObject] = {}  # key -> inputRequest, this round's
        self._state: str | None = None  # the parked held call's requestState (never shown)
        self._round: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()
        self._rounds = 1

    # ---- rounds -------------------------------------------------------------------------------

    def follow(self, first_round: asyncio.Task[JsonObject]) -> None:
        """Take over the first round, still running."""
        self._round = self._owner.spawn(self._settle(first_round), name="bridge-task-round")

    async def _settle(self, round_: Awaitable[JsonObject]) -> None:
        try:
            reply = await round_
        except asyncio.CancelledError:
            self._finish("cancelled")
            raise
        except UpstreamReturnedError as exc:
            self._finish("failed", error=legacy_error_to_modern(exc.error))
        except BridgeError as exc:
            self._finish("failed", error=reported_error(exc))
        else:
            if reply.get("resultType") == RESULT_INPUT_REQUIRED:
                self._ask(reply)
            else:
                self._finish("completed", result=task_result_payload(reply))

    def _ask(self, reply: JsonObject) -> None:
        state, requests = reply.get("requestState"), reply.get("inputRequests")
        if not isinstance(state, str) or not isinstance(requests, dict) or not requests:
            # an InputRequiredResult the task cannot carry on from (no state to retry with)
            self._finish("failed", error=ASKED_NOTHING)
            return
        self._state, self.pending = state, dict(requests)
        self.status = "input_required"
        self._changed()

    def _finish(
        self, status: Status, *, result: JsonObject | None = None, error: JsonObject | None = None
    ) -> None:
        if self.status in TERMINAL:
            return
        self.status, self.result, self.error = status, result, error
        self.pending, self._state = {}, None
        self._ended.set()
        self._changed()
        log.info("bridge_task_ended", task=self.record.hex()[:12], status=status)

    def _changed(self) -> None:
        self.updated_at = time.time()
        if self._on_change is not None and self.task_id:
            self._on_change(self)

    async def answer(self, responses: JsonObject) -> None:
        """The answers to this round's keys go to the held call as its MRTR retry (keys never
        issued or already answered are ignored; nothing happens without one)."""
        chosen = {key: value for key, value in responses.items() if key in self.pending}
        state = self._state
        if not chosen or state is None or self.ended:
            return
        self.pending, self._state = {}, None
        self.status = "working"
        self._changed()
        self._rounds += 1
        params = {
            **self._request.params,
            "requestState": state,
            "inputResponses": chosen,
        }
        retry = dataclasses.replace(
            self._request,
            front_request_id=f"{self._request.front_request_id}/task-round-{self._rounds}",
            params=params,
        )
        self._round = self._owner.spawn(
            self._settle(self._retry(retry, DROPPED)), name="bridge-task-round"
        )

    async def cancel(self) -> None:
        """Cancel the running round, or abort the held call parked on a question."""
        if self.ended:
            return
        state = self._state
        self._finish("cancelled")
        if self._round is not None and not self._round.done():
            self._round.cancel()
            await asyncio.wait({self._round})
        if state is not None:
            await self._abort_parked(state)

    async def _abort_parked(self, state: str) -> None:
        try:
            claims = open_state(state, self._keyring)
        except InvalidRequestState:
            return
        driver = self._ctx.registry.get(claims.continuation_id)
        if driver is not None:
            await driver.abandon("task cancelled")

    async def abandon(self) -> None:
        """The bridge stops or the task expired."""
        await self.cancel()

    async def detach(self) -> None:
        raise NotImplementedError("a bridge-owned task cannot outlive its process")

    # ---- what routes read ----------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    async def refresh(self) -> None:
        """Nothing to read: the bridge itself knows the state."""

    def view(self) -> TaskView:
        return TaskView(
            task_id=self.task_id,
            status=self.status,
            created_at=iso(self.created_at),
            updated_at=iso(self.updated_at),
            ttl_ms=self._ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            input_requests=dict(self.pending),
            result=self.result,
            error=self.error,
        )


async def first_round_or_task(
    after_s: float,
    timeout_s: float,
    run_round: Coroutine[Any, Any, JsonObject],
    owner: TaskOwner,
    make_task: Callable[[asyncio.Task[JsonObject]], BridgeTask | None],
) -> JsonObject | BridgeTask:
    """The first round's own reply if it comes within `after_s`, else the task that follows it.
    None from `make_task` (the task caps): the round's reply within `timeout_s` of the start, as
    for any plain call, else `UpstreamTimeout`. A client that goes away cancels the round."""
    round_: asyncio.Task[JsonObject] = owner.spawn(run_round, name="long-call-first-round")
    try:
        done, _ = await asyncio.wait({round_}, timeout=after_s)
        if round_ in done:
            return round_.result()
        task = make_task(round_)
        if task is not None:
            return task
        done, _ = await asyncio.wait({round_}, timeout=max(0.0, timeout_s - after_s))
    except asyncio.CancelledError:
        round_.cancel()
        raise
    if round_ in done:
        return round_.result()
    round_.cancel()
    raise UpstreamTimeout(f"The upstream call did not finish within {timeout_s:g} s", public=True)


__all__ = ["DROPPED", "BridgeTask", "first_round_or_task"]
