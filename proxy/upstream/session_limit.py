"""How many sessions the upstream serves at a time: one, many, or not known yet
(docs/architecture.md, "One upstream session at a time"; docs/decisions.md § 22). The one home of
that fact: the pool, the revision negotiation, the era probe, the roots probe and `check` all ask
it before they open, close or keep a session.

Some servers connect one server object to every HTTP session (`@modelcontextprotocol/server-
everything` 2025.5.12 on TypeScript SDK 1.12): a second `initialize` takes the connection over, the
first session's answers go nowhere, and closing either (a `DELETE`, or over HTTP+SSE the connection
itself) leaves the server with no connection, so its next timer-driven notification crashes the
process. A legacy client used directly never meets this (it holds one session); a bridge that
pools sessions does.

With `upstream.session_limit = "auto"` the bridge learns it the first time a second session opens
beside an open one, whoever opens it (the pool for another caller or other capabilities, the
revision negotiation reopening a session in the right shape, the roots probe, `check`): once the
new session is open, the older one is pinged (`upstream.session_check_s`). Any answer means the
server serves many sessions, and nothing changes. No answer means *one* (the new session took the
server over, as a second direct client would): the older sessions are let go without ending them
upstream (`let_go`), and from then on the bridge keeps that one session for as long as it runs:
every request of every caller uses it in turn (pool_entries.py, `idle_entry`), it is never closed,
reaped, evicted or replaced while it answers, the negotiation keeps a session in the shape of
another revision rather than open a second one, and the roots probe is not run. `"one"` declares
it, and so does `upstream.max_sessions = 1` for an HTTP upstream (`one_session_configured`);
`"many"` skips the check. A stdio upstream's sessions are processes of their own: never
one-session unless declared, never checked. Opens that need a session beside others wait while a
check runs.

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

from config.settings import UpstreamSettings
from proxy.upstream.base import PooledSession
from translators.wire.errors import CapacityExceeded, UpstreamFault, UpstreamReturnedError

log = structlog.get_logger(__name__)
PING: Final = "ping"
LIMIT: Final = "upstream.max_sessions"
_KNOWN: Final = {"auto": None, "one": True, "many": False}
DRAIN_S: Final = 0.5  # how long a crowded lease waits for the calls in flight to end, to learn
LEARN_BACKOFF_S: Final = 30.0  # after a drain that did not finish; doubled each time
MAX_LEARN_BACKOFF_S: Final = 3600.0


def one_session_configured(settings: UpstreamSettings) -> bool:
    """Whether the settings allow one upstream session at a time: `upstream.session_limit = "one"`,
    or `upstream.max_sessions = 1` for an HTTP upstream (a stdio upstream's sessions are processes
    of their own, each its own server)."""
    return settings.session_limit == "one" or (
        settings.url is not None and settings.max_sessions == 1
    )


class SessionLimit:
    """What the bridge knows about the upstream's sessions: one at a time, many, or not yet known;
    and the sessions it let go on a one-session upstream but must not close while it runs."""

    def __init__(
        self,
        setting: Literal["auto", "one", "many"],
        check_s: float,
        *,
        learns: bool = True,
        by_max_sessions: bool = False,
    ) -> None:
        """`learns`: whether a second session beside another is checked (an HTTP upstream's
        sessions may share one server object; a stdio upstream's are processes of their own);
        `by_max_sessions`: "one" because `upstream.max_sessions = 1`."""
        self.one: bool | None = _KNOWN[setting]
        self.learned = False  # whether `one` was learned rather than configured
        self.learns = learns
        self._by_max_sessions = by_max_sessions
        self._check_s = check_s
        self._kept: list[PooledSession] = []  # let go, but closing them would end the server's
        self.lock = asyncio.Lock()  # held by the first open while the check runs
        # closed (an unset event) while the pool drains to learn the limit: new leases wait on it
        self.gate: asyncio.Event | None = None
        self._learn_after = 0.0  # loop time before which a crowded lease does not try to learn
        self._backoff = LEARN_BACKOFF_S

    @classmethod
    def of(cls, settings: UpstreamSettings) -> SessionLimit:
        """The limit the settings declare (`one_session_configured`), else `session_limit`."""
        one = one_session_configured(settings)
        return cls(
            "one" if one else settings.session_limit,
            settings.session_check_s,
            learns=settings.url is not None,
            by_max_sessions=one and settings.session_limit != "one",
        )

    def describe(self) -> str:
        """What `check` and the status page say of it."""
        if self.one is None:
            return "not known yet"
        served = "one at a time" if self.one else "many"
        return f"{served} ({'learned' if self.learned else 'configured'})"

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
        """With a new session just opened beside `older`: whether the new one took the server
        over, so that `older` no longer serves. Known at once once learned or declared; else
        `older` is pinged, and the answer (or none) learned."""
        if self.one is not None or not self.learns:
            return bool(self.one)
        self.learned = True
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

    async def let_go(self, session: PooledSession) -> None:
        """Close a session the bridge no longer uses. On a one-session upstream it is not ended
        upstream (no `DELETE`: the server would be left unconnected), and where closing it would
        end it all the same (HTTP+SSE: the server may stop when any of its connections closes) it
        is kept open, unused, until the bridge stops (`aclose`). At most the sessions open when
        the limit was learned are kept: none is opened beside the one afterwards."""
        if self.one and not session.forget_on_close() and session.is_alive:
            self._kept.append(session)
            return
        await session.aclose()

    async def aclose(self) -> None:
        """The bridge stops: close the sessions kept open."""
        kept, self._kept = self._kept, []
        await asyncio.gather(*(session.aclose() for session in kept), return_exceptions=True)

    def busy_error(self, configured: int, held: int, wait_s: float) -> CapacityExceeded:
        """The error of a request that found every session in use for `wait_s` (`held` of them
        by interactive calls)."""
        if self.one and not self._by_max_sessions:
            how = (
                "learned when the bridge first connected to it"
                if self.learned
                else 'upstream.session_limit = "one"'
            )
            return CapacityExceeded(
                f"The upstream server serves one session at a time ({how}), and another request"
                f" holds that session; it did not become free within {wait_s:g} s"
                " (upstream.session_wait_s): retry later",
                LIMIT,
            )
        by_calls = f", {held} of them held by interactive calls" if held else ""
        return CapacityExceeded(
            f"The bridge already has {configured} upstream sessions in use "
            f"(upstream.max_sessions){by_calls}; none became free within {wait_s:g} s"
            " (upstream.session_wait_s); retry later",
            LIMIT,
        )


__all__ = ["DRAIN_S", "LEARN_BACKOFF_S", "SessionLimit", "one_session_configured"]
