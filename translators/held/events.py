"""Events and actions of the held-call machine (`translators.held.machine`), named as in
docs/decisions.md § 2: events are past-tense facts, actions are imperatives."""

from __future__ import annotations

from dataclasses import dataclass

from translators.protocol.pushes import PendingPush, PushAnswer
from translators.wire.errors import BridgeError
from translators.wire.jsonrpc import JsonObject

# ---- events (past-tense facts) -------------------------------------------------------------


@dataclass(frozen=True)
class UpstreamPushArrived:
    push: PendingPush


@dataclass(frozen=True)
class UpstreamPushCancelled:
    push_id: int | str


@dataclass(frozen=True)
class UpstreamResultArrived:
    result: JsonObject


@dataclass(frozen=True)
class UpstreamErrorArrived:
    """`error` is a legacy JSON-RPC error object, or `fault` a bridge-side failure."""

    error: JsonObject | None = None
    fault: BridgeError | None = None


@dataclass(frozen=True)
class BatchWindowClosed:
    token: int


@dataclass(frozen=True)
class ClientRetried:
    attempt: int
    round: int
    input_responses: JsonObject


@dataclass(frozen=True)
class ClientDisconnected:
    attempt: int


@dataclass(frozen=True)
class DeadlinePassed:
    token: int


Event = (
    UpstreamPushArrived
    | UpstreamPushCancelled
    | UpstreamResultArrived
    | UpstreamErrorArrived
    | BatchWindowClosed
    | ClientRetried
    | ClientDisconnected
    | DeadlinePassed
)

# ---- actions (imperatives) ------------------------------------------------------------------


@dataclass(frozen=True)
class ReplyInputRequired:
    attempt: int
    round: int
    input_requests: dict[str, JsonObject]


@dataclass(frozen=True)
class ReplyResult:
    attempt: int
    result: JsonObject


@dataclass(frozen=True)
class ReplyError:
    attempt: int
    error: JsonObject | None = None  # legacy error object from upstream
    fault: BridgeError | None = None  # bridge-side error


@dataclass(frozen=True)
class AnswerPush:
    push_id: int | str
    answer: PushAnswer


@dataclass(frozen=True)
class CancelUpstreamCall:
    reason: str


@dataclass(frozen=True)
class ReissueUpstreamCall:
    """Re-send the original call (after URL elicitations for a -32042 were completed)."""


@dataclass(frozen=True)
class StartTimer:
    name: str  # "batch" or "deadline"
    delay_s: float
    token: int


@dataclass(frozen=True)
class CancelTimer:
    name: str


@dataclass(frozen=True)
class ReleaseUpstream:
    """The upstream call is over: return the session lease (`discard` after a cancellation).
    `final`: the held call is over too (the driver then leaves the registry); not final when the
    call ended while its client has yet to retry (the retry gets the stored outcome)."""

    discard: bool = False
    final: bool = False


@dataclass(frozen=True)
class NoteBatchSize:
    """The call's pushes for input round `round` came `size` together: remember it for the next
    call of the same tool (translators/held/push_ledger.py)."""

    round: int
    size: int


@dataclass(frozen=True)
class ReportBug:
    detail: str


Action = (
    ReplyInputRequired
    | ReplyResult
    | ReplyError
    | AnswerPush
    | CancelUpstreamCall
    | ReissueUpstreamCall
    | StartTimer
    | CancelTimer
    | NoteBatchSize
    | ReleaseUpstream
    | ReportBug
)


__all__ = [
    "Action",
    "AnswerPush",
    "BatchWindowClosed",
    "CancelTimer",
    "CancelUpstreamCall",
    "ClientDisconnected",
    "ClientRetried",
    "DeadlinePassed",
    "Event",
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
