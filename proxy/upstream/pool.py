"""Which upstream session serves which call (docs/decisions.md §§ 7, 8, 10).

Sessions are keyed by (principal, capability fingerprint, roots) and kept warm for reuse. A session
carries at most one *exclusive* lease (an MRTR-capable call: every push on that session is then its
own) and any number of *shared* leases (lists and other non-interactive requests). Messages on a
session's GET stream go to its exclusive lease holder's handler, or else to `on_unowned` (policy).
Limits are enforced by evicting idle sessions first; idle ones are reaped after `session_idle_s`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Final

import structlog

from config.settings import UpstreamSettings
from proxy.upstream.base import (
    STREAMABLE_HTTP,
    Inbound,
    PooledSession,
    SessionOpener,
    TransportInfo,
    UpstreamSession,
)
from proxy.upstream.http.call import invoke_handler
from proxy.upstream.pool_entries import (
    EntryRouter,
    EntryState,
    Lease,
    Opening,
    PoolEntry,
    PoolStats,
    SessionKey,
    SessionView,
)
from proxy.upstream.session_limit import SessionLimit, forget_on_close
from translators.wire.errors import (
    BridgeError,
    CapacityExceeded,
    ClientLimitExceeded,
    UpstreamUnavailable,
)
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)

UnownedHandler = Callable[[UpstreamSession, Inbound], None]
MAX_CONCURRENT_OPENS: Final = 16  # upstream initialize handshakes in flight at once
TOTAL_LIMIT: Final = "upstream.max_sessions"


class UpstreamPool:
    """Warm legacy sessions per (principal, fingerprint), with limits and idle reaping."""

    def __init__(
        self,
        settings: UpstreamSettings,
        opener: SessionOpener,
        *,
        on_unowned: UnownedHandler,
        transport: TransportInfo = STREAMABLE_HTTP,
    ) -> None:
        self._settings = settings
        self._opener = opener
        self.transport = transport
        self._open_slots = asyncio.Semaphore(MAX_CONCURRENT_OPENS)
        self.limit = SessionLimit(settings.session_limit, settings.session_check_s)
        # set (and replaced) whenever a session may have become available
        self._room = asyncio.Event()
        self._on_unowned = on_unowned
        self._entries: list[PoolEntry] = []
        self._opening: dict[SessionKey, Opening] = {}
        self._reserved: dict[str, int] = {}  # opens in progress, by principal
        self._reaper: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._closed = False
        self._created_total = 0
        self._reused_total = 0
        self._retired_reinitialized = 0
        # the last session that failed to open: (error class, time.time()); the status page
        self.last_error: tuple[str, float] | None = None

    async def start(self) -> None:
        """Start the idle reaper (a task the pool owns until `aclose()`)."""
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

    def key_of(self, session: UpstreamSession) -> SessionKey | None:
        """The key of an open session (for routing its session-wide notifications)."""
        return next((entry.key for entry in self._entries if entry.session is session), None)

    def share(self, session: UpstreamSession) -> Lease | None:
        """A shared lease on exactly `session`, or None when it cannot serve any more."""
        entry = next((e for e in self._entries if e.session is session and e.can_serve), None)
        return None if entry is None else self._grant(entry, exclusive=False)

    def retire(self, session: UpstreamSession) -> None:
        """Never hand `session` out again; it is closed when its last lease is released (or
        reaped)."""
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

    def sessions(self) -> list[SessionView]:
        """What the status page shows of each open session: no key material, no session id."""
        now = asyncio.get_running_loop().time()
        return [
            SessionView(
                principal=entry.key.principal,
                revision=entry.session.revision.version,
                state=entry.state.value,
                exclusive=entry.exclusive is not None,
                shared=entry.shared,
                idle_s=None if entry.idle_since is None else round(now - entry.idle_since, 1),
            )
            for entry in self._entries
        ]

    async def lease(
        self,
        key: SessionKey,
        capabilities: JsonObject,
        *,
        exclusive: bool,
        headers: Mapping[str, str],
        wait: bool = True,
        prefer: UpstreamSession | None = None,
    ) -> Lease:
        """A session for `key`: `prefer` if of that key and free, else a warm one that fits, else a
        new one; with all `max_sessions` in use, waits up to `session_wait_s` (if `wait`)."""
        deadline: float | None = None
        while True:
            self._check_open()
            entry = self._find(key, exclusive=exclusive, prefer=prefer)
            if entry is not None:
                self._reused_total += 1
                return self._grant(entry, exclusive=exclusive)
            opening = None if exclusive else self._opening.get(key)
            if opening is None:
                try:
                    return await self._open(key, capabilities, exclusive=exclusive, headers=headers)
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
        room = self._room
        try:
            async with asyncio.timeout_at(deadline):
                await room.wait()
        except TimeoutError:
            raise self._busy_error() from None

    def _busy_error(self) -> CapacityExceeded:
        held, settings = sum(1 for e in self._entries if e.exclusive is not None), self._settings
        return self.limit.busy_error(settings.max_sessions, held, settings.session_wait_s)

    def _room_made(self) -> None:
        """Wake every lease waiting for room (each then tries again, in the order they began
        waiting)."""
        self._room.set()
        self._room = asyncio.Event()

    # -- choosing
    # -----------------------------------------------------------------------------------

    def _find(
        self, key: SessionKey, *, exclusive: bool, prefer: UpstreamSession | None = None
    ) -> PoolEntry | None:
        """The preferred session, else the first least-used session for `key` that can serve (one
        pass: on the hot path)."""
        best: PoolEntry | None = None
        best_rank = (True, 0)
        for entry in self._entries:
            if (exclusive and entry.exclusive is not None) or entry.key != key:
                continue
            if entry.session is prefer and entry.can_serve:
                return entry
            rank = (entry.exclusive is not None, entry.shared)
            if (best is None or rank < best_rank) and entry.can_serve:
                best, best_rank = entry, rank
        return best

    def _grant(self, entry: PoolEntry, *, exclusive: bool) -> Lease:
        lease = Lease(entry, self._release, exclusive=exclusive)
        if exclusive:
            entry.exclusive = lease
        else:
            entry.shared += 1
        entry.idle_since = None
        _log.debug("upstream_session_leased", exclusive=exclusive, open=len(self._entries))
        return lease

    def _reserve(self, principal: str) -> list[PoolEntry]:
        """Claim room for one more session, evicting idle ones if needed; raises a
        `LimitExceeded`."""
        victims: list[PoolEntry] = []
        per_principal = self._settings.max_sessions_per_principal
        while self._count(principal, victims) >= per_principal:
            victims.append(self._idle_victim(victims, principal, per_principal))
        cap = self.limit.cap(self._settings.max_sessions)
        while len(self._entries) - len(victims) + sum(self._reserved.values()) >= cap:
            victims.append(self._idle_victim(victims, None, cap))
        for victim in victims:
            self._entries.remove(victim)
        self._reserved[principal] = self._reserved.get(principal, 0) + 1
        return victims

    def _count(self, principal: str, excluded: list[PoolEntry]) -> int:
        open_now = sum(
            1 for e in self._entries if e.key.principal == principal and e not in excluded
        )
        return open_now + self._reserved.get(principal, 0)

    def _idle_victim(self, taken: list[PoolEntry], principal: str | None, limit: int) -> PoolEntry:
        idle = [
            e
            for e in self._entries
            if e.is_idle and e not in taken and (principal is None or e.key.principal == principal)
        ]
        if idle:
            return min(idle, key=lambda e: e.idle_since or 0.0)
        if principal is not None:
            raise ClientLimitExceeded(
                f"This caller already has {limit} upstream sessions in use"
                " (upstream.max_sessions_per_principal); finish or cancel some calls and retry",
                "upstream.max_sessions_per_principal",
            )
        raise CapacityExceeded(
            f"The bridge already has {limit} upstream sessions in use (upstream.max_sessions); "
            "retry later",
            TOTAL_LIMIT,
        )

    # -- opening and closing
    # ------------------------------------------------------------------------

    async def _open(
        self,
        key: SessionKey,
        capabilities: JsonObject,
        *,
        exclusive: bool,
        headers: Mapping[str, str],
    ) -> Lease:
        victims = self._reserve(key.principal)
        opening = None if exclusive else self._opening.setdefault(key, Opening())
        try:
            await self._close_all(victims, "evicted")
            if self.limit.one is None and self._entries:
                async with self.limit.lock:  # learning the limit (session_limit.py): one at a time
                    return await self._open_beside(key, capabilities, exclusive, headers)
            router = EntryRouter(self._route)
            # a burst opens a few at a time; each open's timeout starts here
            async with self._open_slots:
                session = await self._opener(capabilities, headers, router)
            return await self._admit(key, session, router, exclusive=exclusive)
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
        self, key: SessionKey, capabilities: JsonObject, exclusive: bool, headers: Mapping[str, str]
    ) -> Lease:
        """Open a session beside others; if the older ones stop answering (session_limit.py),
        the upstream serves one session: they are retired (forgotten, not deleted)."""
        router = EntryRouter(self._route)
        session = await self._opener(capabilities, headers, router)
        older = [e for e in self._entries if e.can_serve] if self.transport.streams_per_call else []
        if older and await self.limit.displaced(older[0].session):
            for entry in older:
                entry.retire()
            await self._close_all([e for e in older if e.is_idle], "displaced")
            self._entries = [e for e in self._entries if e.state is not EntryState.CLOSED]
        return await self._admit(key, session, router, exclusive=exclusive)

    async def _admit(
        self, key: SessionKey, session: PooledSession, router: EntryRouter, *, exclusive: bool
    ) -> Lease:
        if self._closed:
            await session.aclose()
            raise UpstreamUnavailable("The bridge is shutting down", public=True)
        entry = PoolEntry(key, session, asyncio.get_running_loop().time())
        self._entries.append(entry)
        self._created_total += 1
        router.bind(entry)
        return self._grant(entry, exclusive=exclusive)

    async def _release(self, lease: Lease, entry: PoolEntry, discard: bool) -> None:
        if lease.exclusive:
            if entry.exclusive is lease:
                entry.exclusive = None
        else:
            entry.shared -= 1
        if discard or not entry.session.is_alive:
            entry.retire()
        self._room_made()  # a shared lease may now be exclusive, an idle session evictable
        if not entry.is_idle:
            return
        if entry.state is not EntryState.SERVING:
            if entry in self._entries:
                self._entries.remove(entry)
            await self._close_all([entry], "discarded")
        else:
            entry.idle_since = asyncio.get_running_loop().time()

    async def _close_all(self, entries: list[PoolEntry], reason: str) -> None:
        entries = [entry for entry in entries if entry.state is not EntryState.CLOSED]
        if not entries:
            return
        for entry in entries:
            entry.state = EntryState.CLOSED
            self._retired_reinitialized += entry.session.reinitialized_count
            if self.limit.one:
                forget_on_close(entry.session)  # a DELETE would leave the server unconnected
        self._room_made()
        results = await asyncio.gather(
            *(e.session.aclose() for e in entries), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                _log.warning("upstream_session_close_failed", error=type(result).__name__)
        _log.info(
            "upstream_sessions_closed", reason=reason, count=len(entries), open=len(self._entries)
        )

    # -- routing and reaping
    # ------------------------------------------------------------------------

    def _route(self, entry: PoolEntry, inbound: Inbound) -> None:
        """GET-stream messages belong to the exclusive lease holder, if it listens; a push tied to a
        request that has no handler of its own (a shared call) and anything else go to policy."""
        handler = entry.exclusive.unrelated_handler if entry.exclusive is not None else None
        if inbound.related_request_id is not None:
            handler = None
        if handler is not None:
            invoke_handler(handler, inbound)
            return
        try:
            self._on_unowned(entry.session, inbound)
        except Exception:
            _log.exception("upstream_unowned_handler_failed", method=inbound.message.get("method"))

    async def _reap_loop(self) -> None:
        """Reap every half idle period; stops between rounds, so a close is never cut short."""
        interval = min(self._settings.session_idle_s / 2, 30.0)
        while not self._stopping.is_set():
            try:
                async with asyncio.timeout(interval):
                    await self._stopping.wait()
            except TimeoutError:
                await self.reap_idle()

    async def reap_idle(self) -> int:
        """Close sessions idle for `session_idle_s` (and dead or retiring idle ones); returns how
        many. Unless the upstream is known to serve many sessions, the last open one is kept (its
        DELETE could leave a one-session server unconnected); none is closed during a check."""
        now, limit = asyncio.get_running_loop().time(), self._settings.session_idle_s
        victims = [e for e in self._entries if e.is_idle and not e.can_serve]
        if self.limit.one is False or (self.limit.one is None and not self.limit.lock.locked()):
            stale = [e for e in self._entries if e.is_idle and e.can_serve]
            stale = [e for e in stale if now - (e.idle_since or now) >= limit]
            keep = self.limit.one is None and len(stale) + len(victims) == len(self._entries)
            victims += stale[:-1] if keep else stale
        for victim in victims:
            self._entries.remove(victim)
        await self._close_all(victims, "idle")
        return len(victims)

    def _check_open(self) -> None:
        if self._closed:
            raise UpstreamUnavailable(
                "The bridge is shutting down; no new upstream sessions", public=True
            )


__all__ = ["Lease", "PoolStats", "SessionKey", "UnownedHandler", "UpstreamPool"]
