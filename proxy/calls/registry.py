"""The registry of live held calls (proxy/calls/call.py, each one's owner) and their
`requestState`.

`HeldCallRegistry`: lookup by `continuation_id`, the held-call caps, the round counter, shutdown,
and what the bridge learned about how each tool's pushes arrive (translators/held/push_ledger.py).

`Continuations`: sealing a held call's `requestState`, claiming the held call a retry's state
names, and bounding the `inputResponses` that come with it (docs/decisions.md § 9). A sealed state
also carries the client's earlier answers for a recovery (proxy/calls/recovery.py), within
`recovery.max_answers_bytes`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections import OrderedDict
from collections.abc import Iterator
from operator import attrgetter
from typing import Final, Generic, Protocol, TypeVar

from config.recovery import RecoverySettings
from config.settings import HeldCallSettings
from proxy.common.front_request import FrontRequest
from proxy.common.per_principal import PrincipalCounts
from translators.held.events import ReplyInputRequired
from translators.held.machine import HeldCall, HeldCallState
from translators.held.push_ledger import BatchSizes
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
from translators.wire.errors import (
    ClientLimitExceeded,
    InvalidRequestState,
    RejectionReason,
    ShuttingDown,
)
from translators.wire.jsonrpc import JsonObject

HELD_ABANDON_S = 5.0  # longest an abandoned call waits for its upstream refusals and cancel


class HeldEntry(Protocol):
    """What the registry needs of a live call (`proxy.calls.call.Call` is one)."""

    continuation_id: bytes
    principal: str
    started: float  # monotonic seconds

    @property
    def machine(self) -> HeldCall: ...

    def abort(self, reason: str) -> None: ...

    async def abandon(self, reason: str, wait_s: float = HELD_ABANDON_S) -> None: ...


Entry = TypeVar("Entry", bound=HeldEntry)


_STARTED: Final = attrgetter("started")


class SealedEntry(HeldEntry, Protocol):
    """What sealing and claiming read of a held call (`Call` is one)."""

    answers: JsonObject  # every answer the client gave, sealed for a recovery
    asked_at: float  # wall clock of the last InputRequiredResult
    trace_context: bytes

    def accept_retry(self, claims: StateClaims, principal: str, responses: object) -> None: ...


Sealed = TypeVar("Sealed", bound=SealedEntry)


class HeldCallRegistry(Generic[Entry]):
    """Live MRTR-capable calls by `continuation_id`; the caps count only held ones
    (`admit_held`), in `held`: the bridge's one count of calls waiting for their client's input,
    which the reverse direction shares (proxy/reverse/rounds.py)."""

    def __init__(self, held: PrincipalCounts, *, batch_sizes: BatchSizes | None = None) -> None:
        self._calls: dict[bytes, Entry] = {}
        self._held = held  # the calls that have asked their client for input, by principal
        self.closing = False  # shutdown: no call may become held any more
        # the end of the shutdown grace: the calls still in progress are being abandoned, with
        # this reason (plain calls by their request's cancellation: proxy/calls/call.py)
        self.abort_reason: str | None = None
        # ids of the front attempts at calls, unique in the process (`next(attempt_ids)`)
        self.attempt_ids = itertools.count(1)
        # first attempts running plain, no push yet (proxy/calls/call.py)
        self.plain_calls = 0
        self.rounds_total = 0
        # pushes per tool and round: declared (held.batch_sizes) or learned from earlier calls
        self.batch_sizes = batch_sizes if batch_sizes is not None else BatchSizes()

    def next_attempt_id(self) -> int:
        return next(self.attempt_ids)

    def admit_held(self, driver: Entry) -> None:
        """Count `driver` as held (it asks its client for input) unless a cap is reached. A call is
        counted from its first InputRequiredResult until it ends; calls that never ask are not."""
        if driver.continuation_id in self._held:
            return
        if self.closing:
            raise ShuttingDown()
        self._held.admit(driver.continuation_id, driver.principal)

    def add(self, driver: Entry) -> None:
        self._calls[driver.continuation_id] = driver

    def get(self, continuation_id: bytes) -> Entry | None:
        return self._calls.get(continuation_id)

    def lookup(self, continuation_id: bytes) -> Entry:
        driver = self._calls.get(continuation_id)
        if driver is None:
            raise InvalidRequestState(RejectionReason.UNKNOWN_HELD_CALL)
        return driver

    def remove(self, driver: Entry) -> None:
        self._calls.pop(driver.continuation_id, None)
        self._held.release(driver.continuation_id)

    def note_round(self) -> None:
        self.rounds_total += 1

    def held_now(self) -> int:
        return sum(
            1 for d in self._calls.values() if d.machine.state is HeldCallState.WAITING_CLIENT
        )

    def __len__(self) -> int:
        """Calls with held-call state (a driver): those that received a push."""
        return len(self._calls)

    def in_progress(self) -> int:
        """Every interactive call in progress: the ones with a driver, and the plain ones."""
        return len(self._calls) + self.plain_calls

    def calls(self, limit: int | None = None) -> list[Entry]:
        """The live calls, oldest first; with `limit`, the `limit` oldest (the status page)."""
        oldest_first = sorted(self._calls.values(), key=_STARTED)  # nearly sorted already
        return oldest_first if limit is None else oldest_first[:limit]

    def __iter__(self) -> Iterator[Entry]:
        """The live calls, in the order they got their held-call state."""
        return iter(self._calls.values())

    def abort_all(self, reason: str) -> None:
        """End of the shutdown grace: abort every call, attached ones included."""
        self.abort_reason = reason
        for driver in list(self._calls.values()):
            driver.abort(reason)

    async def abandon_waiting(self) -> None:
        """Shutdown: abandon every call that no request is attached to (its retry would be
        refused)."""
        waiting = [d for d in self._calls.values() if d.machine.attempt is None]
        await asyncio.gather(
            *(d.abandon("bridge shutting down") for d in waiting), return_exceptions=True
        )

    async def aclose(self, wait_s: float = HELD_ABANDON_S) -> None:
        """Abandon every call left, waiting at most `wait_s` for their upstream refusals and
        cancels."""
        drivers = list(self._calls.values())
        if drivers:
            await asyncio.wait(
                [asyncio.ensure_future(d.abandon("bridge shutting down", wait_s)) for d in drivers],
                timeout=wait_s,
            )
        for driver in list(self._calls.values()):
            self._held.release(driver.continuation_id)
        self._calls.clear()


MAX_USED: Final = 16_384  # claimed states remembered, so a replay of one cannot start a recovery


class Continuations(Generic[Sealed]):
    """`requestState` for the held calls of `registry`: sealing it, claiming a held call with it,
    and bounding the `inputResponses` that come with it."""

    def __init__(
        self,
        keyring: KeyRing,
        held: HeldCallSettings,
        registry: HeldCallRegistry[Sealed],
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

    def claim(self, request: FrontRequest) -> tuple[Sealed, StateClaims]:
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

    def seal(self, request: FrontRequest, call: Sealed, reply: ReplyInputRequired) -> str:
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


__all__ = [
    "HELD_ABANDON_S",
    "MAX_USED",
    "Continuations",
    "HeldCallRegistry",
    "HeldEntry",
    "SealedEntry",
]
