"""The held call: a sans-I/O state machine for one MRTR-capable upstream call (docs/decisions.md,
"The held call is a sans-I/O machine").

`HeldCall.handle(event, now) -> list[Action]` is the whole interface. Time comes in as a
parameter; timers go out as `StartTimer` actions and come back as `BatchWindowClosed` /
`DeadlinePassed` events. Every (state, event type) pair is in `_TRANSITIONS`, which names the
states the transition may lead to; a handler computes its actions and returns its target
(`Step`), and `handle()` alone moves the state, once it has checked the table names the target.
A missing pair, or a target the table does not name, is a `BridgeBug`: it yields `ReportBug`
and leaves the state unchanged.

Attempts: each front request (the first call and every retry) is an *attempt* with an integer id
chosen by the driver. `Reply*` actions name the attempt they answer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from translators.errors import (
    ClientFault,
    ClientLimitExceeded,
    InvalidRequestState,
    MissingClientCapability,
    RejectionReason,
    ShuttingDown,
    UpstreamTimeout,
)
from translators.held_call_events import (
    Action,
    AnswerPush,
    BatchWindowClosed,
    CancelTimer,
    CancelUpstreamCall,
    ClientDisconnected,
    ClientRetried,
    DeadlinePassed,
    Event,
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
    UpstreamResultArrived,
)
from translators.jsonrpc import JsonObject
from translators.pushes import PendingPush, PushAnswer, input_response_to_legacy, refusal
from translators.url_elicitation import (
    any_declined,
    is_url_elicitation_required,
    lift_url_elicitations,
    url_declined,
)


class HeldCallState(enum.Enum):
    RUNNING = "running"  # upstream call in flight, a front attempt attached
    COLLECTING = "collecting"  # first push seen, batch window open, attempt attached
    WAITING_CLIENT = "waiting_client"  # InputRequiredResult sent, no attempt attached
    DONE = "done"  # final reply sent, cancelled or expired


_S = HeldCallState


@dataclass(frozen=True)
class Limits:
    batch_quiet_s: float
    batch_max_s: float
    attempt_timeout_s: float
    held_ttl_s: float
    max_rounds: int


@dataclass
class HeldCall:
    """One MRTR-capable upstream call, from its first attempt to its final reply."""

    limits: Limits
    attempt: int | None
    pre_answers: JsonObject = field(default_factory=dict)
    state: HeldCallState = HeldCallState.RUNNING
    round: int = 0
    pending: dict[str, PendingPush] = field(default_factory=dict)
    outcome: UpstreamResultArrived | UpstreamErrorArrived | None = (
        None  # finished while WAITING_CLIENT
    )
    reissue: bool = False  # the pending pushes are URL elicitations lifted from a -32042
    url_elicitation: bool = (
        True  # the client declared elicitation.url (else a -32042 becomes -32021)
    )
    lift_url_errors: bool = (
        True  # the session's revision has URL mode (else -32042 is a plain error)
    )
    upstream_done: bool = False
    _batch_started: float = 0.0
    _tokens: dict[str, int] = field(default_factory=lambda: {"batch": 0, "deadline": 0})

    def start(self, now: float, *, attempt: int | None = None) -> list[Action]:
        """Actions for the first attempt (`attempt`, unless given at construction): its deadline."""
        if attempt is not None:
            self.attempt = attempt
        return [self._timer("deadline", self.limits.attempt_timeout_s)]

    def handle(self, event: Event, now: float) -> list[Action]:
        transition = _TRANSITIONS.get((self.state, type(event)))
        if transition is None:
            return [ReportBug(f"no transition for {type(event).__name__} in {self.state.name}")]
        step = transition.handler(self, event, now)
        if step.target not in transition.targets:
            return [
                ReportBug(f"{type(event).__name__} in {self.state.name} led to {step.target.name}")
            ]
        self.state = step.target
        return step.actions

    def retry_refusal(self, round_: int) -> RejectionReason | None:
        """Why a retry for `round_` is refused now, or None: the one place these checks live (the
        continuation check asks before claiming the call; the machine asks again when fed)."""
        if self.state is _S.DONE:
            return RejectionReason.UNKNOWN_HELD_CALL
        if round_ != self.round:
            return RejectionReason.STALE_ROUND
        if self.state is not _S.WAITING_CLIENT:
            return RejectionReason.NOT_WAITING  # a doubled retry: the other copy resumed the call
        return None

    def abort(self, reason: str, now: float) -> list[Action]:
        """Abandon the call now (shutdown, or a held-call cap refused it): an attached attempt is
        told the
        bridge is shutting down, pending pushes are refused and the upstream call is cancelled."""
        if self.state is _S.DONE:
            return []
        told = [ReplyError(self.attempt, fault=ShuttingDown())] if self.attempt is not None else []
        step = self._abandon(reason, *told)
        self.state = step.target
        return step.actions

    # ---- helpers -----------------------------------------------------------------------------

    def _timer(self, name: str, delay_s: float) -> StartTimer:
        """Start (or restart) timer `name`; an event carrying an older token is stale."""
        self._tokens[name] += 1
        return StartTimer(name, max(delay_s, 0.0), self._tokens[name])

    def _is_current(self, name: str, token: int) -> bool:
        return self._tokens[name] == token

    def _finish(self, *actions: Action, discard: bool = False) -> Step:
        """`actions`, then the end: timers cancelled, the lease released for good."""
        self.attempt = None
        return Step(
            _S.DONE,
            [
                *actions,
                CancelTimer("batch"),
                CancelTimer("deadline"),
                ReleaseUpstream(discard=discard, final=True),
            ],
        )

    def _abandon(self, reason: str, *actions: Action) -> Step:
        """`actions`, then refuse every held push, cancel the upstream call, end."""
        refusals: list[Action] = [
            AnswerPush(p.push_id, refusal(p.method))
            for p in self.pending.values()
            if p.push_id is not None
        ]
        self.pending.clear()
        if not self.upstream_done:
            refusals.append(CancelUpstreamCall(reason))
        return self._finish(*actions, *refusals, discard=not self.upstream_done)

    def _stay(self, actions: list[Action] | None = None) -> Step:
        return Step(self.state, actions or [])

    def _attached(self) -> int:
        assert self.attempt is not None
        return self.attempt

    def _ask(self, attempt: int, keys: list[str], *before: Action) -> Step:
        """`before`, then an InputRequiredResult for `keys`, detached (a new round)."""
        if self.round >= self.limits.max_rounds:
            fault = ClientLimitExceeded(
                f"The call needed more than {self.limits.max_rounds} input rounds",
                "held.max_rounds",
            )
            return self._abandon("too many input rounds", *before, ReplyError(attempt, fault=fault))
        self.round += 1
        self.attempt = None
        requests = {key: self.pending[key].input_request for key in keys}
        return Step(
            _S.WAITING_CLIENT,
            [
                *before,
                CancelTimer("batch"),
                ReplyInputRequired(attempt, self.round, requests),
                self._timer("deadline", self.limits.held_ttl_s),
            ],
        )


@dataclass(frozen=True)
class Step:
    """What a transition handler decided: the state to move to, and the actions to perform."""

    target: HeldCallState
    actions: list[Action]


# ---- transitions: each handler returns the `Step` it decided; `HeldCall.handle` moves the state
# ----


def _push_while_attached(call: HeldCall, event: UpstreamPushArrived, now: float) -> Step:
    push = event.push
    if push.key in call.pre_answers and push.push_id is not None:
        try:
            answer = input_response_to_legacy(push.key, push, call.pre_answers.pop(push.key))
        except ClientFault:
            answer = None  # an unusable pre-answer: ask the client normally
        if answer is not None:
            return call._stay([AnswerPush(push.push_id, answer)])
    call.pending[push.key] = push
    if call.state is _S.RUNNING:
        call._batch_started = now
    remaining = call.limits.batch_max_s - (now - call._batch_started)
    return Step(_S.COLLECTING, [call._timer("batch", min(call.limits.batch_quiet_s, remaining))])


def _push_while_waiting(call: HeldCall, event: UpstreamPushArrived, now: float) -> Step:
    call.pending[event.push.key] = event.push  # asked for in the next round
    return call._stay()


def _push_cancelled(call: HeldCall, event: UpstreamPushCancelled, now: float) -> Step:
    for key, push in list(call.pending.items()):
        if push.push_id == event.push_id:
            del call.pending[key]
    if call.state is _S.COLLECTING and not call.pending:
        return Step(_S.RUNNING, [CancelTimer("batch")])
    return call._stay()


def _final_while_attached(
    call: HeldCall, event: UpstreamResultArrived | UpstreamErrorArrived, now: float
) -> Step:
    attempt = call._attached()
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
            return call._finish(ReplyError(attempt, fault=fault))
        lifted = lift_url_elicitations(event.error)
        if lifted:
            call.pending.update(lifted)
            call.reissue = True
            return call._ask(attempt, list(call.pending))
    call.pending.clear()
    return call._finish(_final_reply(attempt, event))


def _final_while_waiting(
    call: HeldCall, event: UpstreamResultArrived | UpstreamErrorArrived, now: float
) -> Step:
    """The upstream call ended while held (e.g. the server timed its push out): the retry
    gets it."""
    call.upstream_done = True
    call.outcome = event
    return call._stay([ReleaseUpstream()])


def _final_reply(
    attempt: int, event: UpstreamResultArrived | UpstreamErrorArrived
) -> ReplyResult | ReplyError:
    if isinstance(event, UpstreamResultArrived):
        return ReplyResult(attempt, event.result)
    return ReplyError(attempt, error=event.error, fault=event.fault)


def _batch_closed(call: HeldCall, event: BatchWindowClosed, now: float) -> Step:
    if not call._is_current("batch", event.token):
        return call._stay()  # superseded by a later push
    return call._ask(call._attached(), list(call.pending))


def _stale_timer(call: HeldCall, event: BatchWindowClosed | DeadlinePassed, now: float) -> Step:
    return call._stay()


def _retry(call: HeldCall, event: ClientRetried, now: float) -> Step:
    """A retry in any state: refused unless the call waits for this round's answers. A retry that
    found the call just before the driver dropped it is refused like a retry of an unknown call."""
    reason = call.retry_refusal(event.round)
    if reason is not None:
        return call._stay([ReplyError(event.attempt, fault=InvalidRequestState(reason))])
    if call.outcome is not None:
        call.pending.clear()
        return call._finish(_final_reply(event.attempt, call.outcome))
    try:
        answers = {
            key: input_response_to_legacy(key, push, event.input_responses[key])
            for key, push in call.pending.items()
            if key in event.input_responses
        }
    except ClientFault as fault:
        return call._stay([ReplyError(event.attempt, fault=fault)])  # nothing consumed
    return _apply_answers(call, event.attempt, answers)


def _apply_answers(call: HeldCall, attempt: int, answers: dict[str, PushAnswer]) -> Step:
    actions: list[Action] = []
    for key, answer in answers.items():
        push = call.pending.pop(key)
        if push.push_id is not None:
            actions.append(AnswerPush(push.push_id, answer))
    if call.pending:
        return call._ask(attempt, list(call.pending), *actions)
    call.attempt = attempt
    actions += [CancelTimer("deadline"), call._timer("deadline", call.limits.attempt_timeout_s)]
    if call.reissue:
        call.reissue = False
        if any_declined(answers):
            return call._finish(ReplyError(attempt, fault=url_declined()))
        call.upstream_done = False
        actions.append(ReissueUpstreamCall())
    return Step(_S.RUNNING, actions)


def _disconnected(call: HeldCall, event: ClientDisconnected, now: float) -> Step:
    if event.attempt != call.attempt:
        return call._stay()
    return call._abandon("client disconnected")


def _ignore(call: HeldCall, event: Event, now: float) -> Step:
    return call._stay()


def _attempt_deadline(call: HeldCall, event: DeadlinePassed, now: float) -> Step:
    if not call._is_current("deadline", event.token):
        return call._stay()
    fault = UpstreamTimeout(
        f"The upstream call did not finish within {call.limits.attempt_timeout_s:g} s", public=True
    )
    return call._abandon("request timed out", ReplyError(call._attached(), fault=fault))


def _held_deadline(call: HeldCall, event: DeadlinePassed, now: float) -> Step:
    if not call._is_current("deadline", event.token):
        return call._stay()
    return call._abandon("held call expired")


_Handler = Callable[[HeldCall, Any, float], Step]


@dataclass(frozen=True)
class Transition:
    """One row of the table: the handler, and every state it may lead to."""

    handler: _Handler
    targets: frozenset[HeldCallState]


def _to(handler: _Handler, *targets: HeldCallState) -> Transition:
    return Transition(handler, frozenset(targets))


RUN, COLLECT, WAIT, DONE = _S.RUNNING, _S.COLLECTING, _S.WAITING_CLIENT, _S.DONE
_TRANSITIONS: dict[tuple[HeldCallState, type], Transition] = {
    (RUN, UpstreamPushArrived): _to(
        _push_while_attached, RUN, COLLECT
    ),  # RUN: answered from pre-answers
    (RUN, UpstreamPushCancelled): _to(_push_cancelled, RUN),
    (RUN, UpstreamResultArrived): _to(_final_while_attached, DONE),
    (RUN, UpstreamErrorArrived): _to(_final_while_attached, DONE, WAIT),  # WAIT: a lifted -32042
    (RUN, BatchWindowClosed): _to(_stale_timer, RUN),
    (RUN, ClientRetried): _to(_retry, RUN),  # refused: not waiting
    (RUN, ClientDisconnected): _to(
        _disconnected, RUN, DONE
    ),  # RUN: an earlier attempt's disconnect
    (RUN, DeadlinePassed): _to(_attempt_deadline, RUN, DONE),  # RUN: a stale timer
    (COLLECT, UpstreamPushArrived): _to(_push_while_attached, COLLECT),
    (COLLECT, UpstreamPushCancelled): _to(_push_cancelled, COLLECT, RUN),  # RUN: no push left
    (COLLECT, UpstreamResultArrived): _to(_final_while_attached, DONE),
    (COLLECT, UpstreamErrorArrived): _to(_final_while_attached, DONE, WAIT),
    (COLLECT, BatchWindowClosed): _to(
        _batch_closed, COLLECT, WAIT, DONE
    ),  # DONE: past held.max_rounds
    (COLLECT, ClientRetried): _to(_retry, COLLECT),
    (COLLECT, ClientDisconnected): _to(_disconnected, COLLECT, DONE),
    (COLLECT, DeadlinePassed): _to(_attempt_deadline, COLLECT, DONE),
    (WAIT, UpstreamPushArrived): _to(_push_while_waiting, WAIT),
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

__all__ = [
    "EVENT_TYPES",
    "Action",
    "AnswerPush",
    "BatchWindowClosed",
    "CancelTimer",
    "CancelUpstreamCall",
    "ClientDisconnected",
    "ClientRetried",
    "DeadlinePassed",
    "Event",
    "HeldCall",
    "HeldCallState",
    "Limits",
    "ReissueUpstreamCall",
    "ReleaseUpstream",
    "ReplyError",
    "ReplyInputRequired",
    "ReplyResult",
    "ReportBug",
    "StartTimer",
    "Step",
    "Transition",
    "UpstreamErrorArrived",
    "UpstreamPushArrived",
    "UpstreamPushCancelled",
    "UpstreamResultArrived",
]
