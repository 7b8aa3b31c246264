"""One in-flight upstream request: its outcome slot, shared by the HTTP and stdio transports.

The outcome is a value set once (a result object or a `BridgeError`); each waiter waits on a future
of its own, so a cancelled waiter never disturbs the outcome (like an `asyncio.Event`, whose waiter
queue a held call would keep allocated for its whole life)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from translators.wire.errors import (
    BridgeBug,
    BridgeError,
    UpstreamFault,
    UpstreamProtocolError,
    UpstreamReturnedError,
)
from translators.wire.jsonrpc import JsonObject

CancelSender = Callable[[Any, str], Awaitable[None]]


class OutcomeCall:
    """Implements `UpstreamCall`; `upstream` names the server in error messages."""

    def __init__(
        self,
        upstream_request_id: int,
        method: str,
        send_cancel: CancelSender,
        upstream: str = "Legacy server",
    ) -> None:
        self.upstream = upstream
        self.upstream_request_id = upstream_request_id  # read on every event: not a property
        self.method = method
        self._send_cancel = send_cancel
        self._done = False
        self._waiters: list[asyncio.Future[None]] | None = None
        self._result: JsonObject | None = None
        self._error: BridgeError | None = None
        self._cancel_requested = False

    @property
    def is_done(self) -> bool:
        return self._done

    async def result(self) -> JsonObject:
        if not self._done:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if self._waiters is not None and waiter in self._waiters:
                    self._waiters.remove(waiter)
        return self.outcome()

    def outcome(self) -> JsonObject:
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise BridgeBug("upstream call finished without an outcome")
        return self._result

    def watch(self, waiter: asyncio.Future[None]) -> None:
        """Resolve `waiter` when the outcome is set (at once if it is): the plain path waits for
        the outcome or its first push on one future, with no task (proxy/calls/call.py)."""
        if self._done:
            if not waiter.done():
                waiter.set_result(None)
            return
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)

    async def first_event_id(self, wait_s: float) -> str | None:
        """None: a call whose answer comes on a stream shared by the session (stdio, HTTP+SSE) has
        no stream of its own to resume (Streamable HTTP's calls override this)."""
        return None

    async def cancel(self, reason: str) -> None:
        if self._cancel_requested or self.is_done:
            return
        self._cancel_requested = True
        self.fail(UpstreamFault(f"Upstream call {self.method} was cancelled: {reason}"))
        await self._send_cancel(self, reason)

    def resolve(self, response: JsonObject) -> None:
        """Settle from a JSON-RPC response (an error reply becomes `UpstreamReturnedError`)."""
        if "error" in response:
            error = response["error"]
            self.fail(
                UpstreamReturnedError(error)
                if isinstance(error, dict)
                else UpstreamProtocolError(
                    f"{self.upstream} answered {self.method} with a malformed error"
                )
            )
            return
        result: Any = response.get("result")
        if not isinstance(result, dict):
            self.fail(
                UpstreamProtocolError(
                    f"{self.upstream} answered {self.method} with a non-object result"
                )
            )
        elif not self._done:
            self._result = result
            self._settle()

    def fail(self, error: BridgeError) -> None:
        if not self._done:
            self._error = error
            self._settle()

    def _settle(self) -> None:
        self._done = True
        waiters, self._waiters = self._waiters or [], None
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


__all__ = ["CancelSender", "OutcomeCall"]
