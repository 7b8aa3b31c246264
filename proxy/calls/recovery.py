"""Recovery of lost held calls: opt-in re-execution with the client's earlier answers
(docs/operations.md § Recovery).

A retry whose `requestState` is valid (a key in the ring, untampered, this principal and request,
at most `recovery.grace_s` past its expiry) but names no held call here (the bridge restarted, the
call expired, or its owner replica is unreachable) may start the call again upstream when the
policy (translators/held/recovery_policy.py) allows it. The new call is pre-answered with the
answers
sealed in the state plus this retry's `inputResponses`: each push whose content-derived input key
has an answer is answered at once, a new push becomes a normal input round. Every refusal is the
fixed invalid-requestState error to the client, with the policy's reason in the log and /metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NoReturn

import structlog

from config.recovery import RecoverySettings
from proxy.calls.call import Call
from proxy.calls.registry import Continuations, HeldCallRegistry
from proxy.common.front_request import FrontRequest
from proxy.observe.request_families import UpstreamMetrics
from translators.held.recovery_policy import (
    ALREADY_USED,
    NOT_CARRIED,
    OFF,
    TOO_OLD,
    Refusal,
    decide,
    needs_annotations,
)
from translators.held.request_state import StateClaims, unpack_answers
from translators.wire.errors import InvalidRequestState, RejectionReason
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()
# claim() reasons that mean "valid state, no held call here": the cause label of a recovery
CAUSES: Final = {"unknown_held_call": "lost", "expired": "expired"}
OWNER_UNREACHABLE: Final = "owner_unreachable"


@dataclass(frozen=True)
class LostCall:
    """A valid state whose held call is gone: what a re-execution starts from."""

    claims: StateClaims
    answers: JsonObject  # sealed earlier answers, then this retry's inputResponses
    refused: InvalidRequestState  # what the client gets if the policy refuses
    cause: str


class Recovery:
    def __init__(
        self,
        settings: RecoverySettings,
        continuations: Continuations[Call],
        registry: HeldCallRegistry[Call],
        metrics: UpstreamMetrics,
    ) -> None:
        self.settings = settings
        self._continuations = continuations
        self._registry = registry
        self._metrics = metrics

    def lost_call(
        self,
        request: FrontRequest,
        refused: InvalidRequestState,
        responses: JsonObject,
        *,
        owner_unreachable: bool = False,
    ) -> LostCall:
        """The lost call `refused` names, if its state may start a recovery; else raises
        `refused`."""
        if owner_unreachable and refused.reason == RejectionReason.OTHER_REPLICA:
            # what a refusal reports
            refused = InvalidRequestState(RejectionReason.OWNER_UNREACHABLE)
        cause = (
            OWNER_UNREACHABLE
            if refused.reason == RejectionReason.OWNER_UNREACHABLE
            else CAUSES.get(refused.reason)
        )
        if cause is None:
            raise refused
        if self.settings.reexecute == "off":
            self.refuse(OFF, refused)
        try:
            claims = self._continuations.opened(
                request, grace_s=self.settings.grace_s, any_replica=owner_unreachable
            )
        except InvalidRequestState as exc:
            if exc.reason == "expired":
                self.refuse(TOO_OLD, refused)
            raise refused from None
        if self._registry.get(claims.continuation_id) is not None:
            raise refused  # the call is still here (finishing): this is a replay, not a lost call
        if not claims.answers_carried:
            self.refuse(NOT_CARRIED, refused)
        # claimed here, before any await: a concurrent retry of the same state is refused
        # (already_used) while this one recovers; `release` gives it back if nothing started
        if not self._continuations.try_claim(claims):
            self.refuse(ALREADY_USED, InvalidRequestState(RejectionReason.ALREADY_USED))
        lost = LostCall(claims, {**unpack_answers(claims.answers), **responses}, refused, cause)
        if not needs_annotations(self.settings.reexecute, request.method):
            try:
                self.authorize(request, lost, None)
            except InvalidRequestState:
                self.release(lost)
                raise
        return lost

    def authorize(
        self, request: FrontRequest, lost: LostCall, annotations: JsonObject | None
    ) -> None:
        """Apply the policy (`annotations`: the tool's, None if unlisted); raises `lost.refused` if
        it refuses."""
        refusal = decide(
            self.settings.reexecute,
            self.settings.tools,
            request.method,
            request.params,
            annotations,
        )
        if refusal is not None:
            self.refuse(refusal, lost.refused)

    def release(self, lost: LostCall) -> None:
        """The recovery was refused or failed before anything was sent upstream: a later retry of
        the same state may try again."""
        self._continuations.unclaim(lost.claims)

    def started(self, lost: LostCall) -> None:
        """The re-execution is about to start upstream: the state (claimed by `lost_call`) stays
        spent."""
        log.info(
            "held_call_recovered",
            cause=lost.cause,
            round=lost.claims.round,
            answers=len(lost.answers),
        )
        self._metrics.observe_recovered(lost.cause)

    def refuse(self, refusal: Refusal, refused: InvalidRequestState) -> NoReturn:
        log.info(
            "recovery_refused",
            reason=refusal.text,
            policy=self.settings.reexecute,
            state_reason=refused.reason,
        )
        self._metrics.observe_recovery_refused(refusal.code)
        raise refused


__all__ = ["CAUSES", "OWNER_UNREACHABLE", "LostCall", "Recovery"]
