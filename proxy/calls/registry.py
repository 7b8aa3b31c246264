"""The registry of live held calls (proxy/calls/call.py, each one's owner): lookup by
`continuation_id`, the held-call caps, the round counter, shutdown, and what the bridge learned
about how each tool's pushes arrive (translators/held/push_batches.py).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Generic, Protocol, TypeVar

from proxy.common.per_principal import PrincipalCounts
from translators.held.machine import HeldCall, HeldCallState
from translators.held.push_batches import BatchSizes
from translators.wire.errors import InvalidRequestState, RejectionReason, ShuttingDown

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

    def calls(self) -> list[Entry]:
        """The live calls, oldest first (the status page)."""
        return sorted(self._calls.values(), key=lambda driver: driver.started)

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


__all__ = ["HELD_ABANDON_S", "HeldCallRegistry", "HeldEntry"]
