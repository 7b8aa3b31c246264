"""Which principal opened each relayed legacy session, capped per principal and in total.

A legacy client's session id is bound to the principal whose `initialize` opened it (a request
naming it from any other principal gets 404). The caps are those of the translated path's pool,
so one caller cannot crowd out another (issue 24, defect 3):

- a principal at `upstream.max_sessions_per_principal` that opens one more loses its own least
  recently used session (one with no request in flight first);
- at `front.max_legacy_sessions` in total, the new session takes the place of one idle (no request
  in flight) for `upstream.session_idle_s`, of anyone's, the least recently used first; else of the
  opening principal's own least recently used one; a principal that holds none is refused (the
  bridge is full: the same `initialize` succeeds once sessions end or idle out).

Another principal's session in use is never given up. What is evicted is returned to the caller
(`proxy.passthrough.legacy_clients`), which DELETEs it upstream with the credentials of its latest
request.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from proxy.upstream.http.cookies import SessionCookies

# (session id, the headers its DELETE carries)
Evicted = tuple[str, dict[str, str]]


@dataclass
class _Session:
    principal: str
    headers: dict[str, str]  # credentials, protocol version and cookies of its latest request
    last_used: float
    cookies: SessionCookies  # what the upstream set on the session's responses
    in_flight: int = field(default=0)


class LegacySessions:
    """Session id -> principal, least recently active first (a request began or ended), with the
    caps above."""

    def __init__(
        self,
        per_principal: int,
        total: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_principal = per_principal
        self._total = total
        self._idle_s = idle_s
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._by_principal: dict[str, OrderedDict[str, None]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def total(self) -> int:
        return self._total

    def count(self, principal: str) -> int:
        return len(self._by_principal.get(principal, ()))

    def owned_by(self, session_id: str, principal: str) -> bool:
        session = self._sessions.get(session_id)
        return session is not None and session.principal == principal

    def cookies_of(self, session_id: str) -> SessionCookies | None:
        session = self._sessions.get(session_id)
        return session.cookies if session is not None else None

    def begin(self, session_id: str, headers: dict[str, str]) -> None:
        """A request on the session starts: it is the most recently used, and in flight."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight += 1
            session.headers = headers
            self._touch(session_id, session)

    def end(self, session_id: str) -> None:
        """The request on the session has been answered (its stream ended)."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight -= 1
            self._touch(session_id, session)

    def _touch(self, session_id: str, session: _Session) -> None:
        session.last_used = self._clock()
        self._sessions.move_to_end(session_id)
        self._by_principal[session.principal].move_to_end(session_id)

    def bind(
        self,
        session_id: str,
        principal: str,
        headers: dict[str, str],
        cookies: SessionCookies | None = None,
    ) -> tuple[list[Evicted], bool]:
        """Bind a session the upstream just issued (with the cookies its `initialize` answer set):
        the sessions evicted to make room, and whether it was admitted (when not, nothing was
        evicted and the caller ends the new session)."""
        self.forget(session_id)
        victims: list[str] = []
        if self.count(principal) >= self._per_principal:
            victims.append(self._least_recent_of(principal, victims))
        if len(self._sessions) - len(victims) >= self._total:
            victim = self._idle_victim(victims) or (
                self._least_recent_of(principal, victims)
                if self.count(principal) > len(victims)
                else None
            )
            if victim is None:
                return [], False
            victims.append(victim)
        evicted = [(victim, self._sessions[victim].headers) for victim in victims]
        for victim in victims:
            self.forget(victim)
        jar = SessionCookies() if cookies is None else cookies
        self._sessions[session_id] = _Session(principal, headers, self._clock(), jar)
        self._by_principal.setdefault(principal, OrderedDict())[session_id] = None
        return evicted, True

    def forget(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        own = self._by_principal[session.principal]
        own.pop(session_id, None)
        if not own:
            del self._by_principal[session.principal]

    def _least_recent_of(self, principal: str, taken: list[str]) -> str:
        """The principal's least recently used session, one with nothing in flight first."""
        own = [sid for sid in self._by_principal[principal] if sid not in taken]
        idle = (sid for sid in own if self._sessions[sid].in_flight <= 0)
        return next(idle, own[0])

    def _idle_victim(self, taken: list[str]) -> str | None:
        """The least recently used session of anyone's idle for `idle_s`, or None."""
        horizon = self._clock() - self._idle_s
        for session_id, session in self._sessions.items():
            if session.last_used > horizon:
                return None
            if session.in_flight <= 0 and session_id not in taken:
                return session_id
        return None


__all__ = ["Evicted", "LegacySessions"]
