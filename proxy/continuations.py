"""`requestState` for held calls: sealing it, claiming a held call with it, and bounding the
`inputResponses` that come with it (docs/decisions.md § 9)."""

from __future__ import annotations

import json
import os
import time

from config.settings import HeldCallSettings
from proxy.context import FrontRequest
from proxy.held_calls import CallDriver, HeldCallRegistry
from translators.canonical import digest
from translators.errors import ClientLimitExceeded, InvalidRequestState, RejectionReason
from translators.held_call import ReplyInputRequired
from translators.jsonrpc import JsonObject
from translators.request_state import (
    NONCE_SIZE,
    KeyRing,
    StateClaims,
    check_claims,
    keys_digest,
    open_state,
    principal_digest,
    seal,
)
from translators.requests import salient_params


class Continuations:
    def __init__(self, keyring: KeyRing, held: HeldCallSettings, registry: HeldCallRegistry) -> None:
        self._keyring = keyring
        self._held = held
        self._registry = registry

    def check_input_responses(self, responses: JsonObject) -> None:
        """Bound the number and size of `inputResponses` before any held call is touched."""
        held = self._held
        if len(responses) > held.max_input_responses:
            raise ClientLimitExceeded(f"inputResponses has {len(responses)} entries; the limit is "
                                f"{held.max_input_responses} (held.max_input_responses)", "held.max_input_responses")
        for key, value in responses.items():
            size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
            if size > held.max_input_response_bytes:
                raise ClientLimitExceeded(f"inputResponses[{json.dumps(key[:64])}] is {size} bytes of JSON; "
                                          f"the limit is {held.max_input_response_bytes} "
                                          "(held.max_input_response_bytes)", "held.max_input_response_bytes")

    def claim(self, request: FrontRequest) -> tuple[CallDriver, StateClaims]:
        claims = open_state(request.params.get("requestState"), self._keyring)
        check_claims(claims, now_ms=int(time.time() * 1000), principal=request.principal,
                     method=request.method, params_digest=digest(salient_params(request.method, request.params)),
                     replica_id=self._held.replica_id)
        driver = self._registry.lookup(claims.continuation_id)
        refusal = driver.machine.retry_refusal(claims.round)
        if refusal is not None and refusal is not RejectionReason.NOT_WAITING:
            raise InvalidRequestState(refusal)  # early, before the log level is raised; the machine asks
            # again when fed, atomically (a doubled retry is refused there, not_waiting, once it loses)
        if driver.principal != request.principal or claims.keys_digest != keys_digest(driver.issued_keys):
            raise InvalidRequestState(RejectionReason.OTHER_REQUEST)
        return driver, claims

    def seal(self, request: FrontRequest, driver: CallDriver, reply: ReplyInputRequired) -> str:
        claims = StateClaims(
            continuation_id=driver.continuation_id,
            round=reply.round,
            replica_id=self._held.replica_id,
            principal_digest=principal_digest(request.principal),
            method=request.method,
            params_digest=digest(salient_params(request.method, request.params)),
            keys_digest=keys_digest(list(reply.input_requests)),
            expires_at_ms=int((time.time() + self._held.ttl_s) * 1000),
        )
        return seal(claims, self._keyring, os.urandom(NONCE_SIZE))
