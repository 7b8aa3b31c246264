"""The pool's choices over its entries, without I/O, off the lease path: which messages concern a
call, which idle sessions to reap, and what the status page shows (proxy/upstream/pool.py). Which
session a lease takes is `pool_entries.best_entry`, beside the entries it ranks; which session gives
way when a limit is reached is the rule of every per-principal table
(proxy/common/per_principal.py)."""

from __future__ import annotations

from typing import Final

from proxy.upstream.pool_entries import PoolEntry, SessionView
from translators.protocol.eras import LOG_MESSAGE, PROGRESS
from translators.protocol.pushes import is_push
from translators.wire.jsonrpc import JsonObject

CALL_NOTIFICATIONS: Final = frozenset({PROGRESS, LOG_MESSAGE})


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
    "reap_victims",
    "session_views",
]
