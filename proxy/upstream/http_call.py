"""One in-flight request on a legacy Streamable HTTP session: its outcome slot and its inbound routing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from proxy.upstream.base import Inbound, InboundHandler, JsonObject
from proxy.upstream.http_wire import is_request
from translators.errors import BridgeBug, BridgeError, UpstreamFault, UpstreamProtocolError, UpstreamReturnedError

_log = structlog.get_logger(__name__)

CancelSender = Callable[["HttpUpstreamCall", str], Awaitable[None]]


def invoke_handler(handler: InboundHandler, inbound: Inbound) -> None:
    """Run an inbound callback; a failing callback is logged, never allowed to kill a stream reader."""
    try:
        handler(inbound)
    except Exception:
        _log.exception("upstream_inbound_handler_failed", method=inbound.message.get("method"))


class HttpUpstreamCall:
    """Implements `UpstreamCall`. The outcome is a value set once (result message or `BridgeError`);
    waiters use an `asyncio.Event`, so a cancelled waiter never disturbs the outcome."""

    def __init__(
        self,
        upstream_request_id: int,
        method: str,
        params: JsonObject,
        *,
        headers: dict[str, str],
        on_inbound: InboundHandler | None,
        on_unrelated: InboundHandler,
        send_cancel: CancelSender,
        upstream: str,
    ) -> None:
        self.upstream = upstream
        self._upstream_request_id = upstream_request_id
        self.method = method
        self.params = params
        self.headers = headers
        self._on_inbound = on_inbound
        self._on_unrelated = on_unrelated
        self._send_cancel = send_cancel
        self._done = asyncio.Event()
        self._result: JsonObject | None = None
        self._error: BridgeError | None = None
        self._cancel_requested = False
        self.pushes_delivered = False
        self.task: asyncio.Task[None] | None = None

    @property
    def upstream_request_id(self) -> int:
        return self._upstream_request_id

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    def request_message(self) -> JsonObject:
        return {"jsonrpc": "2.0", "id": self._upstream_request_id, "method": self.method, "params": self.params}

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
        """Settle from a JSON-RPC response message (result, or error → `UpstreamReturnedError`)."""
        if "error" in response:
            error: Any = response["error"]
            if isinstance(error, dict):
                self.fail(UpstreamReturnedError(error))
            else:
                self.fail(UpstreamProtocolError(f"Upstream {self.upstream} sent a malformed error for {self.method}"))
            return
        result: Any = response.get("result")
        if not isinstance(result, dict):
            self.fail(UpstreamProtocolError(f"Upstream {self.upstream} sent a non-object result for {self.method}"))
            return
        if not self.is_done:
            self._result = result
            self._done.set()

    def fail(self, error: BridgeError) -> None:
        if not self.is_done:
            self._error = error
            self._done.set()

    def deliver(self, message: JsonObject) -> None:
        """A push or notification from this call's own stream (POST, or its resumption)."""
        if is_request(message):
            self.pushes_delivered = True
        inbound = Inbound(message=message, related_request_id=self._upstream_request_id)
        invoke_handler(self._on_inbound or self._on_unrelated, inbound)


__all__ = ["CancelSender", "HttpUpstreamCall", "invoke_handler"]
