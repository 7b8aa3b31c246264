"""Modern stdio front: the bridge launched by a local modern client (spec
2026-07-28 basic/transports/stdio).

stdin carries one JSON-RPC message per line. Each request is validated (the ladder of
`translators.protocol.request_validation`, without the HTTP header rung) and handed to the engine
in its own task, so
requests run concurrently and are answered as they finish. stdout carries protocol lines only:
responses and the notifications of in-flight requests, each written whole by one writer; logs go to
stderr. `notifications/cancelled` cancels that request's task (the engine turns the cancellation
into an upstream cancel) and nothing more is written for it. At stdin EOF (or on SIGTERM/SIGINT,
taken as EOF), requests in flight get a short grace to finish, the rest are cancelled, and the front
returns. The bridge's stop (`proxy.common.stopping`) learns of the EOF at once, so its deadline
counts from there.

A client whose first line is a legacy `initialize` (no modern `_meta`) gets a legacy session
relayed to the upstream instead (`proxy.passthrough.legacy_stdio`), or, in front of an HTTP
upstream that speaks 2026-07-28, served by the bridge (`proxy.reverse.stdio_front`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Final, Protocol

import structlog

from config.settings import FrontSettings, Settings
from proxy.common.front_request import FrontRequest, NotificationSink
from proxy.common.stopping import BridgeStop
from proxy.observe import access
from proxy.passthrough.legacy_stdio import LegacyStdio, StdioProcesses, legacy_stdio
from proxy.reverse.stdio_front import with_reverse
from proxy.stdio_front.output import LineOutput, RequestSink
from proxy.stdio_front.pipes import (
    LineWriter,
    claim_stdout,
    end_input,
    first_line,
    open_stdin,
    open_stdout,
    read_chunk,
)
from translators.protocol.era_detection import is_legacy_client_message
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

STDIO_PRINCIPAL: Final = "stdio"  # one local client launched this process: a single principal
EOF_GRACE_S: Final = 0.5  # on stdin EOF, how long requests already received may take to finish
SHUTDOWN_WAIT_S: Final = (
    5.0  # then how long cancelled requests get to finish their upstream cancels
)
_DEFAULTS: Final = FrontSettings()
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


def _is_legacy_opening(buffer: bytes, max_depth: int) -> bool:
    line = buffer.split(b"\n", 1)[0]
    try:
        return is_legacy_client_message(decode_json(line, max_depth))
    except BridgeError:
        return False


async def run_stdio_front(
    engine: RequestEngine | None,
    *,
    reader: asyncio.StreamReader,
    writer: LineWriter,
    principal: str = STDIO_PRINCIPAL,
    max_line_bytes: int = _DEFAULTS.max_body_bytes,
    max_depth: int = _DEFAULTS.max_json_depth,
    eof_grace_s: float = EOF_GRACE_S,
    on_eof: Callable[[], None] | None = None,
    legacy: LegacyStdio | None = None,
    access_log: access.AccessLog | None = None,
    on_first_answer: Callable[[], None] | None = None,
    open_engine: OpenEngine | None = None,
    first: bytes | None = None,
) -> None:
    """Serve modern JSON-RPC lines from `reader` until EOF, writing protocol lines to `writer`.

    At EOF, `on_eof` is called, then requests already received get `eof_grace_s` seconds to finish
    (so `printf ... | mrtr-bridge stdio` is answered); whatever is still running then is cancelled,
    and the function returns. With `legacy`, a first line that opens a legacy session (`initialize`
    without modern `_meta`) hands the whole stream to it instead
    (`proxy.passthrough.legacy_stdio`). `on_first_answer` is called once the first response is
    written and flushed (modern lines only: the spare processes start then). Without an `engine`,
    `open_engine` makes one, only once the first line is known to be modern: a legacy client never
    waits for the engine's imports."""
    if first is None:
        first = await first_line(reader, max_line_bytes) if legacy is not None else b""
    if legacy is not None and _is_legacy_opening(first, max_depth):
        with structlog.contextvars.bound_contextvars(transport="stdio"):
            await legacy(first, reader, writer)
            if on_eof is not None:
                on_eof()
        return
    if engine is None:
        if open_engine is None:
            raise BridgeBug("the stdio front has neither an engine nor a way to open one")
        if legacy is not None and not first:  # stdin ended before any line: nothing to serve
            log.info("front_stdin_closed", in_flight=0)
            if on_eof is not None:
                on_eof()
            return
        async with open_engine() as opened:
            await run_stdio_front(
                opened,
                reader=reader,
                writer=writer,
                principal=principal,
                max_line_bytes=max_line_bytes,
                max_depth=max_depth,
                eof_grace_s=eof_grace_s,
                on_eof=on_eof,
                access_log=access_log,
                on_first_answer=on_first_answer,
                first=first,
            )
        return
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
    with structlog.contextvars.bound_contextvars(transport="stdio"):
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


async def serve_stdio(
    settings: Settings,
    engine: RequestEngine | None,
    stop: BridgeStop | None = None,
    *,
    processes: StdioProcesses | None = None,
    on_first_answer: Callable[[], None] | None = None,
    open_engine: OpenEngine | None = None,
) -> None:
    """Serve the modern stdio front on this process's stdin and stdout until stdin reaches EOF
    (or the stop is requested: SIGTERM or SIGINT). stdin EOF requests the `stop` in turn. Without a
    `stop`, the front handles the stop signals itself. `processes`: where a legacy client's relay
    gets its process; `on_first_answer`: called once the first modern answer went out. Without an
    `engine`, `open_engine` makes one for a modern client (`run_stdio_front`)."""
    if stop is None:
        stop = BridgeStop()
        with stop.signals():
            await serve_stdio(
                settings,
                engine,
                stop,
                processes=processes,
                on_first_answer=on_first_answer,
                open_engine=open_engine,
            )
        return
    loop = asyncio.get_running_loop()
    protocol_fd = claim_stdout()
    reader, stdin_transport = await open_stdin(loop)
    writer, stdout_transport = await open_stdout(loop, protocol_fd)
    log.info("front_stdio_started", max_line_bytes=settings.front.max_body_bytes)
    stop.on_request(end_input(reader, stdin_transport))
    try:
        await run_stdio_front(
            engine,
            reader=reader,
            writer=writer,
            principal=STDIO_PRINCIPAL,
            max_line_bytes=settings.front.max_body_bytes,
            max_depth=settings.front.max_json_depth,
            on_eof=lambda: stop.request("stdin_closed"),
            legacy=with_reverse(settings, legacy_stdio(settings, processes), processes),
            on_first_answer=on_first_answer,
            open_engine=open_engine,
            access_log=access.AccessLog(
                settings.log.access, access.upstream_name(settings.upstream)
            ),
        )
    finally:
        for transport in (stdin_transport, stdout_transport):
            if transport is not None:
                transport.close()
        if stdout_transport is None:
            os.close(protocol_fd)


__all__ = [
    "EOF_GRACE_S",
    "STDIO_PRINCIPAL",
    "LineWriter",
    "OpenEngine",
    "RequestEngine",
    "run_stdio_front",
    "serve_stdio",
]
