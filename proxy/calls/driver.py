"""The driver that performs a `HeldCall` machine's actions (docs/decisions.md § 4); the registry
of live calls is proxy/calls/registry.py, what a front request brings is proxy/calls/attempt.py.

The driver is the only owner of asyncio objects for one MRTR-capable call. `feed()` runs
`machine.handle()` and performs the actions with no `await` in between, so every transition is
atomic; upstream sends go through one ordered queue per call (answers before cancel before release),
drained by a task that exists only while there is something to send: a held call waiting for its
client owns no task and no queue object (each costs about as much memory as the rest of its state).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable

from proxy.calls.attempt import ROUND_ATTRIBUTE, Attempt, Reply, UpstreamRequest
from proxy.calls.machine_timers import MachineTimers
from proxy.calls.registry import HELD_ABANDON_S, HeldCallRegistry
from proxy.calls.upstream_sends import UpstreamSends
from proxy.common.owned_tasks import TaskOwner
from proxy.observe import tracing
from proxy.observe.access import call_name, current_trace
from proxy.observe.logs import KeyedLog
from proxy.upstream.base import Inbound, UpstreamCall, UpstreamSession
from proxy.upstream.pool import Lease
from translators.held.events import (
    Action,
    AnswerPush,
    CancelTimer,
    ClientDisconnected,
    ClientRetried,
    Event,
    NoteBatchSize,
    ReplyError,
    ReplyInputRequired,
    ReplyResult,
    ReportBug,
    StartTimer,
    UpstreamErrorArrived,
    UpstreamPushArrived,
    UpstreamPushCancelled,
    UpstreamResultArrived,
)
from translators.held.machine import HeldCall, Limits
from translators.held.push_batches import batch_key
from translators.held.push_ledger import Answer, Overflow, PushLedger
from translators.protocol.capabilities import elicitation_modes
from translators.protocol.eras import CANCELLED
from translators.protocol.notifications import route_notification
from translators.protocol.pushes import (
    is_push,
    over_limit,
)
from translators.protocol.subscriptions import SESSION_WIDE
from translators.wire.canonical import as_object
from translators.wire.errors import BridgeError, UpstreamFault, UpstreamReturnedError
from translators.wire.jsonrpc import JsonObject


class CallDriver(UpstreamSends):
    """Runs one MRTR-capable upstream call across its rounds."""

    def __init__(
        self,
        *,
        registry: HeldCallRegistry[CallDriver],
        principal: str,
        lease: Lease,
        upstream: UpstreamRequest,
        client_capabilities: JsonObject,
        limits: Limits,
        pre_answers: JsonObject,
        publish: Callable[[str, JsonObject], None],
        discard_session: bool = False,
        started: float | None = None,
    ) -> None:
        self.continuation_id = os.urandom(16)
        # the first round's span context, sealed (proxy/observe/tracing.py)
        self.trace_context = b""
        self.held_wait = tracing.HeldWait()  # a span from InputRequiredResult to retry
        self.principal = principal
        # the status page shows its age (`started`: when the call began, if it ran plain before)
        self.started = time.monotonic() if started is None else started
        self.method = upstream.method
        self.name = call_name(upstream.method, upstream.params)
        self._batch_key = batch_key(upstream.method, upstream.params)
        self.machine = HeldCall(
            limits,
            attempt=None,
            pre_answers=dict(pre_answers),
            url_elicitation="url" in elicitation_modes(client_capabilities),
            lift_url_errors=lease.session.revision.elicitation_modes,
            batch_sizes=registry.batch_sizes.sizes(self._batch_key),
            batch_size=registry.batch_sizes.declared(self._batch_key),
        )
        self.issued_keys: list[str] = []
        # wall clock of the last InputRequiredResult, taken before its held deadline starts: the
        # sealed state expires no later than the held call (continuations.py)
        self.asked_at = 0.0
        # every answer the client gave; sealed for a recovery
        self.answers: JsonObject = dict(pre_answers)
        self._registry = registry
        self._lease = lease
        self._upstream = upstream
        self._client_capabilities = client_capabilities
        self._publish = publish
        self._discard_session = discard_session  # upstream.session_per_call
        self._attempts: dict[int, Attempt] = {}
        self._slots: dict[int, asyncio.Future[Reply]] = {}
        self._timers = MachineTimers(self.feed)
        self._sends: list[Action] = []
        self._sender: asyncio.Task[None] | None = None
        self._sent_final = False
        self._call: UpstreamCall | None = None
        self._tasks = TaskOwner()
        self._log = KeyedLog("continuation_id", self.continuation_id.hex()[:12])
        self._pushes = PushLedger(limits.max_pushes_per_call)

    @property
    def session(self) -> UpstreamSession:
        return self._lease.session

    # ---- front side ----------------------------------------------------------------------------

    def adopt(
        self, call: UpstreamCall, attempt: Attempt, deadline_s: float
    ) -> asyncio.Future[Reply]:
        """Take over `call`, which the plain path started (proxy/calls/plain_forward.py) and
        which just received its first push (or ended with a URL elicitation): `attempt`
        attached, the deadline `deadline_s` from now, the outcome awaited here from now on.
        Returns the attempt's slot, for `attached`. The caller feeds the push that caused it."""
        slot = self._attach(attempt)
        now = self._now()
        self._perform(self.machine.start(now, attempt=attempt.attempt_id, deadline_s=deadline_s))
        self._follow(call)
        return slot

    async def attached(self, attempt: Attempt, slot: asyncio.Future[Reply]) -> Reply:
        """The reply to the first attempt, once adopted (`adopt`)."""
        return self._admit(await self._wait(attempt, slot))

    async def retry(self, attempt: Attempt, round_: int, input_responses: JsonObject) -> Reply:
        slot = self._attach(attempt)
        self.held_wait.end("retried")
        with tracing.child(current_trace(), "upstream answers", {ROUND_ATTRIBUTE: round_}):
            self.feed(ClientRetried(attempt.attempt_id, round_, input_responses))
            reply = await self._wait(attempt, slot)
        return self._admit(reply)

    def answer_detached(
        self, attempt: Attempt, round_: int, input_responses: JsonObject
    ) -> Awaitable[Reply]:
        """`retry` for a caller with no front request waiting (a task the bridge owns): the
        answers are fed now, before this returns, so a second caller sees the machine moved on;
        the reply arrives when awaited."""
        slot = self._attach(attempt)
        self.held_wait.end("retried")
        self.feed(ClientRetried(attempt.attempt_id, round_, input_responses))
        return self.attached(attempt, slot)

    def relimit(self, limits: Limits) -> None:
        """From now on the call lives under `limits` (its current deadline restarted)."""
        self._perform(self.machine.relimit(limits))

    def _remove(self) -> None:
        self.held_wait.end("ended")
        self._registry.remove(self)

    def _admit(self, reply: Reply) -> Reply:
        """A call that asks its client for input becomes a held call, within the caps; over them (or
        while the bridge shuts down) it is abandoned upstream and the caller gets the reason."""
        if isinstance(reply, ReplyInputRequired):
            try:
                self._registry.admit_held(self)
            except BridgeError as exc:
                self._log.info("held_call_refused", reason=exc.message)
                self._perform(self.machine.abort("held call refused", self._now()))
                self._remove()
                raise
            self._registry.note_round()
        return reply

    def _attach(self, attempt: Attempt) -> asyncio.Future[Reply]:
        slot: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._attempts[attempt.attempt_id] = attempt
        self._slots[attempt.attempt_id] = slot
        return slot

    async def _wait(self, attempt: Attempt, slot: asyncio.Future[Reply]) -> Reply:
        try:
            return await slot
        except asyncio.CancelledError:
            self.disconnected(attempt)
            raise
        finally:
            self._detach(attempt)

    def disconnected(self, attempt: Attempt) -> None:
        """`attempt`'s request was cancelled (its client went away, or the shutdown cut it)."""
        self.feed(ClientDisconnected(attempt.attempt_id))
        self._detach(attempt)

    def _detach(self, attempt: Attempt) -> None:
        self._attempts.pop(attempt.attempt_id, None)
        self._slots.pop(attempt.attempt_id, None)

    # ---- upstream side -------------------------------------------------------------------------

    def _start_upstream(self) -> None:
        """Send the call again (a URL elicitation answered: `ReissueUpstreamCall`)."""
        up = self._upstream
        call = self._lease.session.start(
            up.method,
            up.params,
            headers=tracing.upstream_headers(up.headers),
            on_inbound=self.on_inbound,
        )
        self._follow(call)

    def _follow(self, call: UpstreamCall) -> None:
        self._call = call
        # the session's GET-stream pushes are this call's (docs/decisions.md § 7)
        if self._lease.exclusive:
            self._lease.set_unrelated_handler(self.on_inbound)
        ended = asyncio.get_running_loop().create_future()
        ended.add_done_callback(functools.partial(self._call_ended, call))
        call.watch(ended)  # a future and a callback: no task waits for the outcome

    def _call_ended(self, call: UpstreamCall, _ended: asyncio.Future[None]) -> None:
        try:
            result = call.outcome()
        except UpstreamReturnedError as exc:
            self.feed(UpstreamErrorArrived(error=exc.error))
        except UpstreamFault as fault:
            self.feed(UpstreamErrorArrived(fault=fault))
        else:
            self.feed(UpstreamResultArrived(result))

    def on_inbound(self, inbound: Inbound) -> None:
        """A push or notification from this call's session (POST stream or GET stream)."""
        message = inbound.message
        if is_push(message):
            if inbound.related_request_id is None and self._call is not None and self._call.is_done:
                self._lease.disown(inbound)  # the session's, once the upstream call has ended
            else:
                self._on_push(message)
            return
        if message.get("method") in SESSION_WIDE:
            self._publish(self.principal, message)
            return
        if message.get("method") == CANCELLED:
            params = as_object(message.get("params"))
            self._pushes.closed(params.get("requestId"))
            self.feed(UpstreamPushCancelled(params.get("requestId", "")))
            return
        attached = (
            self._attempts.get(self.machine.attempt) if self.machine.attempt is not None else None
        )
        if attached is not None:
            routed = route_notification(
                message, self._upstream.progress_token, attached.progress_token, attached.log_level
            )
            if routed is not None:
                attached.sink.send(routed)

    def _on_push(self, push: JsonObject) -> None:
        push_id = push["id"]
        admission = self._pushes.admit(
            push,
            self._client_capabilities,
            self._lease.session.revision,
            self._lease.key.roots_answer,
            self.machine.pending,
        )
        if isinstance(admission, Overflow):
            if admission.fault is not None:
                self._log.warning("push_refused", reason=admission.fault.limit)
                answer = AnswerPush(push_id, over_limit(admission.fault))
                self._perform(self.machine.overflow(admission.fault, self._now(), answer))
        elif isinstance(admission, Answer):
            if admission.reason is not None:
                self._log.info("push_refused", method=push.get("method"), reason=admission.reason)
            self._enqueue(AnswerPush(push_id, admission.answer))
        else:
            self._pushes.held(push_id)
            self.feed(UpstreamPushArrived(admission.pending))
            self._pushes.after_held(self.machine.pending)

    # ---- the machine ---------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        before = self.machine.state
        self._perform(self.machine.handle(event, self._now()))
        if self.machine.state is not before:
            self._log.debug(
                "held_call_moved",
                held_event=type(event).__name__,
                state=self.machine.state.value,
                round=self.machine.round,
            )

    def _perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, ReplyInputRequired | ReplyResult | ReplyError):
                self._reply(action)
            elif isinstance(action, StartTimer):
                self._timers.start(action)
            elif isinstance(action, CancelTimer):
                self._timers.cancel(action.name)
            elif isinstance(action, NoteBatchSize):
                self._registry.batch_sizes.note(self._batch_key, action.round, action.size)
            elif isinstance(action, ReportBug):
                self._log.error("held_call_bug", detail=action.detail)
            else:
                if isinstance(action, AnswerPush):
                    self._pushes.closed(action.push_id)
                self._enqueue(action)

    def _reply(self, action: Reply) -> None:
        if isinstance(action, ReplyInputRequired):
            self.issued_keys = list(action.input_requests)
            self.asked_at = time.time()
        slot = self._slots.get(action.attempt)
        if slot is not None and not slot.done():
            slot.set_result(action)

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def abort(self, reason: str) -> None:
        """Answer any attached attempt with the shutting-down error, refuse held pushes and
        cancel the upstream call (queued; `abandon` waits for them)."""
        self._perform(self.machine.abort(reason, self._now()))

    async def abandon(self, reason: str, wait_s: float = HELD_ABANDON_S) -> None:
        """Shutdown: `abort`, then wait (at most `wait_s`) until the upstream has been told."""
        self.abort(reason)
        if self._sender is not None:
            try:
                async with asyncio.timeout(wait_s):
                    await asyncio.shield(self._sender)
            except TimeoutError:
                self._log.warning("held_call_abandon_timed_out")
        await self._tasks.aclose()
