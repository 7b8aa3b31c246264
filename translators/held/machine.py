"""The held call: a sans-I/O state machine for one MRTR-capable upstream call (docs/decisions.md,
"The held call is a sans-I/O machine"): its transitions, one handler per (state, event type),
each returning the `Step` it decided, the table naming the states each may lead to, and
`HeldCall`, which drives the table.

`HeldCall.handle(event, now) -> list[Action]` is the whole interface. Time comes in as a
parameter; timers go out as `StartTimer` actions and come back as `BatchWindowClosed` /
`DeadlinePassed` events. Every (state, event type) pair is in `TRANSITIONS`, which names the states
the transition may lead to; a handler computes its actions and returns its target (`Step`), and
`handle()` alone moves the state, once it has checked the table names the target. A missing pair,
or a target the table does not name, is a `BridgeBug`: it yields `ReportBug` and leaves the state
unchanged.

Attempts: each front request (the first call and every retry) is an *attempt* with an integer id
chosen by the call (proxy/calls/call.py). `Reply*` actions name the attempt they answer.

Batching (docs/decisions.md, "Push batching by learned size"): a push joins the open batch, which
closes as soon as it holds as many pushes as the tool sent for this round last time
(`batch_sizes`), else when the `held.batch_quiet_ms` timer fires (capped by `held.batch_max_ms`).
Each closed batch is noted (`NoteBatchSize`), and so is a push arriving after its round was asked:
the batch was larger than learned, and the late push is asked in the next round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from translators.held.events import (
    Action,
    AnswerPush,
    BatchWindowClosed,
    CancelTimer,
    ClientDisconnected,
    ClientRetried,
    DeadlinePassed,
    Event,
    NoteBatchSize,
    ReissueUpstreamCall,
    ReleaseUpstream,
    ReplyError,
    ReplyResult,
    ReportBug,
    UpstreamErrorArrived,
    UpstreamPushArrived,
    UpstreamPushCancelled,
    UpstreamResultArrived,
)
from translators.held.record import CallRecord, HeldCallState, Limits, Step
from translators.protocol.pushes import (
    PendingPush,
    PushAnswer,
    input_response_to_legacy,
    over_limit,
)
from translators.protocol.url_elicitation import (
    any_declined,
    is_url_elicitation_required,
    lift_url_elicitations,
    url_declined,
)
from translators.wire.errors import (
    ClientFault,
    InvalidRequestState,
    MissingClientCapability,
    ShuttingDown,
    UpstreamLimitExceeded,
    UpstreamTimeout,
)

_S = HeldCallState


def _push_while_attached(call: CallRecord, event: UpstreamPushArrived, now: float) -> Step:
    push = event.push
    if push.key in call.pre_answers and push.push_id is not None:
        try:
            answer = input_response_to_legacy(push.key, push, call.pre_answers.pop(push.key))
        except ClientFault:
            answer = None  # an unusable pre-answer: ask the client normally
        if answer is not None:
            return call.stay([AnswerPush(push.push_id, answer)])
    if len(call.pending) >= call.limits.max_pushes_per_round:
        return _too_many_in_round(call, push)
    call.pending[push.key] = push
    if len(call.pending) >= call.batch_sizes.get(call.round + 1, call.batch_size) > 0:
        return call.ask(call.attached(), list(call.pending))  # as many as learned: complete
    if call.state is _S.RUNNING:
        call.batch_started = now
    remaining = call.limits.batch_max_s - (now - call.batch_started)
    return Step(_S.COLLECTING, [call.timer("batch", min(call.limits.batch_quiet_s, remaining))])


def _push_while_waiting(call: CallRecord, event: UpstreamPushArrived, now: float) -> Step:
    """A push after its round was asked: asked for in the next round, and the round's batch was
    larger than learned (or than the ceiling let in)."""
    if call.outcome is not None:
        return call.stay()  # the upstream call is over (or was cut off at a push cap)
    if len(call.pending) >= call.limits.max_pushes_per_round:
        return _too_many_in_round(call, event.push)
    call.pending[event.push.key] = event.push
    return call.stay([NoteBatchSize(call.round, len(call.pending))])


def _too_many_in_round(call: CallRecord, push: PendingPush) -> Step:
    """A push past `held.max_pushes_per_round`: refused upstream, and the call ends with the
    limit error (`CallRecord.overflowed`)."""
    limit = call.limits.max_pushes_per_round
    fault = UpstreamLimitExceeded(
        f"The upstream server asked for more than {limit} inputs in one round",
        "held.max_pushes_per_round",
    )
    before = [] if push.push_id is None else [AnswerPush(push.push_id, over_limit(fault))]
    return call.overflowed(fault, *before)


def _push_cancelled(call: CallRecord, event: UpstreamPushCancelled, now: float) -> Step:
    for key, push in list(call.pending.items()):
        if push.push_id == event.push_id:
            del call.pending[key]
    if call.state is _S.COLLECTING and not call.pending:
        return Step(_S.RUNNING, [CancelTimer("batch")])
    return call.stay()


def _final_while_attached(
    call: CallRecord, event: UpstreamResultArrived | UpstreamErrorArrived, now: float
) -> Step:
    attempt = call.attached()
    call.upstream_done = True
    if (
        isinstance(event, UpstreamErrorArrived)
        and call.lift_url_errors
        and is_url_elicitation_required(event.error)
    ):
        if not call.url_elicitation:
            fault = MissingClientCapability(
                "The server requires URL-mode elicitation, which this request did not declare",
                {"elicitation": {"url": {}}},
            )
            return call.finish(ReplyError(attempt, fault=fault))
        lifted = lift_url_elicitations(event.error)
        if lifted:
            call.pending.update(lifted)
            call.reissue = True
            return call.ask(attempt, list(call.pending))
    call.pending.clear()
    return call.finish(_final_reply(attempt, event))


def _final_while_waiting(
    call: CallRecord, event: UpstreamResultArrived | UpstreamErrorArrived, now: float
) -> Step:
    """The upstream call ended while held (e.g. the server timed its push out): the retry
    gets it."""
    call.upstream_done = True
    if call.outcome is None:  # a push cap may have decided it first (`CallRecord.overflowed`)
        call.outcome = event
    return call.stay([ReleaseUpstream()])


def _final_reply(
    attempt: int, event: UpstreamResultArrived | UpstreamErrorArrived
) -> ReplyResult | ReplyError:
    if isinstance(event, UpstreamResultArrived):
        return ReplyResult(attempt, event.result)
    return ReplyError(attempt, error=event.error, fault=event.fault)


def _batch_closed(call: CallRecord, event: BatchWindowClosed, now: float) -> Step:
    if not call.is_current("batch", event.token):
        return call.stay()  # superseded by a later push
    noted = NoteBatchSize(call.round + 1, len(call.pending))
    return call.ask(call.attached(), list(call.pending), noted)


def _stale_timer(call: CallRecord, event: BatchWindowClosed | DeadlinePassed, now: float) -> Step:
    return call.stay()


def _retry(call: CallRecord, event: ClientRetried, now: float) -> Step:
    """A retry in any state: refused unless the call waits for this round's answers. A retry that
    found the call just before the driver dropped it is refused like a retry of an unknown call."""
    reason = call.retry_refusal(event.round)
    if reason is not None:
        return call.stay([ReplyError(event.attempt, fault=InvalidRequestState(reason))])
    if call.outcome is not None:
        call.pending.clear()
        return call.finish(_final_reply(event.attempt, call.outcome))
    try:
        answers = {
            key: input_response_to_legacy(key, push, event.input_responses[key])
            for key, push in call.pending.items()
            if key in event.input_responses
        }
    except ClientFault as fault:
        return call.stay([ReplyError(event.attempt, fault=fault)])  # nothing consumed
    return _apply_answers(call, event.attempt, answers)


def _apply_answers(call: CallRecord, attempt: int, answers: dict[str, PushAnswer]) -> Step:
    actions: list[Action] = []
    for key, answer in answers.items():
        push = call.pending.pop(key)
        if push.push_id is not None:
            actions.append(AnswerPush(push.push_id, answer))
    if call.pending:
        return call.ask(attempt, list(call.pending), *actions)
    call.attempt = attempt
    actions += [CancelTimer("deadline"), call.timer("deadline", call.limits.attempt_timeout_s)]
    if call.reissue:
        call.reissue = False
        if any_declined(answers):
            return call.finish(ReplyError(attempt, fault=url_declined()))
        call.upstream_done = False
        actions.append(ReissueUpstreamCall())
    return Step(_S.RUNNING, actions)


def _disconnected(call: CallRecord, event: ClientDisconnected, now: float) -> Step:
    if event.attempt != call.attempt:
        return call.stay()
    return call.abandon("client disconnected")


def _ignore(call: CallRecord, event: Event, now: float) -> Step:
    return call.stay()


def _attempt_deadline(call: CallRecord, event: DeadlinePassed, now: float) -> Step:
    if not call.is_current("deadline", event.token):
        return call.stay()
    fault = UpstreamTimeout(
        f"The upstream call did not finish within {call.limits.attempt_timeout_s:g} s", public=True
    )
    return call.abandon("request timed out", ReplyError(call.attached(), fault=fault))


def _held_deadline(call: CallRecord, event: DeadlinePassed, now: float) -> Step:
    if not call.is_current("deadline", event.token):
        return call.stay()
    return call.abandon("held call expired")


_Handler = Callable[[CallRecord, Any, float], Step]


@dataclass(frozen=True)
class Transition:
    """One row of the table: the handler, and every state it may lead to."""

    handler: _Handler
    targets: frozenset[HeldCallState]


def _to(handler: _Handler, *targets: HeldCallState) -> Transition:
    return Transition(handler, frozenset(targets))


RUN, COLLECT, WAIT, DONE = _S.RUNNING, _S.COLLECTING, _S.WAITING_CLIENT, _S.DONE
# DONE: past held.max_rounds
TRANSITIONS: dict[tuple[HeldCallState, type], Transition] = {
    # RUN: answered from pre-answers; WAIT: as many pushes as learned (DONE: past max_rounds)
    (RUN, UpstreamPushArrived): _to(_push_while_attached, RUN, COLLECT, WAIT, DONE),
    (RUN, UpstreamPushCancelled): _to(_push_cancelled, RUN),
    (RUN, UpstreamResultArrived): _to(_final_while_attached, DONE),
    (RUN, UpstreamErrorArrived): _to(_final_while_attached, DONE, WAIT),  # WAIT: a lifted -32042
    (RUN, BatchWindowClosed): _to(_stale_timer, RUN),
    (RUN, ClientRetried): _to(_retry, RUN),  # refused: not waiting
    (RUN, ClientDisconnected): _to(
        _disconnected, RUN, DONE
    ),  # RUN: an earlier attempt's disconnect
    (RUN, DeadlinePassed): _to(_attempt_deadline, RUN, DONE),  # RUN: a stale timer
    (COLLECT, UpstreamPushArrived): _to(_push_while_attached, COLLECT, WAIT, DONE),
    (COLLECT, UpstreamPushCancelled): _to(_push_cancelled, COLLECT, RUN),  # RUN: no push left
    (COLLECT, UpstreamResultArrived): _to(_final_while_attached, DONE),
    (COLLECT, UpstreamErrorArrived): _to(_final_while_attached, DONE, WAIT),
    (COLLECT, BatchWindowClosed): _to(_batch_closed, COLLECT, WAIT, DONE),
    (COLLECT, ClientRetried): _to(_retry, COLLECT),
    (COLLECT, ClientDisconnected): _to(_disconnected, COLLECT, DONE),
    (COLLECT, DeadlinePassed): _to(_attempt_deadline, COLLECT, DONE),
    (WAIT, UpstreamPushArrived): _to(_push_while_waiting, WAIT),  # past a cap: outcome kept
    (WAIT, UpstreamPushCancelled): _to(_push_cancelled, WAIT),
    (WAIT, UpstreamResultArrived): _to(_final_while_waiting, WAIT),
    (WAIT, UpstreamErrorArrived): _to(_final_while_waiting, WAIT),
    (WAIT, BatchWindowClosed): _to(_stale_timer, WAIT),
    (WAIT, ClientRetried): _to(_retry, RUN, WAIT, DONE),  # WAIT: refused, or asked again
    (WAIT, ClientDisconnected): _to(_ignore, WAIT),
    (WAIT, DeadlinePassed): _to(_held_deadline, WAIT, DONE),
    # DONE: late upstream traffic and stale timers are harmless races; so is a retry that found the
    # call just before the driver dropped it (answered like any retry of an unknown call).
    (DONE, UpstreamPushArrived): _to(_ignore, DONE),
    (DONE, UpstreamPushCancelled): _to(_ignore, DONE),
    (DONE, UpstreamResultArrived): _to(_ignore, DONE),
    (DONE, UpstreamErrorArrived): _to(_ignore, DONE),
    (DONE, BatchWindowClosed): _to(_stale_timer, DONE),
    (DONE, DeadlinePassed): _to(_stale_timer, DONE),
    (DONE, ClientRetried): _to(_retry, DONE),
    (DONE, ClientDisconnected): _to(_ignore, DONE),
}

EVENT_TYPES: tuple[type, ...] = (
    UpstreamPushArrived,
    UpstreamPushCancelled,
    UpstreamResultArrived,
    UpstreamErrorArrived,
    BatchWindowClosed,
    ClientRetried,
    ClientDisconnected,
    DeadlinePassed,
)


class HeldCall(CallRecord):
    """One MRTR-capable upstream call, from its first attempt to its final reply."""

    def start(
        self, now: float, *, attempt: int | None = None, deadline_s: float | None = None
    ) -> list[Action]:
        """Actions for the first attempt (`attempt`, unless given at construction): its deadline,
        `deadline_s` from now when the call ran plain before (what is left of the attempt's
        timeout), else the whole timeout."""
        if attempt is not None:
            self.attempt = attempt
        timeout_s = self.limits.attempt_timeout_s if deadline_s is None else deadline_s
        return [self.timer("deadline", timeout_s)]

    def handle(self, event: Event, now: float) -> list[Action]:
        transition = TRANSITIONS.get((self.state, type(event)))
        if transition is None:
            return [ReportBug(f"no transition for {type(event).__name__} in {self.state.name}")]
        step = transition.handler(self, event, now)
        if step.target not in transition.targets:
            return [
                ReportBug(f"{type(event).__name__} in {self.state.name} led to {step.target.name}")
            ]
        self.state = step.target
        return step.actions

    def abort(self, reason: str, now: float) -> list[Action]:
        """Abandon the call now (shutdown, or a held-call cap refused it): an attached
        attempt is told the bridge is shutting down, pending pushes are refused and the upstream
        call is cancelled."""
        if self.state is _S.DONE:
            return []
        told = [ReplyError(self.attempt, fault=ShuttingDown())] if self.attempt is not None else []
        step = self.abandon(reason, *told)
        self.state = step.target
        return step.actions

    def relimit(self, limits: Limits) -> list[Action]:
        """Run under `limits` from now on, restarting the current deadline under them: a call the
        bridge turned into a task lives as long as the task, not one front request
        (docs/tasks.md, "Long plain calls as tasks")."""
        self.limits = limits
        if self.state is _S.DONE:
            return []
        waiting = self.state is _S.WAITING_CLIENT
        return [self.timer("deadline", limits.held_ttl_s if waiting else limits.attempt_timeout_s)]

    def overflow(self, fault: UpstreamLimitExceeded, now: float, *before: Action) -> list[Action]:
        """The upstream went past a push cap (`held.max_pushes_per_call`, checked by the driver):
        `before` (the excess push refused), then as `overflowed`."""
        if self.state is _S.DONE or (self.attempt is None and self.upstream_done):
            return []  # the call is already over upstream (its session discarded): nothing to tell
        step = self.overflowed(fault, *before)
        self.state = step.target
        return step.actions


__all__ = ["EVENT_TYPES", "HeldCall", "HeldCallState", "Limits", "Step", "Transition"]
