"""The pool's choices over its entries, without I/O: who may take which lease, which idle sessions
to reap, and what the status page shows (proxy/upstream/pool.py). Which session gives way when a
limit is reached is the rule of every per-principal table (proxy/common/per_principal.py)."""

from __future__ import annotations

from typing import Final

from proxy.upstream.base import UpstreamSession
from proxy.upstream.pool_entries import PoolEntry, SessionKey, SessionView
from translators.protocol.eras import LOG_MESSAGE, PROGRESS
from translators.protocol.pushes import is_push
from translators.wire.jsonrpc import JsonObject

CALL_NOTIFICATIONS: Final = frozenset({PROGRESS, LOG_MESSAGE})
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


def about_a_call(message: JsonObject) -> bool:
    """A push, or a notification only a call's client wants (progress, logs); not a list change
    or a resource update, which concern the whole session."""
    return is_push(message) or message.get("method") in CALL_NOTIFICATIONS


def reap_victims(
    entries: list[PoolEntry], now: float, idle_s: float, *, one_session: bool | None, checking: bool
) -> list[PoolEntry]:
    """The idle sessions to close: dead or retiring ones, and those idle for `idle_s`. Unless the
    upstream is known to serve many sessions (`one_session` False), the last open one is kept;
    none while the one-session check runs (`checking`)."""
    victims = [e for e in entries if e.is_idle and not e.can_serve]
    if one_session is False or (one_session is None and not checking):
        stale = [e for e in entries if e.is_idle and e.can_serve]
        stale = [e for e in stale if now - (e.idle_since or now) >= idle_s]
        keep = one_session is None and len(stale) + len(victims) == len(entries)
        victims += stale[:-1] if keep else stale
    return victims


def session_views(entries: list[PoolEntry], now: float) -> list[SessionView]:
    return [
        SessionView(
            principal=entry.key.principal,
            revision=entry.session.revision.version,
            state=entry.state.value,
            exclusive=entry.exclusive is not None,
            shared=entry.shared,
            idle_s=None if entry.idle_since is None else round(now - entry.idle_since, 1),
        )
        for entry in entries
    ]


__all__ = [
    "CALL_NOTIFICATIONS",
    "about_a_call",
    "best_entry",
    "reap_victims",
    "session_views",
]
