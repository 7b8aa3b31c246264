"""A legacy client on the stdio front in front of a 2026-07-28 upstream (docs/directions.md).

`mrtr-bridge stdio --upstream URL` (or `--upstream-command CMD`) hands a client whose first line is
a legacy `initialize` here when the upstream speaks 2026-07-28 (modern-only or dual-era; a legacy
upstream keeps the relay of `proxy.passthrough.legacy_stdio`). The process is the session:
`initialize` is answered from `server/discover`, each request runs upstream round after round
(`proxy.reverse.rounds`) with its pushes, progress and logs written to stdout, answers to pushes
and `notifications/cancelled` are read from stdin, and one upstream `subscriptions/listen` delivers
list changes and resource updates for the whole session (stdio has no GET stream: a legacy stdio
server sends them any time). stdin EOF ends the session and whatever still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any

import structlog

from config.settings import Settings, UpstreamSettings
from proxy.common.log_context import log_context
from proxy.common.per_principal import Caps, PrincipalCounts, held_call_caps
from proxy.passthrough.legacy_stdio import ByteWriter, LegacyStdio, StdioProcesses
from proxy.reverse.listen import Listener
from proxy.reverse.local import answer_locally
from proxy.reverse.rounds import Rounds
from proxy.reverse.sessions import ReverseSession, ReverseSessions
from proxy.upstream.era_probe import probe_process, probe_stdio, stdio_probe_settings
from proxy.upstream.http.wire import client_info
from proxy.upstream.modern.caller import ModernCaller
from proxy.upstream.modern.http_caller import ModernHttpCaller
from proxy.upstream.modern.stdio_caller import ModernStdioCaller
from proxy.upstream.stdio.process import stop_process
from translators.protocol.era_detection import DUAL, MODERN, discover_request
from translators.protocol.eras import CANCELLED, INITIALIZE
from translators.reverse.session import initialize_result, modern_meta, open_client
from translators.wire import fast_json
from translators.wire.errors import INVALID_REQUEST, PARSE_ERROR
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject, error_response, result_response
from translators.wire.stdio_framing import LineSplitter

_log = structlog.get_logger("proxy.reverse")
READ_CHUNK = 65536
_ONE_SESSION = Caps(1, 1, "stdio", "stdio", "legacy sessions")


class _Lines:
    """Protocol lines to stdout, in order, from any task."""

    def __init__(self, writer: ByteWriter) -> None:
        self._writer = writer

    def send(self, message: JsonObject) -> None:
        self._writer.write(fast_json.dumps(message) + b"\n")


class ReverseStdio:
    """One legacy stdio client's session in front of a 2026-07-28 upstream (through `caller`)."""

    def __init__(self, settings: Settings, writer: ByteWriter, caller: ModernCaller) -> None:
        self._settings = settings
        self._writer = writer
        self._out = _Lines(writer)
        self._caller = caller
        # the process is the session: one, which only stdin EOF ends
        self._sessions = ReverseSessions(_ONE_SESSION, float("inf"))
        held = settings.held
        self._held = PrincipalCounts(held_call_caps(held.max_per_principal, held.max_total))
        self._listener = Listener(self._caller)
        self._session: ReverseSession | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self, first: bytes, reader: asyncio.StreamReader) -> None:
        splitter = LineSplitter(self._settings.front.max_body_bytes)
        chunk = first
        try:
            while chunk:
                for item in splitter.feed(chunk):
                    if isinstance(item, bytes):
                        await self._receive(item)
                    else:
                        _log.warning("reverse_stdio_line_refused", reason=item.reason)
                        self._out.send(error_response(item.head_id, _invalid("line too long")))
                await self._writer.drain()
                chunk = await reader.read(READ_CHUNK)
        finally:
            await self._close()

    async def _receive(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = fast_json.loads(line)
        except ValueError:
            self._out.send(error_response(None, {"code": PARSE_ERROR, "message": "Parse error"}))
            return
        if not isinstance(message, dict):
            self._out.send(error_response(None, _invalid("batches are not supported")))
            return
        session = self._session
        if session is None:
            await self._initialize(message)
            return
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message:
                session.answered(message)
            return
        if "id" not in message:
            if method == CANCELLED:
                session.cancel(as_object(message.get("params")).get("requestId"))
            return
        local = answer_locally(session, message, lambda: self._listener.refresh(session, None))
        if local is not None:
            self._out.send(local)
            return
        self._start(session, message)

    async def _initialize(self, message: JsonObject) -> None:
        request_id = message.get("id")
        if message.get("method") != INITIALIZE or "id" not in message:
            self._out.send(error_response(request_id, _invalid("the session is not initialized")))
            return
        view = open_client(as_object(message.get("params")))
        discover = discover_request(client_info())
        discover["params"]["_meta"] = modern_meta(view)
        reply = await self._caller.call(discover, lambda _: None, None)
        if "error" in reply:
            self._out.send(error_response(request_id, as_object(reply.get("error"))))
            return
        result = initialize_result(view, as_object(reply.get("result")), listen_supported=True)
        session = self._session = self._sessions.open("stdio", view)
        outbox: asyncio.Queue[JsonObject] = asyncio.Queue()
        session.outbox = outbox
        self._out.send(result_response(request_id, result))
        self._spawn(self._pump(outbox))
        self._listener.refresh(session, None)

    def _start(self, session: ReverseSession, message: JsonObject) -> None:
        rounds = Rounds(self._settings, self._caller, session, None, self._held)
        key = repr(message["id"])

        async def serve() -> None:
            with contextlib.suppress(asyncio.CancelledError):
                self._out.send(await rounds.run(message, self._out.send))
            session.in_flight.pop(key, None)

        session.in_flight[key] = self._spawn(serve())

    async def _pump(self, outbox: asyncio.Queue[JsonObject]) -> None:
        while True:
            self._out.send(await outbox.get())

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _close(self) -> None:
        self._sessions.close_all()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._listener.aclose()
        await self._caller.aclose()
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()


def _invalid(why: str) -> JsonObject:
    return {"code": INVALID_REQUEST, "message": f"Invalid Request: {why}"}


async def _probe_stdio_first(upstream: UpstreamSettings, processes: StdioProcesses) -> bool:
    """Whether the stdio upstream is modern, probed on the process the relay would use (the one
    started before the bridge's imports): a legacy server that answers the probe with an error gets
    the client's `initialize` on that same process, the spec's fallback (the relay takes it back);
    one that stays silent, dies, or turns out modern is stopped (docs/decisions.md)."""
    process, program = await processes.take_process()
    settings = stdio_probe_settings(upstream)
    try:
        verdict, replied = await probe_process(process, settings)
    except BaseException:
        await _stop_probed(process, program, upstream, processes)
        raise
    if replied and not verdict.modern:
        processes.give_back(process)
    else:
        await _stop_probed(process, program, upstream, processes)
    return verdict.modern


async def _stop_probed(
    process: asyncio.subprocess.Process,
    program: str,
    upstream: UpstreamSettings,
    processes: StdioProcesses,
) -> None:
    await stop_process(process, upstream.kill_grace_s, _log.bind(program=program, pid=process.pid))
    processes.forget(process)


def with_reverse(
    settings: Settings, relay: LegacyStdio | None, processes: StdioProcesses | None = None
) -> LegacyStdio | None:
    """The stdio front's handler for a legacy client: in front of an upstream that speaks
    2026-07-28 (probed when the client comes: a stdio upstream on the process from `processes`, else
    in a throwaway process), the reverse session; else `relay`."""
    if relay is None:
        return relay
    upstream = settings.upstream

    async def handle(first: bytes, reader: asyncio.StreamReader, writer: ByteWriter) -> None:
        if upstream.url is not None:
            from proxy.upstream.era import UpstreamEra  # aiohttp: an HTTP upstream only

            era = UpstreamEra(upstream)
            try:
                modern = await era.probe() in (MODERN, DUAL)
            finally:
                await era.aclose()
        elif processes is not None:
            modern = await _probe_stdio_first(upstream, processes)
        else:
            modern = (await probe_stdio(stdio_probe_settings(upstream))).modern
        if not modern:
            await relay(first, reader, writer)
            return
        timeout_s = settings.front.request_timeout_s
        caller: ModernCaller = (
            ModernHttpCaller(upstream, timeout_s)
            if upstream.url is not None
            else ModernStdioCaller(upstream, timeout_s)
        )
        with log_context(era="legacy", direction="reverse"):
            await ReverseStdio(settings, writer, caller).run(first, reader)

    return handle


__all__ = ["ReverseStdio", "with_reverse"]
