"""Legacy sessions the bridge serves itself in front of a 2026-07-28 upstream (docs/directions.md).

A `ReverseSession` is what a legacy server keeps for a session: what the client declared in
`initialize` (`translators.reverse.session.ClientView`), the pushes waiting for the client's
answer, the requests in flight (for `notifications/cancelled`), and the GET stream's queue of
session-wide notifications. `ReverseSessions` binds each session to the principal that opened it,
bounds them (in total and per principal: the least recently used goes first) and drops the idle.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import structlog

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
        self.used = time.monotonic()
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
    def __init__(self, max_total: int, max_per_principal: int, idle_s: float) -> None:
        self._max_total = max_total
        self._max_per_principal = max_per_principal
        self._idle_s = idle_s
        self._sessions: OrderedDict[str, ReverseSession] = OrderedDict()

    def open(self, principal: str, view: ClientView) -> ReverseSession:
        self._drop_idle()
        mine = [s for s in self._sessions.values() if s.principal == principal]
        if len(mine) >= self._max_per_principal:
            self.close(mine[0].id, reason="per_principal_limit")
        if len(self._sessions) >= self._max_total:
            self.close(next(iter(self._sessions)), reason="total_limit")
        session = ReverseSession(principal, view)
        self._sessions[session.id] = session
        _log.info(
            "reverse_session_opened", sessions=len(self._sessions), version=view.revision.version
        )
        return session

    def get(self, session_id: str, principal: str) -> ReverseSession | None:
        session = self._sessions.get(session_id)
        if session is None or session.principal != principal:
            return None
        session.used = time.monotonic()
        self._sessions.move_to_end(session_id)
        return session

    def knows(self, session_id: str) -> bool:
        return session_id in self._sessions

    def close(self, session_id: str, reason: str = "deleted") -> bool:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.close()
        _log.info("reverse_session_closed", reason=reason, sessions=len(self._sessions))
        return True

    def _drop_idle(self) -> None:
        horizon = time.monotonic() - self._idle_s
        for session_id in [
            s.id for s in self._sessions.values() if s.used < horizon and not s.in_flight
        ]:
            self.close(session_id, reason="idle")

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id, reason="shutdown")

    def __len__(self) -> int:
        return len(self._sessions)


__all__ = ["ReverseSession", "ReverseSessions"]
