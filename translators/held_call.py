"""The held call: a sans-I/O state machine for one MRTR-capable upstream call (docs/decisions.md,
"The held call is a sans-I/O machine").

`HeldCall.handle(event, now) -> list[Action]` is the whole interface. Time comes in as a
parameter; timers go out as `StartTimer` actions and come back as `BatchWindowClosed` /
`DeadlinePassed` events. Every (state, event type) pair is in `_TRANSITIONS`
(translators/held_call_table.py), which names the states the transition may lead to; a handler
computes its actions and returns its target (`Step`), and `handle()` alone moves the state, once
it has checked the table names the target.
A missing pair, or a target the table does not name, is a `BridgeBug`: it yields `ReportBug`
and leaves the state unchanged.

Attempts: each front request (the first call and every retry) is an *attempt* with an integer id
chosen by the driver. `Reply*` actions name the attempt they answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from translators.errors import (
    ClientLimitExceeded,
    RejectionReason,
    ShuttingDown,
    UpstreamLimitExceeded,
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
    UpstreamResultArrived,
)
from translators.held_call_table import (
    _TRANSITIONS,
    EVENT_TYPES,
    HeldCallState,
    Step,
    Transition,
)
from translators.jsonrpc import JsonObject
from translators.pushes import PendingPush, refusal

_S = HeldCallState


@dataclass(frozen=True)
class Limits:
    batch_quiet_s: float
    batch_max_s: float
    attempt_timeout_s: float
    held_ttl_s: float
    max_rounds: int
    max_pushes_per_round: int = 64  # held.max_pushes_per_round: pending pushes at once
    max_pushes_per_call: int = 1024  # held.max_pushes_per_call: pushes the call may send in all


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
    batch_sizes: Mapping[int, int] = field(default_factory=dict)  # learned: round -> pushes
    batch_size: int = 0  # declared (held.batch_sizes) for every round not learned; 0: unknown
    _batch_started: float = 0.0
    _tokens: dict[str, int] = field(default_factory=lambda: {"batch": 0, "deadline": 0})

    def start(
        self, now: float, *, attempt: int | None = None, deadline_s: float | None = None
    ) -> list[Action]:
        """Actions for the first attempt (`attempt`, unless given at construction): its deadline,
        `deadline_s` from now when the call ran plain before (what is left of the attempt's
        timeout), else the whole timeout."""
        if attempt is not None:
            self.attempt = attempt
        timeout_s = self.limits.attempt_timeout_s if deadline_s is None else deadline_s
        return [self._timer("deadline", timeout_s)]

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
        """Abandon the call now (shutdown, or a held-call cap refused it): an attached
        attempt is told the bridge is shutting down, pending pushes are refused and the upstream
        call is cancelled."""
        if self.state is _S.DONE:
            return []
        told = [ReplyError(self.attempt, fault=ShuttingDown())] if self.attempt is not None else []
        step = self._abandon(reason, *told)
        self.state = step.target
        return step.actions

    def overflow(self, fault: UpstreamLimitExceeded, now: float, *before: Action) -> list[Action]:
        """The upstream went past a push cap (`held.max_pushes_per_call`, checked by the driver):
        `before` (the excess push refused), then as `overflowed`."""
        if self.state is _S.DONE or (self.attempt is None and self.upstream_done):
            return []  # the call is already over upstream (its session discarded): nothing to tell
        step = self.overflowed(fault, *before)
        self.state = step.target
        return step.actions

    def overflowed(self, fault: UpstreamLimitExceeded, *before: Action) -> Step:
        """`before`, then every held push refused and the upstream call cancelled; the client is
        told `fault`: an attached attempt now, else the retry (the outcome it will find)."""
        if self.attempt is not None:
            return self._abandon("too many pushes", *before, ReplyError(self.attempt, fault=fault))
        actions: list[Action] = [*before, *self._refuse_pending()]
        if not self.upstream_done:
            self.upstream_done = True
            actions += [CancelUpstreamCall("too many pushes"), ReleaseUpstream(discard=True)]
        if self.outcome is None:
            self.outcome = UpstreamErrorArrived(fault=fault)
        return self._stay(actions)

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
        refusals = self._refuse_pending()
        if not self.upstream_done:
            refusals.append(CancelUpstreamCall(reason))
        return self._finish(*actions, *refusals, discard=not self.upstream_done)

    def _refuse_pending(self) -> list[Action]:
        """Every held push refused (as on an abandon), and none held any more."""
        refusals: list[Action] = [
            AnswerPush(p.push_id, refusal(p.method))
            for p in self.pending.values()
            if p.push_id is not None
        ]
        self.pending.clear()
        return refusals

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
    "NoteBatchSize",
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
