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
import functools
import os
from collections.abc import Callable
from typing import Final

import structlog

from config.settings import FrontSettings, Settings
from proxy.common.log_context import log_context
from proxy.common.stopping import BridgeStop
from proxy.observe import access
from proxy.passthrough.legacy_stdio import LegacyStdio, StdioProcesses, legacy_stdio
from proxy.reverse.stdio_front import with_reverse
from proxy.stdio_front.modern import OpenEngine, RequestEngine, serve_modern
from proxy.stdio_front.pipes import (
    LineWriter,
    claim_stdout,
    end_input,
    first_line,
    open_stdin,
    open_stdout,
)
from translators.protocol.paths import is_legacy_client_message
from translators.protocol.request_validation import (
    decode_json,
)
from translators.wire.errors import BridgeBug, BridgeError

log = structlog.get_logger(__name__)

STDIO_PRINCIPAL: Final = "stdio"  # one local client launched this process: a single principal
EOF_GRACE_S: Final = 0.5  # on stdin EOF, how long requests already received may take to finish
_DEFAULTS: Final = FrontSettings()


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
        with log_context(transport="stdio"):
            await legacy(first, reader, writer)
            if on_eof is not None:
                on_eof()
        return
    serve = functools.partial(
        serve_modern,
        first=first,
        reader=reader,
        writer=writer,
        principal=principal,
        max_line_bytes=max_line_bytes,
        max_depth=max_depth,
        eof_grace_s=eof_grace_s,
        on_eof=on_eof,
        access_log=access_log,
        on_first_answer=on_first_answer,
    )
    if engine is not None:
        await serve(engine)
        return
    if open_engine is None:
        raise BridgeBug("the stdio front has neither an engine nor a way to open one")
    if legacy is not None and not first:  # stdin ended before any line: nothing to serve
        log.info("front_stdin_closed", in_flight=0)
        if on_eof is not None:
            on_eof()
        return
    async with open_engine() as opened:
        await serve(opened)


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
