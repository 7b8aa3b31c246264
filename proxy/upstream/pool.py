"""Which upstream session serves which call (docs/decisions.md §§ 7, 8, 10).

Sessions are keyed by (principal, capability fingerprint, roots) and kept warm for reuse. A session
carries at most one *exclusive* lease (an MRTR-capable call: every push on that session is then its
own) and any number of *shared* leases (lists and other non-interactive requests, and interactive
calls whose pushes the server sends on their own POST stream: attribution.py, decisions.md § 28).
A session that interactive calls share is not leased exclusively until they are done. Messages on a
session's GET stream go to its exclusive lease holder's handler, or else to `on_unowned` (policy).
Limits are enforced by evicting idle sessions first; idle ones are reaped after `session_idle_s`.
Plain calls crowding a session open another of their key (`plain_calls_per_session`, § 31).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping
from typing import Final

import structlog

from config.settings import UpstreamSettings
from proxy.common.clock import Clock, loop_time
from proxy.common.per_principal import BRIDGE_CACHE, Caps, victims
from proxy.upstream.attribution import PushAttribution, route_get_stream
from proxy.upstream.base import (
    STREAMABLE_HTTP,
    Inbound,
    PooledSession,
    SessionOpener,
    TransportInfo,
    UpstreamSession,
)
from proxy.upstream.pool_choice import session_views
from proxy.upstream.pool_entries import (
    EntryRouter,
    EntryState,
    Lease,
    Opening,
    PoolEntry,
    PoolStats,
    SessionKey,
    SessionView,
    UnownedHandler,
    best_entry,
    idle_entry,
)
from proxy.upstream.pool_sizing import PoolSizing
from proxy.upstream.session_limit import SessionLimit
from translators.wire.errors import (
    BridgeError,
    CapacityExceeded,
    UpstreamUnavailable,
)
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)

MAX_CONCURRENT_OPENS: Final = 16  # upstream initialize handshakes in flight at once


class UpstreamPool(PoolSizing):
    """Warm legacy sessions per (principal, fingerprint), with limits and idle reaping."""

    def __init__(
        self,
        settings: UpstreamSettings,
        opener: SessionOpener,
        *,
        on_unowned: UnownedHandler,
        transport: TransportInfo = STREAMABLE_HTTP,
        clock: Clock | None = None,
        limit: SessionLimit | None = None,
    ) -> None:
        """`clock` times idleness, eviction and the backoffs (proxy/common/clock.py); waits for a
        session stay on the loop's timers. `limit`: what the bridge knows of the upstream's
        sessions, shared with the session opener's negotiation (the settings' if not given)."""
        self._settings = settings
        # the running loop's own clock once started (read on every lease: no wrapper around it)
        self._clock: Clock = loop_time if clock is None else clock
        self._own_clock = clock is not None
        self._opener = opener
        self.attribution = PushAttribution(enabled=settings.share_attributed_calls)
        self.transport = transport
        self._open_slots = asyncio.Semaphore(MAX_CONCURRENT_OPENS)
        self.limit = SessionLimit.of(settings) if limit is None else limit
        # what leases waiting for room wait on (made by the first of them), set at the next release
        self._room: asyncio.Event | None = None
        # a plain lease opens another session of its key past this many calls on the least used
        self._spread_at = settings.plain_calls_per_session or sys.maxsize
        self._spread_after = 0.0  # `clock` time: a failed extra session pauses spreading until then
        self._on_unowned = on_unowned
        self._entries: list[PoolEntry] = []
        self._opening: dict[SessionKey, Opening] = {}
        self._spreading: dict[SessionKey, int] = {}  # extra sessions opening, by key
        self._reserved: dict[str, int] = {}  # opens in progress, by principal
        self._caps = Caps(
            settings.max_sessions_per_principal,
            settings.max_sessions,
            "upstream.max_sessions_per_principal",
            "upstream.max_sessions",
            "upstream sessions in use",
            "finish or cancel some calls and retry",
        )
        self._reaper: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._closed = False
        self._created_total = 0
        self._reused_total = 0
        self._retired_reinitialized = 0
        # leases that began waiting, for room or at the gate (a wait after a wake-up counts again):
        # a test awaits a waiter's turn by it instead of sleeping
        self.waits_total = 0
        self.most_open = 0  # the most sessions open at once so far
        # the last session that failed to open: (error class, time.time()); the status page
        self.last_error: tuple[str, float] | None = None

    async def start(self) -> None:
        """Start the idle reaper (a task the pool owns until `aclose()`)."""
        if not self._own_clock:
            self._clock = asyncio.get_running_loop().time
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(
                self._reap_loop(), name="upstream-pool-reaper"
            )

    async def aclose(self) -> None:
        self._closed = True
        self._stopping.set()
        if self._reaper is not None:
            await asyncio.wait({self._reaper})
        entries, self._entries = self._entries, []
        await self._close_all(entries, "pool_closed")
        await self.limit.aclose()

    def key_of(self, session: UpstreamSession) -> SessionKey | None:
        """The key of an open session (for routing its session-wide notifications)."""
        return next((entry.key for entry in self._entries if entry.session is session), None)

    def share(self, session: UpstreamSession) -> Lease | None:
        """A shared lease on exactly `session`, or None when it cannot serve any more."""
        entry = next((e for e in self._entries if e.session is session and e.can_serve), None)
        return None if entry is None else self._grant(entry, exclusive=False)

    def retire(self, session: UpstreamSession) -> None:
        """Never hand `session` out again; it is closed when its last lease is released (or
        reaped). Not the one session of a one-session upstream while it lives (session_limit.py)."""
        if self.limit.one and session.is_alive:
            return
        for entry in self._entries:
            if entry.session is session:
                entry.retire()

    def stats(self) -> PoolStats:
        reinitialized = sum(entry.session.reinitialized_count for entry in self._entries)
        return PoolStats(
            sessions_open=len(self._entries),
            created_total=self._created_total,
            reused_total=self._reused_total,
            reinitialized_total=self._retired_reinitialized + reinitialized,
        )

    def sessions(self, limit: int | None = None) -> list[SessionView]:
        """What the status page shows of each open session (the first `limit`): no key material,
        no session id."""
        entries = self._entries if limit is None else self._entries[:limit]
        return session_views(entries, self._clock())

    async def lease(
        self,
        key: SessionKey,
        capabilities: JsonObject,
        *,
        exclusive: bool,
        headers: Mapping[str, str],
        wait: bool = True,
        prefer: UpstreamSession | None = None,
        label: str | None = None,
    ) -> Lease:
        """A session for `key`: `prefer` if of that key and free, else a warm one that fits, else a
        new one; with all `max_sessions` in use, waits up to `session_wait_s` (if `wait`).

        `label` names an interactive call asking for an exclusive lease (attribution.call_label):
        once the upstream is known to send that call's pushes on its own POST stream, the call
        gets a shared lease instead, on a session other such calls of `key` may share."""
        label = label if exclusive else None  # only an interactive call's lease is labelled
        if label is not None and self._attributes(label):
            exclusive, attributed = False, label
        else:
            attributed = None
        deadline: float | None = None
        while True:
            self._check_open()
            if self.limit.gate is not None:
                self.waits_total += 1
                await self.limit.pass_gate()  # the pool drains to learn the session limit
                continue
            entry = best_entry(self._entries, key, exclusive, prefer, attributed)
            if entry is None and self.limit.one:
                entry = idle_entry(self._entries, key)  # the one session, for this key now
            if entry is not None:
                held = exclusive or attributed is not None
                if entry.shared >= self._spread_at and self._may_spread(key, held, prefer):
                    spread = await (
                        self._spread(key, capabilities, headers)
                        if self.limit.one is False
                        else self._learn_then_spread(key, capabilities, headers)
                    )
                    if spread is not None:
                        return spread
                    continue  # it could not open: share, as before
                self._reused_total += 1
                return self._grant(entry, exclusive=exclusive, label=label)
            opening = None if exclusive else self._opening.get(key)
            if opening is None:
                try:
                    return await self._open(
                        key, capabilities, exclusive=exclusive, headers=headers, label=label
                    )
                except CapacityExceeded:
                    if not wait:
                        raise
                    if deadline is None:
                        deadline = asyncio.get_running_loop().time() + self._settings.session_wait_s
                    await self._wait_for_room(deadline)
                    continue
            await opening.done.wait()  # single flight: share the session being opened
            if opening.error is not None:
                raise opening.error

    async def _wait_for_room(self, deadline: float) -> None:
        """Wait until a lease is released or a session closes, or raise the limit error at
        `deadline`."""
        room = self._room = self._room or asyncio.Event()
        self.waits_total += 1
        try:
            async with asyncio.timeout_at(deadline):
                await room.wait()
        except TimeoutError:
            raise self._busy_error() from None

    def _attributes(self, label: str) -> bool:
        """Whether a call of `label` may share its session: the transport gives each call a stream
        of its own and the label's pushes were seen on it only."""
        return self.transport.streams_per_call and self.attribution.qualifies(label)

    def _busy_error(self) -> CapacityExceeded:
        held, settings = sum(1 for e in self._entries if e.exclusive is not None), self._settings
        return self.limit.busy_error(settings.max_sessions, held, settings.session_wait_s)

    def _room_made(self) -> None:
        """Wake every lease waiting for room (each then tries again, in the order they began
        waiting); with none waiting there is no event, and nothing to do."""
        if self._room is not None:
            self._room.set()
            self._room = None

    # -- granting and room -------------------------------------------------------------------------

    def _grant(self, entry: PoolEntry, *, exclusive: bool, label: str | None = None) -> Lease:
        lease = Lease(entry, self._release, self._on_unowned, exclusive=exclusive, label=label)
        if exclusive:
            entry.exclusive = lease
        else:
            entry.shared += 1
            if label is not None:
                entry.add_attributed(label)
        entry.idle_since = None
        return lease

    def _reserve(self, principal: str) -> list[PoolEntry]:
        """Claim room for one more session, evicting idle ones if needed (the sessions are the
        bridge's own cache: any principal's idle one may go at the total cap); raises a
        `LimitExceeded`."""
        caps, now = self.session_caps(), self._clock()
        chosen = victims(self._entries, principal, caps, BRIDGE_CACHE, now, self._reserved)
        for victim in chosen:
            self._entries.remove(victim)
        self._reserved[principal] = self._reserved.get(principal, 0) + 1
        return chosen

    # -- opening and closing -----------------------------------------------------------------------

    async def _open(
        self,
        key: SessionKey,
        capabilities: JsonObject,
        *,
        exclusive: bool,
        headers: Mapping[str, str],
        label: str | None = None,
        spread: bool = False,
    ) -> Lease:
        victims = self._reserve(key.principal)
        # a first shared session is single-flight; an extra one (`spread`) is nobody's to wait for
        opening = None if exclusive or spread else self._opening.setdefault(key, Opening())
        try:
            await self._close_all(victims, "evicted")
            if self.limit.one is None and self._entries:
                async with self.limit.lock:  # learning the limit (session_limit.py): one at a time
                    return await self._open_beside(key, capabilities, exclusive, headers, label)
            router = EntryRouter(self._route)
            # a burst opens a few at a time; each open's timeout starts here
            async with self._open_slots:
                session = await self._opener(capabilities, headers, router)
            return await self._admit(key, session, router, exclusive=exclusive, label=label)
        except BridgeError as exc:
            if opening is not None:
                opening.error = exc
            self.last_error = (type(exc).__name__, time.time())
            raise
        finally:
            self._reserved[key.principal] -= 1
            if not self._reserved[key.principal]:
                del self._reserved[key.principal]
            if opening is not None:
                del self._opening[key]
                opening.done.set()
            self._room_made()

    async def _open_beside(
        self,
        key: SessionKey,
        capabilities: JsonObject,
        exclusive: bool,
        headers: Mapping[str, str],
        label: str | None,
    ) -> Lease:
        """Open a session beside others; if the older ones stop answering (session_limit.py),
        the upstream serves one session: they are retired (forgotten, not deleted)."""
        router = EntryRouter(self._route)
        session = await self._opener(capabilities, headers, router)
        older = [e for e in self._entries if e.can_serve] if self.limit.learns else []
        if older and await self.limit.displaced(older[0].session):
            for entry in older:
                entry.retire()
            await self._close_all([e for e in older if e.is_idle], "displaced")
            self._entries = [e for e in self._entries if e.state is not EntryState.CLOSED]
        return await self._admit(key, session, router, exclusive=exclusive, label=label)

    async def _admit(
        self,
        key: SessionKey,
        session: PooledSession,
        router: EntryRouter,
        *,
        exclusive: bool,
        label: str | None = None,
    ) -> Lease:
        if self._closed:
            await session.aclose()
            raise UpstreamUnavailable("The bridge is shutting down", public=True)
        entry = PoolEntry(key, session, self._clock())
        self._entries.append(entry)
        self.most_open = max(self.most_open, len(self._entries))
        self._created_total += 1
        grant = self._grant(entry, exclusive=exclusive, label=label)
        router.bind(entry)
        return grant

    async def _release(self, lease: Lease, entry: PoolEntry, discard: bool) -> None:
        if lease.exclusive:
            if entry.exclusive is lease:
                entry.exclusive = None
            if (
                lease.label is not None
                and lease.pushed_related
                and not (discard or lease.pushed_unrelated)
            ):
                self.attribution.observed_own_session(lease.label)
        else:
            entry.shared -= 1
            if lease.label is not None:
                entry.remove_attributed(lease.label)
        # the one session of a one-session upstream is kept while it lives (session_limit.py)
        if not entry.session.is_alive or (discard and not self.limit.one):
            entry.retire()
        self._room_made()  # a shared lease may now be exclusive, an idle session evictable
        if not entry.is_idle:
            return
        if entry.state is not EntryState.SERVING:
            if entry in self._entries:
                self._entries.remove(entry)
            await self._close_all([entry], "discarded")
        else:
            entry.idle_since = self._clock()

    async def _close_all(self, entries: list[PoolEntry], reason: str) -> None:
        entries = [entry for entry in entries if entry.state is not EntryState.CLOSED]
        if not entries:
            return
        for entry in entries:
            entry.state = EntryState.CLOSED
            self._retired_reinitialized += entry.session.reinitialized_count
        self._room_made()
        results = await asyncio.gather(
            *(self.limit.let_go(e.session) for e in entries), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                _log.warning("upstream_session_close_failed", error=type(result).__name__)
        _log.info(
            "upstream_sessions_closed", reason=reason, count=len(entries), open=len(self._entries)
        )

    # -- routing and reaping -----------------------------------------------------------------------

    def _route(self, entry: PoolEntry, inbound: Inbound) -> None:
        route_get_stream(entry, inbound, self.attribution, self._on_unowned)

    def _check_open(self) -> None:
        if self._closed:
            raise UpstreamUnavailable(
                "The bridge is shutting down; no new upstream sessions", public=True
            )


__all__ = ["Lease", "PoolStats", "SessionKey", "UnownedHandler", "UpstreamPool"]
