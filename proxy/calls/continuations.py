"""`requestState` for held calls: sealing it, claiming a held call with it, and bounding the
`inputResponses` that come with it (docs/decisions.md § 9). A sealed state also carries the
client's earlier answers for a recovery (proxy/calls/recovery.py), within
`recovery.max_answers_bytes`.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from typing import Final

from config.recovery import RecoverySettings
from config.settings import HeldCallSettings
from proxy.calls.call import Call
from proxy.calls.registry import HeldCallRegistry
from proxy.common.front_request import FrontRequest
from translators.held.events import ReplyInputRequired
from translators.held.request_state import (
    NONCE_SIZE,
    KeyRing,
    StateClaims,
    check_claims,
    keys_digest,
    open_state,
    pack_answers,
    principal_digest,
    request_digest,
    seal,
)
from translators.wire.errors import ClientLimitExceeded, InvalidRequestState, RejectionReason
from translators.wire.jsonrpc import JsonObject

MAX_USED: Final = 16_384  # claimed states remembered, so a replay of one cannot start a recovery


class Continuations:
    def __init__(
        self,
        keyring: KeyRing,
        held: HeldCallSettings,
        registry: HeldCallRegistry[Call],
        recovery: RecoverySettings | None = None,
    ) -> None:
        self._keyring = keyring
        self._held = held
        self._registry = registry
        self._recovery = recovery if recovery is not None else RecoverySettings()
        self._used: OrderedDict[tuple[bytes, int], None] = OrderedDict()

    def was_used(self, claims: StateClaims) -> bool:
        """Whether this process already accepted a retry with this state (forgotten on restart)."""
        return (claims.continuation_id, claims.round) in self._used

    def mark_used(self, claims: StateClaims) -> None:
        self._used[(claims.continuation_id, claims.round)] = None
        while len(self._used) > MAX_USED:
            self._used.popitem(last=False)

    def try_claim(self, claims: StateClaims) -> bool:
        """Mark the state used unless it already was, in one step with no await between the check
        and the mark: of N concurrent retries of one state, exactly one gets True."""
        if self.was_used(claims):
            return False
        self.mark_used(claims)
        return True

    def unclaim(self, claims: StateClaims) -> None:
        """Give back a state claimed by `try_claim` whose recovery never started upstream."""
        self._used.pop((claims.continuation_id, claims.round), None)

    def opened(
        self, request: FrontRequest, *, grace_s: float, any_replica: bool = False
    ) -> StateClaims:
        """The state's claims, checked against this request; a recovery accepts `grace_s`
        past its expiry and (its owner replica unreachable) any replica."""
        claims = open_state(request.params.get("requestState"), self._keyring)
        check_claims(
            claims,
            now_ms=int(time.time() * 1000),
            principal=request.principal,
            method=request.method,
            params_digest=request_digest(request.method, request.params),
            replica_id=claims.replica_id if any_replica else self._held.replica_id,
            grace_ms=int(grace_s * 1000),
        )
        return claims

    def check_input_responses(self, responses: JsonObject) -> None:
        """Bound the number and size of `inputResponses` before any held call is touched."""
        held = self._held
        if len(responses) > held.max_input_responses:
            raise ClientLimitExceeded(
                f"inputResponses has {len(responses)} entries; the limit is "
                f"{held.max_input_responses} (held.max_input_responses)",
                "held.max_input_responses",
            )
        for key, value in responses.items():
            size = len(
                json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(
                    "utf-8", "surrogatepass"
                )
            )
            if size > held.max_input_response_bytes:
                raise ClientLimitExceeded(
                    f"inputResponses[{json.dumps(key[:64])}] is {size} bytes of JSON; "
                    f"the limit is {held.max_input_response_bytes} "
                    "(held.max_input_response_bytes)",
                    "held.max_input_response_bytes",
                )

    def claim(self, request: FrontRequest) -> tuple[Call, StateClaims]:
        """The held call a retry's state names, checked (early, before the log level is raised)
        by the call itself against its round, caller and keys (`Call.accept_retry`)."""
        claims = self.opened(request, grace_s=0)
        try:
            call = self._registry.lookup(claims.continuation_id)
            call.accept_retry(claims, request.principal, request.params.get("inputResponses"))
        except InvalidRequestState as refused:
            if refused.reason is RejectionReason.UNKNOWN_HELD_CALL and self.was_used(claims):
                raise InvalidRequestState(RejectionReason.ALREADY_USED) from None  # call ended
            raise
        self.mark_used(claims)
        return call, claims

    def seal(self, request: FrontRequest, call: Call, reply: ReplyInputRequired) -> str:
        answers, carried = self._sealed_answers(call.answers)
        claims = StateClaims(
            continuation_id=call.continuation_id,
            round=reply.round,
            replica_id=self._held.replica_id,
            principal_digest=principal_digest(request.principal),
            method=request.method,
            params_digest=request_digest(request.method, request.params),
            keys_digest=keys_digest(list(reply.input_requests)),
            # from when the round was asked, as the held deadline counts: a retry that finds the
            # held call expired always finds its state expired too (the same refusal reason)
            expires_at_ms=int(((call.asked_at or time.time()) + self._held.ttl_s) * 1000),
            answers=answers,
            answers_carried=carried,
            trace=call.trace_context,
        )
        return seal(claims, self._keyring, os.urandom(NONCE_SIZE))

    def _sealed_answers(self, answers: JsonObject) -> tuple[bytes, bool]:
        """The earlier answers as sealed, or not carried (recovery off, or over the cap). A
        call with no earlier answers (its first round) adds nothing: its token is as long as without
        recovery."""
        if self._recovery.reexecute == "off":
            return b"", False
        packed = pack_answers(answers)
        if len(packed) > self._recovery.max_answers_bytes:
            return b"", False
        return packed, True
