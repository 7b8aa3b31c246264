"""Legacy sessions the bridge serves itself in front of a 2026-07-28 upstream (docs/directions.md).

A `ReverseSession` is what a legacy server keeps for a session: what the client declared in
`initialize` (`translators.reverse.session.ClientView`), the pushes waiting for the client's
answer, the requests in flight (for `notifications/cancelled`), and the GET stream's queue of
session-wide notifications. `ReverseSessions` binds each session to the principal that opened it
in a per-principal table (`proxy.common.per_principal`: `reverse.max_sessions_per_principal` each,
the principal's own least recently used going first; `front.max_legacy_sessions` in all, where a
new session takes only the place of one idle for `reverse.session_idle_s`, else of the opener's
own, else is refused) and drops the idle. A session is in use while a request or its GET stream
is open on it (`begin` / `end`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Any, Final

import structlog

from proxy.common.clock import Clock
from proxy.common.per_principal import Caps, PrincipalTable
from proxy.reverse.tool_headers import ToolSchemas
from translators.reverse.session import ClientView
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger("proxy.reverse")
OUTBOX_LIMIT: Final = 256


class ReverseSession:
    def __init__(self, principal: str, view: ClientView) -> None:
        self.id = secrets.token_urlsafe(24)
        self.principal = principal
        self.view = view
        self.pending: dict[str, asyncio.Future[JsonObject]] = {}
        self.in_flight: dict[str, asyncio.Task[Any]] = {}
        self.outbox: asyncio.Queue[JsonObject] | None = None  # the GET stream's, while open
        self.on_close: list[Callable[[], None]] = []
        self.tools = ToolSchemas()  # for the Mcp-Param-* headers of its tools/call
        self._pushes = 0
        self.closed = False

    def push_id(self) -> str:
        self._pushes += 1
        return f"mrtr-bridge-push-{self._pushes}"

    def answered(self, message: JsonObject) -> bool:
        """Deliver the client's response to a push; False when no push has its id."""
        future = self.pending.get(str(message.get("id")))
        if future is None or future.done():
            return False
        future.set_result(message)
        return True

    def cancel(self, request_id: Any) -> bool:
        task = self.in_flight.get(repr(request_id))
        if task is None:
            return False
        task.cancel()  # with it the upstream request: its stream closed, or notifications/cancelled
        _log.info("reverse_request_cancelled", by="client")
        return True

    def notify(self, message: JsonObject) -> None:
        """A session-wide notification for the GET stream (dropped when none is open or full)."""
        if self.outbox is not None and self.outbox.qsize() < OUTBOX_LIMIT:
            self.outbox.put_nowait(message)

    def close(self) -> None:
        self.closed = True
        for task in list(self.in_flight.values()):
            task.cancel()
        for callback in self.on_close:
            callback()
        self.on_close.clear()


class ReverseSessions:
    """The open sessions, by id, under `caps` (`open` raises their refusal)."""

    def __init__(self, caps: Caps, idle_s: float, clock: Clock = time.monotonic) -> None:
        self._table = PrincipalTable[ReverseSession](caps, idle_s, clock)

    def open(self, principal: str, view: ClientView) -> ReverseSession:
        for session_id in self._table.expired():
            self.close(session_id, reason="idle")
        session = ReverseSession(principal, view)
        for _, evicted in self._table.add(session.id, principal, session):
            evicted.close()
            _log.info("reverse_session_closed", reason="evicted", sessions=len(self._table))
        _log.info(
            "reverse_session_opened", sessions=len(self._table), version=view.revision.version
        )
        return session

    def get(self, session_id: str, principal: str) -> ReverseSession | None:
        return self._table.owned(session_id, principal)

    def begin(self, session_id: str) -> None:
        """A request or the GET stream starts on the session: it is in use until `end`."""
        self._table.begin(session_id)

    def end(self, session_id: str) -> None:
        self._table.end(session_id)

    def knows(self, session_id: str) -> bool:
        return session_id in self._table

    def close(self, session_id: str, reason: str = "deleted") -> bool:
        session = self._table.pop(session_id)
        if session is None:
            return False
        session.close()
        _log.info("reverse_session_closed", reason=reason, sessions=len(self._table))
        return True

    def close_all(self) -> None:
        for session in self._table.values():
            self.close(session.id, reason="shutdown")

    def __len__(self) -> int:
        return len(self._table)


__all__ = ["ReverseSession", "ReverseSessions"]
