"""One in-flight upstream request: its outcome slot, shared by the HTTP and stdio transports.

The outcome is a value set once (a result object or a `BridgeError`); waiters use an
`asyncio.Event`, so a cancelled waiter never disturbs the outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from translators.errors import (
    BridgeBug,
    BridgeError,
    UpstreamFault,
    UpstreamProtocolError,
    UpstreamReturnedError,
)
from translators.jsonrpc import JsonObject

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
        self._upstream_request_id = upstream_request_id
        self.method = method
        self._send_cancel = send_cancel
        self._done = asyncio.Event()
        self._result: JsonObject | None = None
        self._error: BridgeError | None = None
        self._cancel_requested = False

    @property
    def upstream_request_id(self) -> int:
        return self._upstream_request_id

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    async def result(self) -> JsonObject:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise BridgeBug("upstream call finished without an outcome")
        return self._result

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
        elif not self.is_done:
            self._result = result
            self._done.set()

    def fail(self, error: BridgeError) -> None:
        if not self.is_done:
            self._error = error
            self._done.set()


__all__ = ["CancelSender", "OutcomeCall"]
