"""How many sessions the pool keeps per key: more while plain calls crowd one (docs/decisions.md
§ 31, learning the session limit by draining when it is unknown), fewer once they idle (reaping).
A mixin of `UpstreamPool` (proxy/upstream/pool.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import structlog

from config.settings import UpstreamSettings
from proxy.common.clock import Clock
from proxy.common.per_principal import Caps, fits
from proxy.upstream.base import TransportInfo
from proxy.upstream.pool_choice import reap_victims
from proxy.upstream.pool_entries import Lease, Opening, PoolEntry, SessionKey
from proxy.upstream.session_limit import DRAIN_S, SessionLimit
from translators.wire.errors import BridgeError, CapacityExceeded
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger("proxy.upstream.pool")

SPREAD_BACKOFF_S: Final = 30.0  # after an extra session failed to open, plain calls share this long


class PoolSizing:
    """Spreading crowded plain calls and reaping idle sessions; needs the pool's records."""

    _settings: UpstreamSettings
    _clock: Clock
    transport: TransportInfo
    limit: SessionLimit
    _entries: list[PoolEntry]
    _opening: dict[SessionKey, Opening]
    _spreading: dict[SessionKey, int]
    _spread_at: int
    _reserved: dict[str, int]
    _spread_after: float
    _stopping: asyncio.Event
    _caps: Caps  # the session caps as last computed (`session_caps`)

    if TYPE_CHECKING:  # the pool's own (never defined here: they must not shadow it)

        async def _open(
            self,
            key: SessionKey,
            capabilities: JsonObject,
            *,
            exclusive: bool,
            headers: Mapping[str, str],
            label: str | None = None,
            spread: bool = False,
        ) -> Lease: ...

        async def _wait_for_room(self, deadline: float) -> None: ...

        async def _close_all(self, entries: list[PoolEntry], reason: str) -> None: ...

    def _may_spread(self, key: SessionKey, held: bool, prefer: object) -> bool:
        """A plain lease that found its key's least-used session crowded (docs/decisions.md § 31):
        may it open another? Only over Streamable HTTP (elsewhere a session is a process or an
        SSE stream), and only where the upstream is known to serve many sessions (a second one
        would take a one-session server over, and the calls running on the older session would be
        lost); not for a held call (exclusive, or attributed: those pack onto few sessions, for
        memory) nor a lease preferring a session; not while the key's first session is being
        opened, and only within the limits (no eviction for this). Extra sessions open side by
        side, as many at once as the calls in flight need (`plain_calls_per_session` each,
        counting those opening), so a burst gets its sessions in one handshake's time, and no
        more of them than it needs."""
        if held or prefer is not None or not self.transport.streams_per_call:
            return False
        now = self._clock()
        if self.limit.one or (self.limit.one is None and not self.limit.may_learn(now)):
            return False
        if key in self._opening or now < self._spread_after:
            return False
        spreading = self._spreading.get(key, 0)
        if spreading and self._room_for_calls(key, spreading):
            return False
        return fits(self._entries, key.principal, self.session_caps(), self._reserved)

    def session_caps(self) -> Caps:
        """`upstream.max_sessions_per_principal` and `upstream.max_sessions`, the latter lowered to
        the upstream's own session limit once learned (session_limit.py)."""
        cap = self.limit.cap(self._settings.max_sessions)
        if self._caps.total != cap:
            self._caps = dataclasses.replace(self._caps, total=cap)
        return self._caps

    def _room_for_calls(self, key: SessionKey, spreading: int) -> bool:
        """Whether the key's sessions, open and opening, have room for its calls in flight (each
        lease opening a session is one of them) and one more."""
        ident, sessions, calls = key.ident, 0, spreading
        for entry in self._entries:
            if entry.ident == ident:
                sessions += 1
                calls += entry.shared
        return (sessions + spreading) * self._spread_at > calls

    async def _spread(
        self, key: SessionKey, capabilities: JsonObject, headers: Mapping[str, str]
    ) -> Lease | None:
        """A shared lease on a new session of `key`; None when it could not be opened (plain calls
        then share the sessions there are for `SPREAD_BACKOFF_S`)."""
        self._spreading[key] = self._spreading.get(key, 0) + 1
        try:
            return await self._open(
                key, capabilities, exclusive=False, headers=headers, spread=True
            )
        except BridgeError as exc:
            self._spread_after = self._clock() + SPREAD_BACKOFF_S
            _log.info("upstream_extra_session_failed", error=type(exc).__name__)
            return None
        finally:
            self._spreading[key] -= 1
            if not self._spreading[key]:
                del self._spreading[key]

    async def _learn_then_spread(
        self, key: SessionKey, capabilities: JsonObject, headers: Mapping[str, str]
    ) -> Lease | None:
        """Learn the session limit from a crowded plain lease (session_limit.py): new leases wait
        while the calls in flight end, then the extra session opens beside the idle ones and
        checks them; None (share) when calls were still running after `DRAIN_S`."""
        limit = self.limit
        limit.close_gate()
        try:
            deadline = asyncio.get_running_loop().time() + DRAIN_S  # a loop timer's deadline
            while busy := sum(not e.is_idle for e in self._entries) + sum(self._reserved.values()):
                try:
                    await self._wait_for_room(deadline)
                except CapacityExceeded:
                    limit.postpone(self._clock(), busy)
                    return None
            return await self._spread(key, capabilities, headers)
        finally:
            limit.open_gate()

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
        victims = reap_victims(
            self._entries,
            self._clock(),
            self._settings.session_idle_s,
            one_session=self.limit.one,
            checking=self.limit.lock.locked(),
        )
        for victim in victims:
            self._entries.remove(victim)
        await self._close_all(victims, "idle")
        return len(victims)


__all__ = ["SPREAD_BACKOFF_S", "PoolSizing"]
