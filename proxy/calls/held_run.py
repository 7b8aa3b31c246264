"""The held parts of a call: what `Call` (proxy/calls/call.py) creates when its first push arrives.

`HeldRun` performs a `HeldCall` machine's actions (docs/decisions.md § 4): `feed()` runs
`machine.handle()` and performs the actions with no `await` in between, so every transition is
atomic; the machine's two timers ("batch", "deadline") are loop timers whose expiry comes back as
events; each front attempt waits on a slot only a `Reply*` action fills; pushes pass the push ledger
(translators/held/push_ledger.py) before the machine sees them. Upstream sends go through one
ordered queue (`SendQueue`: answers before cancel before release), drained by a task that exists
only while there is something to send: a held call waiting for its client owns no task.

Only its `Call` talks to a `HeldRun`; everything it needs is given at construction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from proxy.calls.attempt import Attempt, Reply
from proxy.calls.registry import HELD_ABANDON_S
from proxy.common.shown import shown_id
from proxy.observe.logs import KeyedLog
from proxy.upstream.base import UpstreamCall
from proxy.upstream.pool import Lease
from translators.held.events import (
    Action,
    AnswerPush,
    BatchWindowClosed,
    CancelTimer,
    CancelUpstreamCall,
    DeadlinePassed,
    Event,
    NoteBatchSize,
    ReissueUpstreamCall,
    ReleaseUpstream,
    ReplyError,
    ReplyInputRequired,
    ReplyResult,
    ReportBug,
    StartTimer,
    UpstreamErrorArrived,
    UpstreamPushArrived,
    UpstreamPushCancelled,
)
from translators.held.machine import HeldCall
from translators.held.push_ledger import Answer, BatchSizes, Overflow, PushLedger
from translators.protocol.pushes import over_limit
from translators.wire.errors import BridgeError, UpstreamFault
from translators.wire.jsonrpc import JsonObject


class AskedRecord(Protocol):
    """What a held run records on its call (`Call`) each time it asks the client."""

    issued_keys: list[str]
    asked_at: float  # wall clock, for the sealed state's expiry


class HeldRun:
    """The machine of one held call, its timers, push ledger, attempts and upstream sends."""

    __slots__ = (
        "_batch_key",
        "_batch_sizes",
        "_capabilities",
        "_lease",
        "_pushes",
        "_record",
        "_sends",
        "_slots",
        "_timers",
        "attempts",
        "log",
        "machine",
    )

    def __init__(
        self,
        *,
        continuation_id: bytes,
        machine: HeldCall,
        record: AskedRecord,
        client_capabilities: JsonObject,
        lease: Lease,
        batch_sizes: BatchSizes,
        batch_key: tuple[str, str],
        current: Callable[[], UpstreamCall | None],
        reissue: Callable[[], None],
        on_final: Callable[[], None],
        discard_session: bool,
    ) -> None:
        """`current`: the upstream call now; `reissue` starts it again; `on_final` runs once the
        call's last release went upstream."""
        self.machine = machine
        self._record = record
        self._capabilities = client_capabilities
        self._lease = lease
        self._batch_sizes = batch_sizes
        self._batch_key = batch_key
        self.attempts: dict[int, Attempt] = {}
        self._slots: dict[int, asyncio.Future[Reply]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.log = KeyedLog("continuation_id", shown_id(continuation_id))
        self._pushes = PushLedger(machine.limits.max_pushes_per_call)
        self._sends = SendQueue(
            lease=lease,
            current=current,
            log=self.log,
            discard_session=discard_session,
            reissue=reissue,
            on_lost=lambda fault: self.feed(UpstreamErrorArrived(fault=fault)),
            on_final=on_final,
        )

    # ---- attempts ------------------------------------------------------------------------------

    def attach(self, attempt: Attempt) -> asyncio.Future[Reply]:
        slot: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.attempts[attempt.attempt_id] = attempt
        self._slots[attempt.attempt_id] = slot
        return slot

    def detach(self, attempt: Attempt) -> None:
        self.attempts.pop(attempt.attempt_id, None)
        self._slots.pop(attempt.attempt_id, None)

    def current_attempt(self) -> Attempt | None:
        attempt = self.machine.attempt
        return self.attempts.get(attempt) if attempt is not None else None

    # ---- pushes --------------------------------------------------------------------------------

    def on_push(self, push: JsonObject, roots_answer: JsonObject | None) -> None:
        push_id = push["id"]
        admission = self._pushes.admit(
            push,
            self._capabilities,
            self._lease.session.revision,
            roots_answer,
            self.machine.pending,
        )
        if isinstance(admission, Overflow):
            if admission.fault is not None:
                self.log.warning("push_refused", reason=admission.fault.limit)
                answer = AnswerPush(push_id, over_limit(admission.fault))
                self.perform(self.machine.overflow(admission.fault, self.now(), answer))
        elif isinstance(admission, Answer):
            if admission.reason is not None:
                self.log.info("push_refused", method=push.get("method"), reason=admission.reason)
            self._sends.put(AnswerPush(push_id, admission.answer))
        else:
            self._pushes.held(push_id)
            self.feed(UpstreamPushArrived(admission.pending))
            self._pushes.after_held(self.machine.pending)

    def on_push_cancelled(self, params: JsonObject) -> None:
        self._pushes.closed(params.get("requestId"))
        self.feed(UpstreamPushCancelled(params.get("requestId", "")))

    # ---- the machine ---------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        machine = self.machine
        before = machine.state
        self.perform(machine.handle(event, self.now()))
        if machine.state is not before:
            self.log.debug(
                "held_call_moved",
                held_event=type(event).__name__,
                state=machine.state.value,
                round=machine.round,
            )

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, ReplyInputRequired | ReplyResult | ReplyError):
                self._reply(action)
            elif isinstance(action, StartTimer):
                self._start_timer(action)
            elif isinstance(action, CancelTimer):
                handle = self._timers.pop(action.name, None)
                if handle is not None:
                    handle.cancel()
            elif isinstance(action, NoteBatchSize):
                self._batch_sizes.note(self._batch_key, action.round, action.size)
            elif isinstance(action, ReportBug):
                self.log.error("held_call_bug", detail=action.detail)
            else:
                if isinstance(action, AnswerPush):
                    self._pushes.closed(action.push_id)
                self._sends.put(action)

    def _start_timer(self, action: StartTimer) -> None:
        """The machine's "batch" or "deadline" timer, replacing the running one of that name; its
        expiry comes back as an event carrying the action's token (a stale one is ignored)."""
        running = self._timers.pop(action.name, None)
        if running is not None:
            running.cancel()
        event: Event = (
            BatchWindowClosed(action.token)
            if action.name == "batch"
            else DeadlinePassed(action.token)
        )
        loop = asyncio.get_running_loop()
        self._timers[action.name] = loop.call_later(action.delay_s, self.feed, event)

    def _reply(self, action: Reply) -> None:
        if isinstance(action, ReplyInputRequired):
            self._record.issued_keys = list(action.input_requests)
            self._record.asked_at = time.time()
        slot = self._slots.get(action.attempt)
        if slot is not None and not slot.done():
            slot.set_result(action)

    @staticmethod
    def now() -> float:
        return asyncio.get_running_loop().time()

    # ---- the end -------------------------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Answer any attached attempt with the shutting-down error, refuse held pushes and
        cancel the upstream call (queued; `abandon` waits for them)."""
        self.perform(self.machine.abort(reason, self.now()))

    async def abandon(self, reason: str, wait_s: float = HELD_ABANDON_S) -> None:
        """`abort`, then wait (at most `wait_s`) until the upstream has been told."""
        self.abort(reason)
        sender = self._sends.sender
        if sender is None:
            return
        try:
            async with asyncio.timeout(wait_s):
                await asyncio.shield(sender)
        except TimeoutError:
            self.log.warning("held_call_abandon_timed_out")
            sender.cancel()
            await asyncio.wait([sender])


class SendQueue:
    """The ordered upstream sends of one held call (docs/decisions.md § 32), by at most one task
    (`sender`), which the queue owns: a failure it did not expect is logged, and `abandon` waits for
    it or cancels it."""

    __slots__ = (
        "_current",
        "_discard_session",
        "_lease",
        "_log",
        "_on_final",
        "_on_lost",
        "_reissue",
        "_sends",
        "sender",
        "sent_final",
    )

    def __init__(
        self,
        *,
        lease: Lease,
        current: Callable[[], UpstreamCall | None],
        log: KeyedLog,
        discard_session: bool,
        reissue: Callable[[], None],
        on_lost: Callable[[UpstreamFault], None],
        on_final: Callable[[], None],
    ) -> None:
        """`current`: the upstream call now; `reissue` starts it again; `on_lost` hears why the
        call cannot go on (an answer could not be sent); `on_final` runs after the last release."""
        self._lease = lease
        self._current = current
        self._log = log
        self._discard_session = discard_session  # upstream.session_per_call
        self._reissue = reissue
        self._on_lost = on_lost
        self._on_final = on_final
        self._sends: list[Action] = []
        self.sender: asyncio.Task[None] | None = None
        self.sent_final = False  # the final release went upstream: nothing is sent after it

    def put(self, action: Action) -> None:
        """Queue an upstream send; start the sender unless it runs (it takes this one too)."""
        if self.sent_final:
            return  # the call is over upstream: its lease is back in the pool
        self._sends.append(action)
        if self.sender is None:
            loop = asyncio.get_running_loop()
            sender = loop.create_task(self._send_queued(), name="held-call-sends")
            sender.add_done_callback(self._sender_done)
            self.sender = sender

    def _sender_done(self, sender: asyncio.Task[None]) -> None:
        if not sender.cancelled() and sender.exception() is not None:
            self._log.error("held_call_sends_failed", exc_info=sender.exception())

    async def _send_queued(self) -> None:
        """Send the queued actions in order, those queued meanwhile included, then end."""
        try:
            while self._sends and not self.sent_final:
                await self._send_one(self._sends.pop(0))
        finally:
            self.sender = None

    async def _send_one(self, action: Action) -> None:
        try:
            self.sent_final = await self._send(action)
        except BridgeError as exc:
            self._log.warning(
                "upstream_send_failed", action=type(action).__name__, error=exc.message
            )
            if isinstance(action, AnswerPush):  # the call cannot go on: say why it ended
                fault = (
                    exc
                    if isinstance(exc, UpstreamFault)
                    else UpstreamFault(
                        f"Lost the upstream call while answering its request: {exc.message}"
                    )
                )
                self._on_lost(fault)

    async def _send(self, action: Action) -> bool:
        """Perform one upstream action; True when the call is over."""
        call = self._current()
        if isinstance(action, AnswerPush):
            await self._lease.session.respond(
                action.push_id, result=action.answer.result, error=action.answer.error
            )
        elif isinstance(action, CancelUpstreamCall) and call is not None:
            self._log.info("upstream_call_cancelled", reason=action.reason)
            await call.cancel(action.reason)
        elif isinstance(action, ReissueUpstreamCall):
            self._reissue()
        elif isinstance(action, ReleaseUpstream):
            await self._release(discard=action.discard)
            if action.final:
                self._on_final()
            return action.final
        return False

    async def _release(self, *, discard: bool) -> None:
        """Return the lease; a session is discarded after a cancel only if an interactive call
        held it (a late push from the cancelled call must not reach its next holder)."""
        if self._lease.exclusive:
            self._lease.set_unrelated_handler(None)
        await self._lease.release(
            discard=(discard or self._discard_session) and self._lease.interactive
        )


__all__ = ["AskedRecord", "HeldRun", "SendQueue"]
