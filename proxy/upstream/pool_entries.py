"""The pool's records (proxy/upstream/pool.py): the session key, one entry per open session and the
choice of the entry a lease takes (`best_entry`, which reads nothing else), the leases handed out
on it, and the router of its session-wide messages."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from proxy.upstream.base import Inbound, InboundHandler, PooledSession, UpstreamSession
from translators.wire.errors import BridgeBug, BridgeError
from translators.wire.jsonrpc import JsonObject

# What the pool does when a lease is released (lease, its entry, discard) and with a message of a
# session's GET stream (its entry, the message): passed in, so these records never see the pool.
Release = Callable[["Lease", "PoolEntry", bool], Awaitable[None]]
Route = Callable[["PoolEntry", Inbound], None]
# what the pool does with a session-wide message no call owns (its session, the message)
UnownedHandler = Callable[[UpstreamSession, Inbound], None]


@dataclass(frozen=True)
class SessionKey:
    principal: str
    fingerprint: str
    # Roots affinity (proxy/calls/roots_affinity.py): the digest of the roots answer this session's
    # server holds,
    # and that answer itself (not part of the key's identity); "" for a session that holds none.
    roots: str = ""
    roots_answer: JsonObject | None = field(default=None, compare=False, hash=False)
    # what the key's equality compares, as one tuple (compared in C on the lease path)
    ident: tuple[str, str, str] = field(init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ident", (self.principal, self.fingerprint, self.roots))


@dataclass(frozen=True)
class PoolStats:
    sessions_open: int
    created_total: int
    reused_total: int
    reinitialized_total: int


@dataclass(frozen=True)
class SessionView:
    """One open session as the status page shows it."""

    principal: str
    revision: str
    state: str
    exclusive: bool
    shared: int
    idle_s: float | None


class EntryState(enum.Enum):
    """Where a pooled session's life stands. Who holds it is separate: `exclusive` (one lease) or
    `shared` (a count of leases); idle when neither."""

    SERVING = "serving"  # may be handed out
    RETIRING = "retiring"  # never handed out again; closed when its last lease is released
    CLOSED = "closed"  # its session is closed (or closing)


class PoolEntry:
    """The pool's record of one open session."""

    def __init__(self, key: SessionKey, session: PooledSession, now: float) -> None:
        self.key = key
        self.ident = key.ident  # what `best_entry` compares, once per entry instead of per lease
        self.session = session
        self.shared = 0
        self.exclusive: Lease | None = None
        # labels of the interactive calls sharing this session now (attribution.py), by count
        self.attributed: dict[str, int] = {}
        self.idle_since: float | None = now
        self.state = EntryState.SERVING

    @property
    def is_idle(self) -> bool:
        return self.shared == 0 and self.exclusive is None

    # what the eviction rule reads of an entry (proxy/common/per_principal.py `Slot`)
    @property
    def principal(self) -> str:
        return self.key.principal

    @property
    def in_use(self) -> bool:
        return not self.is_idle

    @property
    def last_used(self) -> float:
        return self.idle_since or 0.0

    @property
    def can_serve(self) -> bool:
        return self.state is EntryState.SERVING and self.session.is_alive

    def retire(self) -> None:
        if self.state is EntryState.SERVING:
            self.state = EntryState.RETIRING

    def add_attributed(self, label: str) -> None:
        self.attributed[label] = self.attributed.get(label, 0) + 1

    def remove_attributed(self, label: str) -> None:
        left = self.attributed.get(label, 0) - 1
        if left > 0:
            self.attributed[label] = left
        else:
            self.attributed.pop(label, None)


_IDLE: Final = (False, 0)  # the rank of a session nobody holds


def best_entry(
    entries: list[PoolEntry],
    key: SessionKey,
    exclusive: bool,
    prefer: UpstreamSession | None,
    attributed: str | None,
) -> PoolEntry | None:
    """The preferred session, else the first least-used session for `key` that can serve: one
    pass on the hot path, which ends at the first idle session when nothing is preferred. An
    exclusive lease never goes where interactive calls share, an attributed one never beside an
    exclusive lease."""
    best: PoolEntry | None = None
    best_rank = (True, 0)
    ident = key.ident
    for entry in entries:
        if entry.ident != ident:
            continue
        if exclusive:  # who holds it (one pass: every lease scans the key's sessions)
            if entry.exclusive is not None or entry.attributed:
                continue
        elif attributed is not None and entry.exclusive is not None:
            continue
        if entry.session is prefer and entry.can_serve:
            return entry
        rank = (entry.exclusive is not None, entry.shared)
        if (best is None or rank < best_rank) and entry.can_serve:
            best, best_rank = entry, rank
            if rank == _IDLE and prefer is None:
                break  # nothing ranks below an idle session: the rest need not be looked at
    return best


