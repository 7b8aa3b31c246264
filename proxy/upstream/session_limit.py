"""Learning whether a Streamable HTTP upstream serves more than one session at a time
(docs/architecture.md, "One upstream session at a time"; docs/decisions.md § 22).

Some servers connect one server object to every HTTP session (`@modelcontextprotocol/server-
everything` 2025.5.12 on TypeScript SDK 1.12): a second `initialize` takes the connection over, the
first session's answers go nowhere, and a `DELETE` of either leaves the server with no connection,
so its next timer-driven notification crashes the process. A legacy client used directly never
meets this (it holds one session); a bridge that pools sessions does.

With `upstream.session_limit = "auto"` the pool learns it the first time it needs a second
Streamable HTTP session beside an open one: once the new session is open, the oldest open one is
pinged (`upstream.session_check_s`). Any answer means the server serves many sessions, and nothing
changes. No answer means *one* (the new session took the server over, as a second direct client
would): the older sessions are retired and forgotten without a `DELETE`, and from then on the
pool keeps at most one session, never closes one with `DELETE` (a replaced session is forgotten;
the next `initialize` takes the server over) and never reaps the idle one. `"one"` declares it;
`"many"` skips the check. Opens that need a session beside others wait while a check runs.

Plain calls never need a second session, but crowded ones run better spread over several
(docs/decisions.md § 31), so a crowded plain lease also learns the limit, without risking a call:
the pool *drains* first. New leases wait at the gate (`gate`) while the calls in flight end (within
`DRAIN_S`); with every session idle, the second session is opened and the older one pinged, and
the gate opens. A takeover then loses nothing, as no call was running. Calls still running after
`DRAIN_S` (a long tool, a held call) leave the limit unknown: the gate opens, the calls share, and
the next try waits `LEARN_BACKOFF_S`, doubling up to an hour.
"""

from __future__ import annotations

import asyncio
from typing import Final, Literal

import structlog

from proxy.upstream.base import PooledSession
from translators.wire.errors import CapacityExceeded, UpstreamFault, UpstreamReturnedError

log = structlog.get_logger(__name__)
PING: Final = "ping"
LIMIT: Final = "upstream.max_sessions"
_KNOWN: Final = {"auto": None, "one": True, "many": False}
DRAIN_S: Final = 0.5  # how long a crowded lease waits for the calls in flight to end, to learn
LEARN_BACKOFF_S: Final = 30.0  # after a drain that did not finish; doubled each time
MAX_LEARN_BACKOFF_S: Final = 3600.0


class SessionLimit:
    """What the pool knows about the upstream's sessions: one at a time, many, or not yet known."""

    def __init__(self, setting: Literal["auto", "one", "many"], check_s: float) -> None:
        self.one: bool | None = _KNOWN[setting]
        self._check_s = check_s
        self.lock = asyncio.Lock()  # held by the first open while the check runs
        # closed (an unset event) while the pool drains to learn the limit: new leases wait on it
        self.gate: asyncio.Event | None = None
        self._learn_after = 0.0  # loop time before which a crowded lease does not try to learn
        self._backoff = LEARN_BACKOFF_S

    def may_learn(self, now: float) -> bool:
        """Whether a crowded plain lease may drain the pool to learn the limit now."""
        return self.one is None and self.gate is None and now >= self._learn_after

    async def pass_gate(self) -> None:
        """Wait while the pool drains to learn the limit (bounded by `DRAIN_S` and the check)."""
        while (gate := self.gate) is not None:
            await gate.wait()

    def close_gate(self) -> None:
        self.gate = asyncio.Event()

    def open_gate(self) -> None:
        gate, self.gate = self.gate, None
        if gate is not None:
            gate.set()

    def postpone(self, now: float, busy: int) -> None:
        """The drain ran out with `busy` sessions still in use: try again later."""
        self._learn_after = now + self._backoff
        log.info(
            "upstream_session_limit_unknown",
            busy_sessions=busy,
            retry_in_s=self._backoff,
            hint="crowded plain calls share a session until the bridge learns that the upstream"
            " serves many (it waits for a moment with no call running); set"
            ' upstream.session_limit = "many" if it does',
        )
        self._backoff = min(self._backoff * 2, MAX_LEARN_BACKOFF_S)

    def cap(self, configured: int) -> int:
        """The most sessions the pool may hold open at once."""
        return 1 if self.one else configured

    async def displaced(self, older: PooledSession) -> bool:
        """With a new session just opened beside `older`: ping `older`, and learn. True when it
        no longer answers (the upstream serves one session at a time)."""
        try:
            async with asyncio.timeout(self._check_s):
                await older.start(PING, {}, headers={}, on_inbound=None).result()
        except UpstreamReturnedError:
            pass  # an error is an answer
        except (TimeoutError, UpstreamFault) as exc:
            self.one = True
            log.warning(
                "upstream_serves_one_session",
                reason=getattr(exc, "message", "an older session stopped answering"),
            )
            return True
        self.one = False
        log.info("upstream_serves_many_sessions")
        return False

    def busy_error(self, configured: int, held: int, wait_s: float) -> CapacityExceeded:
        """The error of a request that found every session in use for `wait_s` (`held` of them
        by interactive calls)."""
        if self.one:
            return CapacityExceeded(
                "The upstream server serves one session at a time (learned when the bridge first"
                " connected to it), and another request holds that session; it did not become"
                f" free within {wait_s:g} s (upstream.session_wait_s): retry later",
                LIMIT,
            )
        by_calls = f", {held} of them held by interactive calls" if held else ""
        return CapacityExceeded(
            f"The bridge already has {configured} upstream sessions in use "
            f"(upstream.max_sessions){by_calls}; none became free within {wait_s:g} s"
            " (upstream.session_wait_s); retry later",
            LIMIT,
        )


__all__ = ["DRAIN_S", "LEARN_BACKOFF_S", "SessionLimit"]
