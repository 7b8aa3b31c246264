"""The held call's record: its state, what it holds, and the steps transitions compose.

`translators/held/machine.py` (the transition table and `HeldCall`, which drives it) imports this
module; the record never imports the machine.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from translators.held.events import (
    Action,
    AnswerPush,
    CancelTimer,
    CancelUpstreamCall,
    ReleaseUpstream,
    ReplyError,
    ReplyInputRequired,
    StartTimer,
    UpstreamErrorArrived,
    UpstreamResultArrived,
)
from translators.protocol.pushes import PendingPush, refusal
from translators.wire.errors import (
    ClientLimitExceeded,
    RejectionReason,
    UpstreamLimitExceeded,
)
from translators.wire.jsonrpc import JsonObject


class HeldCallState(enum.Enum):
    RUNNING = "running"  # upstream call in flight, a front attempt attached
    COLLECTING = "collecting"  # first push seen, batch window open, attempt attached
    WAITING_CLIENT = "waiting_client"  # InputRequiredResult sent, no attempt attached
    DONE = "done"  # final reply sent, cancelled or expired


_S = HeldCallState


@dataclass(frozen=True)
class Step:
    """What a transition handler decided: the state to move to, and the actions to perform."""

    target: HeldCallState
    actions: list[Action]


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
class CallRecord:
    """What the held call knows, and the steps every transition composes (`timer`, `ask`,
    `finish`, `abandon`...): public, so the transition table (translators/held/machine.py) uses
    them."""

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
    batch_started: float = 0.0
    _tokens: dict[str, int] = field(default_factory=lambda: {"batch": 0, "deadline": 0})

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

    def overflowed(self, fault: UpstreamLimitExceeded, *before: Action) -> Step:
        """`before`, then every held push refused and the upstream call cancelled; the client is
        told `fault`: an attached attempt now, else the retry (the outcome it will find)."""
        if self.attempt is not None:
            return self.abandon("too many pushes", *before, ReplyError(self.attempt, fault=fault))
        actions: list[Action] = [*before, *self.refuse_pending()]
        if not self.upstream_done:
            self.upstream_done = True
            actions += [CancelUpstreamCall("too many pushes"), ReleaseUpstream(discard=True)]
        if self.outcome is None:
            self.outcome = UpstreamErrorArrived(fault=fault)
        return self.stay(actions)

    # ---- steps the transitions compose ----------------------------------------------------

    def timer(self, name: str, delay_s: float) -> StartTimer:
        """Start (or restart) timer `name`; an event carrying an older token is stale."""
        self._tokens[name] += 1
        return StartTimer(name, max(delay_s, 0.0), self._tokens[name])

    def is_current(self, name: str, token: int) -> bool:
        return self._tokens[name] == token

    def finish(self, *actions: Action, discard: bool = False) -> Step:
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

    def abandon(self, reason: str, *actions: Action) -> Step:
        """`actions`, then refuse every held push, cancel the upstream call, end."""
        refusals = self.refuse_pending()
        if not self.upstream_done:
            refusals.append(CancelUpstreamCall(reason))
        return self.finish(*actions, *refusals, discard=not self.upstream_done)

    def refuse_pending(self) -> list[Action]:
        """Every held push refused (as on an abandon), and none held any more."""
        refusals: list[Action] = [
            AnswerPush(p.push_id, refusal(p.method))
            for p in self.pending.values()
            if p.push_id is not None
        ]
        self.pending.clear()
        return refusals

    def stay(self, actions: list[Action] | None = None) -> Step:
        return Step(self.state, actions or [])

    def attached(self) -> int:
        assert self.attempt is not None
        return self.attempt

    def ask(self, attempt: int, keys: list[str], *before: Action) -> Step:
        """`before`, then an InputRequiredResult for `keys`, detached (a new round)."""
        if self.round >= self.limits.max_rounds:
            fault = ClientLimitExceeded(
                f"The call needed more than {self.limits.max_rounds} input rounds",
                "held.max_rounds",
            )
            return self.abandon("too many input rounds", *before, ReplyError(attempt, fault=fault))
        self.round += 1
        self.attempt = None
        requests = {key: self.pending[key].input_request for key in keys}
        return Step(
            _S.WAITING_CLIENT,
            [
                *before,
                CancelTimer("batch"),
                ReplyInputRequired(attempt, self.round, requests),
                self.timer("deadline", self.limits.held_ttl_s),
            ],
        )


__all__ = ["CallRecord", "HeldCallState", "Limits", "Step"]
