"""`Call`: one MRTR-capable call (`tools/call`, `prompts/get`, `resources/read`) from its first
byte upstream to its result, across every input round (docs/architecture.md, "One call").

A call starts plain (docs/decisions.md § 25): the upstream request, one future that wakes the first
attempt, one deadline handle; progress and logs go straight to the attempt's sink. Almost no call
ever receives a push, so nothing else exists until one does. The first push (or a URL elicitation
error, -32042, ending the call) makes the call *held*: the same object then creates the held
parts it needs — the sans-I/O machine (`translators.held.machine.HeldCall`), its timers, the push
ledger, the ordered upstream sends (proxy/calls/sends.py) and its entry in the registry — and the
first attempt waits for the machine's reply instead. `feed()` runs `machine.handle()` and performs
the actions with no `await` in between, so every transition is atomic. Retries attach to the same
call (`retry`); nothing hands a live call to another object.

What a plain call does on the way out mirrors the machine's `RUNNING` state: a client that goes
away or a deadline that passes cancels the upstream call and discards an exclusive session (a
late push must never reach its next holder); a result or an error releases the lease.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from proxy.calls.attempt import ROUND_ATTRIBUTE, Attempt, Reply, UpstreamRequest
from proxy.calls.held_run import HeldRun
from proxy.calls.inbound import Publish, route_inbound
from proxy.calls.registry import HELD_ABANDON_S, HeldCallRegistry
from proxy.common.log_context import log_context
from proxy.common.shown import shown_id
from proxy.observe import tracing
from proxy.observe.access import call_name, current_trace
from proxy.upstream.base import Inbound, UpstreamCall, UpstreamSession
from proxy.upstream.pool import Lease
from translators.held.events import (
    ClientDisconnected,
    ClientRetried,
    Event,
    ReplyInputRequired,
    UpstreamErrorArrived,
    UpstreamResultArrived,
)
from translators.held.machine import HeldCall, Limits
from translators.held.push_ledger import batch_key
from translators.held.request_state import StateClaims, keys_digest
from translators.protocol.capabilities import elicitation_modes
from translators.protocol.url_elicitation import is_url_elicitation_required
from translators.wire.errors import (
    BridgeBug,
    BridgeError,
    InvalidRequestState,
    RejectionReason,
    UpstreamFault,
    UpstreamReturnedError,
    UpstreamTimeout,
)
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()
Spawn = Callable[[Coroutine[Any, Any, Any]], object]


class Call:
    """One MRTR-capable call; `first()` runs its first attempt, `retry()` each later one."""

    __slots__ = (
        "_begun",
        "_call",
        "_client_capabilities",
        "_counted",
        "_deadline",
        "_discard_session",
        "_first",
        "_first_slot",
        "_held",
        "_lease",
        "_limits",
        "_pre_answers",
        "_publish",
        "_registry",
        "_spawn",
        "_timed_out",
        "_upstream",
        "_wake",
        "answers",
        "asked_at",
        "continuation_id",
        "held_wait",
        "issued_keys",
        "method",
        "name",
        "principal",
        "started",
        "trace_context",
    )

    def __init__(
        self,
        *,
        registry: HeldCallRegistry[Call],
        principal: str,
        lease: Lease,
        upstream: UpstreamRequest,
        attempt: Attempt,
        client_capabilities: JsonObject,
        limits: Limits,
        pre_answers: JsonObject,
        publish: Publish,
        spawn: Spawn,
        discard_session: bool = False,
    ) -> None:
        self._registry = registry
        self.principal = principal
        self._lease = lease
        self._upstream = upstream
        self._first = attempt
        self._client_capabilities = client_capabilities
        self._limits = limits
        self._pre_answers = pre_answers
        self._publish = publish
        self._spawn = spawn
        self._discard_session = discard_session  # upstream.session_per_call
        self.method = upstream.method
        self.name = call_name(upstream.method, upstream.params)
        self.started = time.monotonic()  # the status page shows the call's age
        self._call: UpstreamCall | None = None
        self._wake: asyncio.Future[None] | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._timed_out = False
        self._counted = False
        self._begun = 0.0
        # the held parts, made by `_hold` when the first push arrives
        self._held: HeldRun | None = None
        self._first_slot: asyncio.Future[Reply] | None = None
        self.continuation_id = b""

    @property
    def machine(self) -> HeldCall:
        """The held call's machine (a registered call is always held)."""
        return self._held_run().machine

    @property
    def is_held(self) -> bool:
        return self._held is not None

    @property
    def session(self) -> UpstreamSession:
        return self._lease.session

    @property
    def upstream_progress_token(self) -> str:
        return self._upstream.progress_token

    # ---- the first attempt ---------------------------------------------------------------------

    async def first(self) -> JsonObject | Reply:
        """The legacy result of a call that ends plain, or the held call's first reply; raises the
        upstream's error, `UpstreamTimeout` past the deadline, or the cancellation."""
        loop = asyncio.get_running_loop()
        self._begun = loop.time()
        wake = self._wake = loop.create_future()
        call = self._start_upstream()
        call.watch(wake)
        self._registry.plain_calls += 1
        self._counted = True
        self._deadline = loop.call_at(self._begun + self._limits.attempt_timeout_s, self._time_out)
        try:
            await wake
        except asyncio.CancelledError:
            self._client_gone(wake)
            raise
        finally:
            self._deadline.cancel()
            self._uncount()
        if self._first_slot is not None:
            return await self._held_reply(self._first, self._first_slot)
        return await self._plain_outcome(call)

    async def _plain_outcome(self, call: UpstreamCall) -> JsonObject | Reply:
        if self._timed_out:
            self._abandon_plain("request timed out")
            raise UpstreamTimeout(
                f"The upstream call did not finish within {self._limits.attempt_timeout_s:g} s",
                public=True,
            )
        try:
            result = call.outcome()  # it woke the call: the outcome is in
        except UpstreamReturnedError as exc:
            if self.session.revision.elicitation_modes and is_url_elicitation_required(exc.error):
                slot = self._hold()  # the machine lifts it into an input round (or refuses it)
                return await self._held_reply(self._first, slot)
            await self._release_plain()
            raise
        except BridgeError:
            await self._release_plain()
            raise
        await self._release_plain()
        return result

    def hold(self) -> bool:
        """Make the call held now if it still runs plain (a task the bridge owns takes it over:
        docs/tasks.md, "Long plain calls as tasks"); False if it has ended."""
        if self._held is None and self._wake is not None and not self._wake.done():
            self._hold()
        return self._held is not None

    def _time_out(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._timed_out = True
            self._wake.set_result(None)

    def _uncount(self) -> None:
        """No longer a plain call in progress (it ended, or became a held call)."""
        if self._counted:
            self._counted = False
            self._registry.plain_calls -= 1

    def _client_gone(self, wake: asyncio.Future[None]) -> None:
        """The first attempt was cancelled (its client went away, or the shutdown cut it)."""
        if self._held is not None:  # held just before: the machine handles it
            self.disconnected(self._first)
        elif wake.done() and not wake.cancelled() and not self._timed_out:
            # the upstream call had just ended (a cancelled task cancels the future it awaits)
            discard = self._discard_session and self._lease.exclusive
            self._spawn(self._lease.release(discard=discard))
        else:  # the client went away, or the end of the shutdown grace cut the request off
            self._abandon_plain(self._registry.abort_reason or "client disconnected")

    async def _release_plain(self) -> None:
        """Give the session back; closing it (`upstream.session_per_call`, or a session that died)
        happens after the reply, as a held call's release does, not in the client's wait."""
        discard = self._discard_session and self._lease.exclusive
        if discard or not self._lease.session.is_alive:
            self._spawn(self._lease.release(discard=discard))
        else:
            await self._lease.release()

    def _abandon_plain(self, reason: str) -> None:
        """Cancel the upstream call and discard an exclusive session (retire one shared by
        attribution, decisions.md § 28), in the background: the front request's cancellation or
        timeout error goes on at once."""
        self._spawn(self._cancel_plain(reason))

    async def _cancel_plain(self, reason: str) -> None:
        try:
            if self._call is not None:
                log.info("upstream_call_cancelled", reason=reason)
                await self._call.cancel(reason)
        except BridgeError as exc:
            log.warning("upstream_send_failed", action="CancelUpstreamCall", error=exc.message)
        finally:
            await self._lease.release(discard=self._lease.interactive)

    # ---- becoming held -------------------------------------------------------------------------

    def _hold(self) -> asyncio.Future[Reply]:
        """Create the held parts around the running upstream call, the first attempt attached with
        what is left of its deadline; wakes the first attempt, which waits for the machine's reply
        from now on. Returns that reply's slot."""
        now = asyncio.get_running_loop().time()
        self.continuation_id = os.urandom(16)
        self.started = time.monotonic() - (now - self._begun)  # its age includes its plain run
        self.trace_context = b""  # the first round's span context, sealed (tracing.py)
        self.held_wait = tracing.HeldWait()  # a span from InputRequiredResult to retry
        self.issued_keys: list[str] = []
        # wall clock of the last InputRequiredResult, taken before its held deadline starts: the
        # sealed state expires no later than the held call (continuations.py)
        self.asked_at = 0.0
        self.answers: JsonObject = dict(
            self._pre_answers
        )  # every answer given; sealed for recovery
        key = batch_key(self._upstream.method, self._upstream.params)
        sizes = self._registry.batch_sizes
        machine = HeldCall(
            self._limits,
            attempt=None,
            pre_answers=dict(self._pre_answers),
            url_elicitation="url" in elicitation_modes(self._client_capabilities),
            lift_url_errors=self.session.revision.elicitation_modes,
            batch_sizes=sizes.sizes(key),
            batch_size=sizes.declared(key),
        )
        held = self._held = HeldRun(
            continuation_id=self.continuation_id,
            machine=machine,
            record=self,
            client_capabilities=self._client_capabilities,
            lease=self._lease,
            batch_sizes=sizes,
            batch_key=key,
            current=lambda: self._call,
            reissue=self._reissue,
            on_final=self._remove,
            discard_session=self._discard_session,
        )
        self._registry.add(self)
        self._uncount()  # counted as a held call from now on
        slot = self._first_slot = held.attach(self._first)
        left_s = self._begun + self._limits.attempt_timeout_s - now
        held.perform(machine.start(now, attempt=self._first.attempt_id, deadline_s=left_s))
        assert self._call is not None
        self._follow(self._call)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        return slot

    def _follow(self, call: UpstreamCall) -> None:
        """Feed the machine the upstream call's outcome when it comes (a future and a callback: no
        task waits for it)."""
        ended = asyncio.get_running_loop().create_future()
        ended.add_done_callback(functools.partial(self._call_ended, call))
        call.watch(ended)

    def _call_ended(self, call: UpstreamCall, _ended: asyncio.Future[None]) -> None:
        try:
            result = call.outcome()
        except UpstreamReturnedError as exc:
            self.feed(UpstreamErrorArrived(error=exc.error))
        except UpstreamFault as fault:
            self.feed(UpstreamErrorArrived(fault=fault))
        else:
            self.feed(UpstreamResultArrived(result))

    # ---- later attempts ------------------------------------------------------------------------

    def accept_retry(self, claims: StateClaims, principal: str, responses: object) -> None:
        """Check a retry's opened state against this call (its round, caller and the keys asked)
        and keep this round's answers, sealed into the next round's state; raises
        `InvalidRequestState`. The machine checks the round again when fed, atomically."""
        refusal = self.machine.retry_refusal(claims.round)
        if refusal is not None and refusal is not RejectionReason.NOT_WAITING:
            raise InvalidRequestState(refusal)
        if self.principal != principal or claims.keys_digest != keys_digest(self.issued_keys):
            raise InvalidRequestState(RejectionReason.OTHER_REQUEST)
        if isinstance(responses, dict):
            self.answers.update(
                {key: responses[key] for key in self.issued_keys if key in responses}
            )

    async def retry(self, attempt: Attempt, round_: int, input_responses: JsonObject) -> Reply:
        held = self._held_run()
        slot = held.attach(attempt)
        self.held_wait.end("retried")
        with tracing.child(current_trace(), "upstream answers", {ROUND_ATTRIBUTE: round_}):
            held.feed(ClientRetried(attempt.attempt_id, round_, input_responses))
            return await self._held_reply(attempt, slot)

    def answer_detached(
        self, attempt: Attempt, round_: int, input_responses: JsonObject
    ) -> Awaitable[Reply]:
        """`retry` for a caller with no front request waiting (a task the bridge owns): the
        answers are fed now, before this returns, so a second caller sees the machine moved on;
        the reply arrives when awaited."""
        held = self._held_run()
        slot = held.attach(attempt)
        self.held_wait.end("retried")
        held.feed(ClientRetried(attempt.attempt_id, round_, input_responses))
        return self._held_reply(attempt, slot)

    def relimit(self, limits: Limits) -> None:
        """From now on the call lives under `limits` (its current deadline restarted)."""
        held = self._held_run()
        held.perform(held.machine.relimit(limits))

    async def _held_reply(self, attempt: Attempt, slot: asyncio.Future[Reply]) -> Reply:
        """The machine's reply to `attempt`; a call that asks its client for input is admitted as
        held within the caps (over them, or while the bridge shuts down, it is abandoned upstream
        and the caller gets the reason)."""
        held = self._held_run()
        with log_context(continuation_id=shown_id(self.continuation_id)):
            try:
                reply = await slot
            except asyncio.CancelledError:
                self.disconnected(attempt)
                raise
            finally:
                held.detach(attempt)
            if isinstance(reply, ReplyInputRequired):
                try:
                    self._registry.admit_held(self)
                except BridgeError as exc:
                    held.log.info("held_call_refused", reason=exc.message)
                    held.perform(held.machine.abort("held call refused", held.now()))
                    self._remove()
                    raise
                self._registry.note_round()
            return reply

    def disconnected(self, attempt: Attempt) -> None:
        """`attempt`'s request was cancelled (its client went away, or the shutdown cut it)."""
        held = self._held_run()
        held.feed(ClientDisconnected(attempt.attempt_id))
        held.detach(attempt)

    def feed(self, event: Event) -> None:
        self._held_run().feed(event)

    def _held_run(self) -> HeldRun:
        if self._held is None:
            raise BridgeBug("a plain call has no held-call parts")
        return self._held

    def _remove(self) -> None:
        self.held_wait.end("ended")
        self._registry.remove(self)

    # ---- upstream side -------------------------------------------------------------------------

    def _start_upstream(self) -> UpstreamCall:
        up = self._upstream
        call = self._call = self._lease.session.start(
            up.method,
            up.params,
            headers=tracing.upstream_headers(up.headers),
            on_inbound=self.on_inbound,
        )
        # the session's GET-stream pushes are this call's (docs/decisions.md § 7)
        if self._lease.exclusive:
            self._lease.set_unrelated_handler(self.on_inbound)
        return call

    def _reissue(self) -> None:
        """Send the call again (a URL elicitation answered: `ReissueUpstreamCall`)."""
        self._follow(self._start_upstream())

    def on_inbound(self, inbound: Inbound) -> None:
        """A message from the call's own stream or its exclusive session's GET stream."""
        route_inbound(inbound, self, self._publish)

    def on_push(self, inbound: Inbound) -> None:
        related = inbound.related_request_id is not None
        if related:
            self._lease.pushed_related = True  # evidence the server attributes this tool's pushes
        if self._held is None:
            if self._wake is None or self._wake.done():
                if not related:
                    self._lease.disown(inbound)  # the session's, once the call is over
                return  # on the call's own stream after its end: ignored, as by a held call DONE
            self._hold()
        elif not related and self._call is not None and self._call.is_done:
            self._lease.disown(inbound)  # the session's, once the upstream call has ended
            return
        self._held_run().on_push(inbound.message, self._lease.key.roots_answer)

    def on_push_cancelled(self, params: JsonObject) -> None:
        if self._held is not None:  # else no push is pending: there is nothing to withdraw
            self._held.on_push_cancelled(params)

    def current_attempt(self) -> Attempt | None:
        return self._first if self._held is None else self._held.current_attempt()

    # ---- the end of a held call ----------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Answer any attached attempt with the shutting-down error, refuse held pushes and
        cancel the upstream call (queued; `abandon` waits for them)."""
        self._held_run().abort(reason)

    async def abandon(self, reason: str, wait_s: float = HELD_ABANDON_S) -> None:
        """Shutdown: `abort`, then wait (at most `wait_s`) until the upstream has been told."""
        await self._held_run().abandon(reason, wait_s)


__all__ = ["Call", "Spawn"]
