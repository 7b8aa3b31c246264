"""The held call: a sans-I/O state machine for one MRTR-capable upstream call (STYLE § 5).

`HeldCall.handle(event, now) -> list[Action]` is the whole interface. Time comes in as a
parameter; timers go out as `StartTimer` actions and come back as `BatchWindowClosed` /
`DeadlinePassed` events. Every (state, event type) pair is in `_TRANSITIONS`; a missing pair is
a `BridgeBug`: it yields `ReportBug` and leaves the state unchanged.

Attempts: each front request (the first call and every retry) is an *attempt* with an integer id
chosen by the driver. `Reply*` actions name the attempt they answer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from translators.canonical import as_object
from translators.eras import ELICIT
from translators.errors import (
    LEGACY_URL_ELICITATION_REQUIRED,
    BridgeError,
    ClientFault,
    ClientLimitExceeded,
    InvalidRequestState,
    MissingClientCapability,
    RejectionReason,
    ShuttingDown,
    UpstreamFault,
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
from translators.pushes import PendingPush, PushAnswer, input_response_to_legacy, refusal

JsonObject = dict[str, Any]


class HeldCallState(enum.Enum):
    RUNNING = "running"  # upstream call in flight, a front attempt attached
    COLLECTING = "collecting"  # first push seen, batch window open, attempt attached
    WAITING_CLIENT = "waiting_client"  # InputRequiredResult sent, no attempt attached
    DONE = "done"  # final reply sent, cancelled or expired


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
    outcome: UpstreamResultArrived | UpstreamErrorArrived | None = None  # finished while WAITING_CLIENT
    reissue: bool = False  # the pending pushes are URL elicitations lifted from a -32042
    url_elicitation: bool = True  # the client declared elicitation.url (else a -32042 becomes -32021)
    lift_url_errors: bool = True  # the session's revision has URL mode (else -32042 is a plain error)
    upstream_done: bool = False
    _batch_started: float = 0.0
    _tokens: dict[str, int] = field(default_factory=lambda: {"batch": 0, "deadline": 0})

    def start(self, now: float) -> list[Action]:
        """Actions for the first attempt: its deadline."""
        return [self._timer("deadline", self.limits.attempt_timeout_s)]

    def handle(self, event: Event, now: float) -> list[Action]:
        handler = _TRANSITIONS.get((self.state, type(event)))
        if handler is None:
            return [ReportBug(f"no transition for {type(event).__name__} in {self.state.name}")]
        return handler(self, event, now)

    def abort(self, reason: str, now: float) -> list[Action]:
        """Abandon the call now (shutdown, or a held-call cap refused it): an attached attempt is told the
        bridge is shutting down, pending pushes are refused and the upstream call is cancelled."""
        if self.state is HeldCallState.DONE:
            return []
        actions: list[Action] = []
        if self.attempt is not None:
            actions.append(ReplyError(self.attempt, fault=ShuttingDown()))
        return actions + self._abandon(reason)

    # ---- helpers -----------------------------------------------------------------------------

    def _timer(self, name: str, delay_s: float) -> StartTimer:
        """Start (or restart) timer `name`; an event carrying an older token is stale."""
        self._tokens[name] += 1
        return StartTimer(name, max(delay_s, 0.0), self._tokens[name])

    def _is_current(self, name: str, token: int) -> bool:
        return self._tokens[name] == token

    def _finish(self, *, discard: bool = False) -> list[Action]:
        self.state = HeldCallState.DONE
        self.attempt = None
        return [CancelTimer("batch"), CancelTimer("deadline"), ReleaseUpstream(discard=discard)]

    def _abandon(self, reason: str) -> list[Action]:
        """Refuse every held push, cancel the upstream call, end."""
        actions: list[Action] = [
            AnswerPush(p.push_id, refusal(p.method)) for p in self.pending.values() if p.push_id is not None
        ]
        self.pending.clear()
        if not self.upstream_done:
            actions.append(CancelUpstreamCall(reason))
        return actions + self._finish(discard=not self.upstream_done)

    def _attached(self) -> int:
        assert self.attempt is not None
        return self.attempt

    def _ask(self, attempt: int, keys: list[str]) -> list[Action]:
        """Send an InputRequiredResult for `keys` and detach (a new round)."""
        if self.round >= self.limits.max_rounds:
            fault = ClientLimitExceeded(
                f"The call needed more than {self.limits.max_rounds} input rounds", "held.max_rounds"
            )
            return [ReplyError(attempt, fault=fault), *self._abandon("too many input rounds")]
        self.round += 1
        self.state = HeldCallState.WAITING_CLIENT
        self.attempt = None
        requests = {key: self.pending[key].input_request for key in keys}
        return [
            CancelTimer("batch"),
            ReplyInputRequired(attempt, self.round, requests),
            self._timer("deadline", self.limits.held_ttl_s),
        ]


# ---- transitions ------------------------------------------------------------------------------


def _push_while_attached(call: HeldCall, event: UpstreamPushArrived, now: float) -> list[Action]:
    push = event.push
    if push.key in call.pre_answers and push.push_id is not None:
        try:
            answer = input_response_to_legacy(push.key, push, call.pre_answers.pop(push.key))
        except ClientFault:
            answer = None  # an unusable pre-answer: ask the client normally
        if answer is not None:
            return [AnswerPush(push.push_id, answer)]
    call.pending[push.key] = push
    if call.state is HeldCallState.RUNNING:
        call.state = HeldCallState.COLLECTING
        call._batch_started = now
    remaining = call.limits.batch_max_s - (now - call._batch_started)
    return [call._timer("batch", min(call.limits.batch_quiet_s, remaining))]


def _push_while_waiting(call: HeldCall, event: UpstreamPushArrived, now: float) -> list[Action]:
    call.pending[event.push.key] = event.push  # asked for in the next round
    return []


def _push_cancelled(call: HeldCall, event: UpstreamPushCancelled, now: float) -> list[Action]:
    for key, push in list(call.pending.items()):
        if push.push_id == event.push_id:
            del call.pending[key]
    if call.state is HeldCallState.COLLECTING and not call.pending:
        call.state = HeldCallState.RUNNING
        return [CancelTimer("batch")]
    return []


def _final_while_attached(call: HeldCall, event: UpstreamResultArrived | UpstreamErrorArrived,
                          now: float) -> list[Action]:
    attempt = call._attached()
    call.upstream_done = True
    if isinstance(event, UpstreamErrorArrived) and call.lift_url_errors and _is_url_elicitation_required(event):
        if not call.url_elicitation:
            fault = MissingClientCapability("The server requires URL-mode elicitation, which this request did not "
                                            "declare", {"elicitation": {"url": {}}})
            return [ReplyError(attempt, fault=fault), *call._finish()]
        if _lift_url_elicitations(call, event):
            call.reissue = True
            return call._ask(attempt, list(call.pending))
    call.pending.clear()
    return [_final_reply(attempt, event), *call._finish()]


def _final_while_waiting(call: HeldCall, event: UpstreamResultArrived | UpstreamErrorArrived,
                         now: float) -> list[Action]:
    """The upstream call ended while held (e.g. the server timed its push out): the retry gets it."""
    call.upstream_done = True
    call.outcome = event
    return [ReleaseUpstream()]


def _final_reply(attempt: int, event: UpstreamResultArrived | UpstreamErrorArrived) -> ReplyResult | ReplyError:
    if isinstance(event, UpstreamResultArrived):
        return ReplyResult(attempt, event.result)
    return ReplyError(attempt, error=event.error, fault=event.fault)


def _is_url_elicitation_required(event: UpstreamErrorArrived) -> bool:
    return (event.error or {}).get("code") == LEGACY_URL_ELICITATION_REQUIRED


def _lift_url_elicitations(call: HeldCall, event: UpstreamErrorArrived) -> bool:
    """Lift a legacy -32042 (URL elicitation required) into pending URL-mode input requests."""
    elicitations = as_object(as_object(event.error).get("data")).get("elicitations")
    if not isinstance(elicitations, list):
        return False
    lifted = [e for e in elicitations if isinstance(e, dict) and isinstance(e.get("url"), str)]
    for n, item in enumerate(lifted, start=1):
        key = f"url-{n}"
        params = {"mode": "url", "message": item.get("message", ""), "url": item["url"]}
        call.pending[key] = PendingPush(key, None, ELICIT, {"method": ELICIT, "params": params},
                                        item.get("elicitationId"))
    return bool(lifted)


def _batch_closed(call: HeldCall, event: BatchWindowClosed, now: float) -> list[Action]:
    if not call._is_current("batch", event.token):
        return []  # superseded by a later push
    return call._ask(call._attached(), list(call.pending))


def _stale_timer(call: HeldCall, event: BatchWindowClosed | DeadlinePassed, now: float) -> list[Action]:
    return []


def _retry_while_attached(call: HeldCall, event: ClientRetried, now: float) -> list[Action]:
    return [ReplyError(event.attempt, fault=InvalidRequestState(RejectionReason.NOT_WAITING))]


def _retry(call: HeldCall, event: ClientRetried, now: float) -> list[Action]:
    if event.round != call.round:
        return [ReplyError(event.attempt, fault=InvalidRequestState(RejectionReason.STALE_ROUND))]
    if call.outcome is not None:
        call.pending.clear()
        return [_final_reply(event.attempt, call.outcome), *call._finish()]
    try:
        answers = {
            key: input_response_to_legacy(key, push, event.input_responses[key])
            for key, push in call.pending.items()
            if key in event.input_responses
        }
    except ClientFault as fault:
        return [ReplyError(event.attempt, fault=fault)]  # nothing consumed
    return _apply_answers(call, event.attempt, answers)


def _apply_answers(call: HeldCall, attempt: int, answers: dict[str, PushAnswer]) -> list[Action]:
    actions: list[Action] = []
    for key, answer in answers.items():
        push = call.pending.pop(key)
        if push.push_id is not None:
            actions.append(AnswerPush(push.push_id, answer))
    if call.pending:
        return actions + call._ask(attempt, list(call.pending))
    call.state = HeldCallState.RUNNING
    call.attempt = attempt
    actions += [CancelTimer("deadline"), call._timer("deadline", call.limits.attempt_timeout_s)]
    if call.reissue:
        call.reissue = False
        if _declined(answers):
            return [ReplyError(attempt, fault=_url_declined()), *call._finish()]
        call.upstream_done = False
        actions.append(ReissueUpstreamCall())
    return actions


def _declined(answers: dict[str, PushAnswer]) -> bool:
    return any((a.result or {}).get("action") != "accept" for a in answers.values())


def _url_declined() -> BridgeError:
    return UpstreamFault("The server requires a URL interaction (elicitation) that the client did not accept",
                         {"upstreamCode": LEGACY_URL_ELICITATION_REQUIRED}, public=True)


def _retry_after_done(call: HeldCall, event: ClientRetried, now: float) -> list[Action]:
    return [ReplyError(event.attempt, fault=InvalidRequestState(RejectionReason.UNKNOWN_HELD_CALL))]


def _disconnected(call: HeldCall, event: ClientDisconnected, now: float) -> list[Action]:
    if event.attempt != call.attempt:
        return []
    return call._abandon("client disconnected")


def _ignore(call: HeldCall, event: Event, now: float) -> list[Action]:
    return []


def _attempt_deadline(call: HeldCall, event: DeadlinePassed, now: float) -> list[Action]:
    if not call._is_current("deadline", event.token):
        return []
    fault = UpstreamTimeout(f"The upstream call did not finish within {call.limits.attempt_timeout_s:g} s",
                            public=True)
    return [ReplyError(call._attached(), fault=fault), *call._abandon("request timed out")]


def _held_deadline(call: HeldCall, event: DeadlinePassed, now: float) -> list[Action]:
    if not call._is_current("deadline", event.token):
        return []
    return call._abandon("held call expired")


_S = HeldCallState
_Handler = Callable[[HeldCall, Any, float], list[Action]]
_TRANSITIONS: dict[tuple[HeldCallState, type], _Handler] = {
    (_S.RUNNING, UpstreamPushArrived): _push_while_attached,
    (_S.RUNNING, UpstreamPushCancelled): _push_cancelled,
    (_S.RUNNING, UpstreamResultArrived): _final_while_attached,
    (_S.RUNNING, UpstreamErrorArrived): _final_while_attached,
    (_S.RUNNING, BatchWindowClosed): _stale_timer,
    (_S.RUNNING, ClientRetried): _retry_while_attached,
    (_S.RUNNING, ClientDisconnected): _disconnected,
    (_S.RUNNING, DeadlinePassed): _attempt_deadline,
    (_S.COLLECTING, UpstreamPushArrived): _push_while_attached,
    (_S.COLLECTING, UpstreamPushCancelled): _push_cancelled,
    (_S.COLLECTING, UpstreamResultArrived): _final_while_attached,
    (_S.COLLECTING, UpstreamErrorArrived): _final_while_attached,
    (_S.COLLECTING, BatchWindowClosed): _batch_closed,
    (_S.COLLECTING, ClientRetried): _retry_while_attached,
    (_S.COLLECTING, ClientDisconnected): _disconnected,
    (_S.COLLECTING, DeadlinePassed): _attempt_deadline,
    (_S.WAITING_CLIENT, UpstreamPushArrived): _push_while_waiting,
    (_S.WAITING_CLIENT, UpstreamPushCancelled): _push_cancelled,
    (_S.WAITING_CLIENT, UpstreamResultArrived): _final_while_waiting,
    (_S.WAITING_CLIENT, UpstreamErrorArrived): _final_while_waiting,
    (_S.WAITING_CLIENT, BatchWindowClosed): _stale_timer,
    (_S.WAITING_CLIENT, ClientRetried): _retry,
    (_S.WAITING_CLIENT, ClientDisconnected): _ignore,
    (_S.WAITING_CLIENT, DeadlinePassed): _held_deadline,
    # DONE: late upstream traffic and stale timers are harmless races; so is a retry that found the
    # call just before the driver dropped it (answered like any retry of an unknown call).
    (_S.DONE, UpstreamPushArrived): _ignore,
    (_S.DONE, UpstreamPushCancelled): _ignore,
    (_S.DONE, UpstreamResultArrived): _ignore,
    (_S.DONE, UpstreamErrorArrived): _ignore,
    (_S.DONE, BatchWindowClosed): _stale_timer,
    (_S.DONE, DeadlinePassed): _stale_timer,
    (_S.DONE, ClientRetried): _retry_after_done,
    (_S.DONE, ClientDisconnected): _ignore,
}

EVENT_TYPES: tuple[type, ...] = (
    UpstreamPushArrived, UpstreamPushCancelled, UpstreamResultArrived, UpstreamErrorArrived,
    BatchWindowClosed, ClientRetried, ClientDisconnected, DeadlinePassed,
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
    "UpstreamErrorArrived",
    "UpstreamPushArrived",
    "UpstreamPushCancelled",
    "UpstreamResultArrived",
]
