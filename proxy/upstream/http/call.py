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

    # class-level defaults, set on an instance only where they change (a legacy task's
    # `tasks/result`): an attribute first set outside `__init__` gives the object a dict of its own
    # (hundreds of bytes), and every held call has one of these objects
    replayed = False  # a stream another process opened, read again (an adopted task)
    _first_event: asyncio.Future[None] | None = None  # made only when awaited

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
        self.first_event_id: str | None = None  # where this call's SSE stream can be resumed
        self._events_seen = False

    def note_event_id(self, event_id: str | None) -> None:
        """An event of this call's stream arrived: remember the first id (a legacy task keeps it
        to resume `tasks/result` from another process, docs/tasks.md)."""
        if self._events_seen:
            return
        self._events_seen = True
        self.first_event_id = event_id  # a priming event, on a server with an event store
        if self._first_event is not None and not self._first_event.done():
            self._first_event.set_result(None)

    async def first_event(self, timeout_s: float) -> str | None:
        """The first event id of this call's SSE stream, waiting up to `timeout_s` for the first
        event (a server with an event store primes the stream at once); None without one."""
        if not self._events_seen and not self.is_done:
            if self._first_event is None:
                self._first_event = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(self._first_event)
            except TimeoutError:
                pass
        return self.first_event_id

    def request_message(self) -> JsonObject:
        return jsonrpc.request(self.upstream_request_id, self.method, self.params)

    def deliver(self, message: JsonObject) -> None:
        """A push or notification from this call's own stream (POST, or its resumption)."""
        if is_request(message):
            self.pushes_delivered = True
        inbound = Inbound(message=message, related_request_id=self.upstream_request_id)
        invoke_handler(self._on_inbound or self._on_unrelated, inbound)


__all__ = ["HttpUpstreamCall", "invoke_handler"]
