"""The stdio front's protocol output: one writer of whole lines on stdout (`LineOutput`), and each
request's notification sink over it (`RequestSink`)."""

from __future__ import annotations

import asyncio

import structlog

from proxy.stdio_front.pipes import LineWriter
from translators.wire.errors import BridgeBug
from translators.wire.jsonrpc import JsonObject, to_error_response
from translators.wire.stdio_framing import frame

log = structlog.get_logger(__name__)


class LineOutput:
    """The one writer of protocol lines. `send` writes a whole line synchronously, so lines never
    interleave; `flush` drains under a lock. A broken stdout (the client went away) is logged once.
    """

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()
        self.broken = False

    def send(self, message: JsonObject) -> None:
        if self.broken:
            return
        try:
            data = frame(message)
        except (TypeError, ValueError):
            log.error("front_message_unserializable", has_id="id" in message)
            if "id" not in message:
                return
            data = frame(to_error_response(BridgeBug("unserializable message"), message["id"]))
        try:
            self._writer.write(data)
        except (OSError, RuntimeError) as exc:
            self._break(exc)

    async def flush(self) -> None:
        async with self._lock:
            if self.broken:
                return
            try:
                await self._writer.drain()
            except (OSError, RuntimeError) as exc:
                self._break(exc)

    def _break(self, exc: BaseException) -> None:
        self.broken = True
        log.warning("front_stdout_broken", error=type(exc).__name__)


class RequestSink:
    """Implements `NotificationSink` for one request: lines on stdout until the request ends."""

    def __init__(self, output: LineOutput) -> None:
        self._output = output
        self.is_open = True

    def send(self, notification: JsonObject) -> None:
        if self.is_open:
            self._output.send(notification)


__all__ = ["LineOutput", "RequestSink"]