def idle_entry(entries: list[PoolEntry], key: SessionKey) -> PoolEntry | None:
    """On a one-session upstream (session_limit.py): its session when nobody holds it, taken over
    by `key`. It serves one key's requests at a time (by `best_entry`'s rules), so that a push or a
    session-wide message on it concerns that key's caller alone; another key's request waits until
    it is idle, as for a full pool."""
    for entry in entries:
        if entry.is_idle and entry.can_serve:
            entry.key, entry.ident = key, key.ident
            return entry
    return None


class Lease:
    """The right to use `session` for one request; give it back with `release()`.

    An interactive call whose pushes the server attributes (attribution.py) gets a *shared* lease
    with its `label` set: `exclusive` is False, so its pushes come only on its own POST stream."""

    __slots__ = (
        "_entry",
        "_release",
        "_released",
        "_unowned",
        "exclusive",
        "key",
        "label",
        "pushed_related",
        "pushed_unrelated",
        "session",
        "unrelated_handler",
    )

    def __init__(
        self,
        entry: PoolEntry,
        release: Release,
        unowned: UnownedHandler,
        *,
        exclusive: bool,
        label: str | None = None,
    ) -> None:
        self._entry = entry
        # the entry's, which never change: attributes rather than properties, read on every call
        self.session: UpstreamSession = entry.session
        self.key: SessionKey = entry.key
        self._release = release
        self._unowned = unowned
        self.exclusive = exclusive
        # exclusive: the call being learned; shared: the attributed call's label
        self.label = label
        self.pushed_related = False  # a push came on the call's own POST stream (attribution.py)
        self.pushed_unrelated = False  # a push reached the GET stream during this lease
        self.unrelated_handler: InboundHandler | None = None
        self._released = False

    @property
    def interactive(self) -> bool:
        """Whether an interactive call holds it: exclusive, or sharing by attribution. A cancelled
        interactive call's session is discarded (retired), so no late push of it can reach an
        exclusive lease holder after it."""
        return self.exclusive or self.label is not None

    def set_unrelated_handler(self, handler: InboundHandler | None) -> None:
        """Route the session's GET-stream messages to `handler` while set (exclusive leases
        only)."""
        if not self.exclusive:
            raise BridgeBug("only an exclusive lease may own a session's unrelated messages")
        self.unrelated_handler = None if self._released else handler

    def disown(self, inbound: Inbound) -> None:
        """A message of the session's GET stream that reached the holder after its call ended
        (before the lease went back): from now on such messages go to the pool's policy, and
        this one too, as on an idle session (a server asking again between calls must get an
        answer, not silence)."""
        self.unrelated_handler = None
        self._unowned(self._entry.session, inbound)

    async def release(self, *, discard: bool = False) -> None:
        """Give the session back (idempotent); `discard=True` closes it, e.g. after a cancelled
        call."""
        if self._released:
            return
        self._released = True
        self.unrelated_handler = None
        await self._release(self, self._entry, discard)


class EntryRouter:
    """A session's `on_unrelated`: buffers until the session joins the pool, then routes per
    lease."""

    def __init__(self, route: Route) -> None:
        self._route = route
        self._entry: PoolEntry | None = None
        self._pending: list[Inbound] = []

    def __call__(self, inbound: Inbound) -> None:
        if self._entry is None:
            self._pending.append(inbound)
        else:
            self._route(self._entry, inbound)

    def bind(self, entry: PoolEntry) -> None:
        self._entry = entry
        pending, self._pending = self._pending, []
        for inbound in pending:
            self._route(entry, inbound)


class Opening:
    """A shared-lease open in progress, which concurrent shared leases of the same key wait for."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.error: BridgeError | None = None


__all__ = [
    "EntryRouter",
    "EntryState",
    "Lease",
    "Opening",
    "PoolEntry",
    "PoolStats",
    "SessionKey",
    "UnownedHandler",
    "best_entry",
    "idle_entry",
]
