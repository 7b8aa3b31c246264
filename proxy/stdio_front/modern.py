"""The modern stdio session: each line a 2026-07-28 request for the engine, answered on stdout in
whatever order the answers come, `notifications/cancelled` cancelling its request; at EOF a short
grace, then whatever still runs is cancelled (`proxy.stdio_front.front` decides when this runs)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Final, Protocol

import structlog

from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.log_context import log_context
from proxy.observe import access
from proxy.stdio_front.output import LineOutput, RequestSink
from proxy.stdio_front.pipes import (
    LineWriter,
    read_chunk,
)
from translators.protocol.eras import CANCELLED, TRACE_META_KEYS
from translators.protocol.request_validation import (
    check_envelope,
    decode_json,
    message_id,
    validate_request,
)
from translators.wire.errors import BridgeBug, BridgeError, InvalidRequest
from translators.wire.jsonrpc import JsonObject, to_error_response
from translators.wire.stdio_framing import FramingError, LineSplitter, oversized_reply

log = structlog.get_logger(__name__)

SHUTDOWN_WAIT_S: Final = 5.0  # how long cancelled requests get to finish their upstream cancels
RequestId = int | str


class RequestEngine(Protocol):
    """What the front needs from `proxy.engine.engine.Engine`."""

    async def handle(self, request: FrontRequest, sink: NotificationSink) -> JsonObject: ...


OpenEngine = Callable[[], AbstractAsyncContextManager[RequestEngine]]


@dataclass
class _InFlight:
    task: asyncio.Task[None]
    sink: RequestSink


class _StdioFront:
    """Routes each inbound line: requests to engine tasks, cancellations to those tasks."""

    def __init__(
        self,
        engine: RequestEngine,
        output: LineOutput,
        principal: str,
        *,
        max_line_bytes: int,
        max_depth: int,
        access_log: access.AccessLog,
    ) -> None:
        self._engine = engine
        self._access = access_log
        self._output = output
        self._principal = principal
        self._max_line_bytes = max_line_bytes
        self._max_depth = max_depth
        self._in_flight: dict[RequestId, _InFlight] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_first_answer: Callable[[], None] | None = None

    @property
    def in_flight_ids(self) -> list[RequestId]:
        return list(self._in_flight)

    def receive(self, item: bytes | FramingError) -> None:
        if isinstance(item, FramingError):
            self._reject_oversized(item)
            return
        try:
            decoded = decode_json(item, self._max_depth)
        except BridgeError as exc:  # ParseError: the id is unknowable
            log.info("front_line_rejected", code=exc.code, size=len(item))
            self._output.send(to_error_response(exc, None))
            return
        if (
            isinstance(decoded, dict)
            and "method" not in decoded
            and ("result" in decoded or "error" in decoded)
        ):
            # this server never sends requests, so no response is due
            log.info("front_response_ignored")
            return
        try:
            message = check_envelope(decoded)
        except BridgeError as exc:
            self._output.send(to_error_response(exc, message_id(decoded)))
            return
        if "id" in message:
            self._start(message)
        elif message["method"] == CANCELLED:
            self._cancel(message.get("params"))
        else:
            log.debug("front_notification_ignored", notification=message["method"])

    def _reject_oversized(self, error: FramingError) -> None:
        log.info("front_line_rejected", reason=error.reason, size=error.size)
        reply = oversized_reply(error, self._max_line_bytes)
        if reply is not None:  # None: a client response, for which nothing is due
            self._output.send(reply)

    def _start(self, message: JsonObject) -> None:
        request_id = message_id(message)
        try:
            route = validate_request(message, None)
            if route.front_request_id in self._in_flight:
                raise InvalidRequest(
                    f"Invalid request: id {route.front_request_id!r} is already in use by a "
                    "request in flight"
                )
        except BridgeError as exc:
            log.info("front_request_rejected", code=exc.code, method=message.get("method"))
            self._output.send(to_error_response(exc, request_id))
            return
        meta = route.params.get("_meta") or {}
        trace = {key: value for key in TRACE_META_KEYS if isinstance(value := meta.get(key), str)}
        request = FrontRequest(
            front_request_id=route.front_request_id,
            method=route.method,
            params=route.params,
            principal=self._principal,
            trace_headers=trace,
            transport="stdio",
        )
        sink = RequestSink(self._output)
        task = asyncio.get_running_loop().create_task(
            self._serve(request, sink), name=f"stdio-front-{route.front_request_id}"
        )
        self._in_flight[route.front_request_id] = _InFlight(task, sink)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, request: FrontRequest, sink: RequestSink) -> None:
        started = time.monotonic()
        note, token = access.begin()
        response: JsonObject | None = None
        try:
            response = await self._engine.handle(request, sink)
        except Exception:  # the engine never raises; if it does, the client still gets an answer
            log.exception("front_engine_crashed", method=request.method)
            response = to_error_response(BridgeBug("engine raised"), request.front_request_id)
        finally:
            access.end(token)
            self._access.stdio_line(request, note, response, started)  # None: cancelled
            sink.is_open = False
            entry = self._in_flight.get(request.front_request_id)
            if entry is not None and entry.task is asyncio.current_task():
                del self._in_flight[request.front_request_id]
        self._output.send(response)
        await self._output.flush()
        if response is not None and self.on_first_answer is not None:
            first_answer, self.on_first_answer = self.on_first_answer, None
            first_answer()

    def _cancel(self, params: Any) -> None:
        """Cancel one request; unknown or finished ids are ignored (spec: cancellation § Error
        Handling)."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            log.debug("front_cancel_ignored")
            return
        entry = self._in_flight.pop(request_id, None)
        if entry is None:
            log.debug("front_cancel_ignored", request_id=request_id)
            return
        entry.sink.is_open = False
        entry.task.cancel()
        log.info("front_request_cancelled", request_id=request_id)

    async def settle(self, grace_s: float) -> None:
        """Give the requests in flight up to `grace_s` seconds to finish (stdin is closed)."""
        if grace_s > 0 and self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace_s)

    async def shutdown(self) -> None:
        """Cancel every request in flight and wait (bounded) for them to finish cancelling
        upstream."""
        for entry in self._in_flight.values():
            entry.sink.is_open = False
        self._in_flight.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_WAIT_S)
            if pending:
                log.warning("front_requests_not_stopped", count=len(pending))


async def serve_modern(
    engine: RequestEngine,
    *,
    first: bytes,
    reader: asyncio.StreamReader,
    writer: LineWriter,
    principal: str,
    max_line_bytes: int,
    max_depth: int,
    eof_grace_s: float,
    on_eof: Callable[[], None] | None,
    access_log: access.AccessLog | None,
    on_first_answer: Callable[[], None] | None,
) -> None:
    """The modern session: `first` and every later line served until EOF, then the grace."""
    output = LineOutput(writer)
    front = _StdioFront(
        engine,
        output,
        principal,
        max_line_bytes=max_line_bytes,
        max_depth=max_depth,
        access_log=access_log or access.AccessLog(),
    )
    front.on_first_answer = on_first_answer
    splitter = LineSplitter(max_line_bytes)
    with log_context(transport="stdio"):
        try:
            for item in splitter.feed(first):
                front.receive(item)
            while chunk := await read_chunk(reader):
                for item in splitter.feed(chunk):
                    front.receive(item)
            log.info("front_stdin_closed", in_flight=len(front.in_flight_ids))
            if on_eof is not None:
                on_eof()
            await front.settle(eof_grace_s)
        finally:
            await front.shutdown()
            await output.flush()


__all__ = ["OpenEngine", "RequestEngine", "serve_modern"]
