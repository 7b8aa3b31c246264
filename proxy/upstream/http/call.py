"""One in-flight request on a legacy Streamable HTTP session: its outcome slot and its inbound
routing."""

from __future__ import annotations

import asyncio

import structlog

from proxy.upstream.base import Inbound, InboundHandler
from proxy.upstream.call import CancelSender, OutcomeCall
from proxy.upstream.http.wire import is_request
from translators.wire import jsonrpc
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)


def invoke_handler(handler: InboundHandler, inbound: Inbound) -> None:
    """Run an inbound callback; a failing callback is logged, never allowed to kill a stream
    reader."""
    try:
        handler(inbound)
    except Exception:
        _log.exception("upstream_inbound_handler_failed", method=inbound.message.get("method"))


class HttpUpstreamCall(OutcomeCall):
    """An `OutcomeCall` that also knows its request and routes what arrives on its own stream."""

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
        super().__init__(upstream_request_id, method, send_cancel, f"Upstream {upstream}")
        self.params = params
        self.headers = headers
        self._on_inbound = on_inbound
        self._on_unrelated = on_unrelated
        self.pushes_delivered = False
        self.task: asyncio.Task[None] | None = None

    def request_message(self) -> JsonObject:
        return jsonrpc.request(self._upstream_request_id, self.method, self.params)

    def deliver(self, message: JsonObject) -> None:
        """A push or notification from this call's own stream (POST, or its resumption)."""
        if is_request(message):
            self.pushes_delivered = True
        inbound = Inbound(message=message, related_request_id=self._upstream_request_id)
        invoke_handler(self._on_inbound or self._on_unrelated, inbound)


__all__ = ["HttpUpstreamCall", "invoke_handler"]
