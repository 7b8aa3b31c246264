"""Legacy stdio upstream: one subprocess is one legacy session (docs/decisions.md § 7).

The bridge spawns the configured command, speaks newline-delimited JSON-RPC in the negotiated
revision (translators.protocol.revisions; batch lines at 2025-03-26) on its stdin/stdout, and
relays its stderr to the log (bounded, rate-limited). Nothing on stdio links a push or a
notification to the call that caused it, so every inbound message is *unrelated*
(`related_request_id=None`) and goes to `on_unrelated` (read in proxy/upstream/stdio/reading.py);
the pool gives it to the exclusive lease holder (docs/decisions.md § 7). `ping` is answered there
and never surfaces.

When the process exits, every pending call fails at once with `UpstreamSessionLost` naming the exit
code, and the session is dead for good (the pool replaces it). Closing: stdin is closed, then after
`kill_grace_s` the process group gets SIGTERM, then SIGKILL (`stdio_process`); how a stopping bridge
makes sure no process outlives it is in `stdio_children`.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Mapping
from importlib.metadata import version
from typing import Any, Final

import structlog

from config.settings import UpstreamSettings
from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.base import EndsWithItsConnection, Inbound, InboundHandler, SendsMessages
from proxy.upstream.call import OutcomeCall
from proxy.upstream.stdio.children import ChildProcesses
from proxy.upstream.stdio.process import (
    exit_code,
    exit_message,
    spawn,
    stop_process,
    upstream_label,
)
from proxy.upstream.stdio.reading import EXIT_CODE_WAIT_S, ReadsStdout
from proxy.upstream.stdio.stderr import StderrRelay, died_saying
from translators.protocol.eras import CANCELLED, INITIALIZE, INITIALIZED
from translators.protocol.revisions import OFFERED, Revision, negotiated
from translators.wire import jsonrpc
from translators.wire.errors import (
    BridgeBug,
    UpstreamFault,
    UpstreamReturnedError,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from translators.wire.jsonrpc import JsonObject
from translators.wire.stdio_framing import LineDecoder, frame

log = structlog.get_logger(__name__)

CLIENT_INFO: Final[JsonObject] = {"name": "mrtr-bridge", "version": version("mrtr-bridge")}


def _nobody(inbound: Inbound) -> None:
    """The inbound handler of a spare process: it has no session yet, so it says nothing."""


class StdioUpstreamSession(ReadsStdout, EndsWithItsConnection, SendsMessages):
    """Implements `UpstreamSession` over one legacy server subprocess. Build it with `open()`."""

    revision: Revision  # set by `initialize`, as `init_result`

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        settings: UpstreamSettings,
        program: str,
        on_unrelated: InboundHandler,
    ) -> None:
        self._process = process
        self._settings = settings
        self._program = program
        self._on_unrelated = on_unrelated
        self._decoder = LineDecoder(settings.max_line_bytes)
        self._ids = itertools.count(1)
        self._calls: dict[int, OutcomeCall] = {}
        self._write_lock = asyncio.Lock()
        self._tasks = TaskOwner()
        self.init_result: JsonObject = {}
        self._lost: str | None = None  # why the session died, once it has
        self._closing = False
        self._closed = asyncio.Event()
        self._spawned_at = time.monotonic()
        self._readers: tuple[asyncio.Task[Any], ...] = ()
        self._children: ChildProcesses | None = None  # where the process is recorded while it runs
        self._on_settled: list[Callable[[], None]] = []
        self._log = log.bind(program=program, pid=process.pid)
        # its `tail` is for `check`, and for the client when the server exited before answering
        # `initialize` (its own program's words, masked and cut: proxy/common/faults.py)
        self.stderr = StderrRelay(self._log)

    @classmethod
    async def open(
        cls, settings: UpstreamSettings, capabilities: JsonObject, *, on_unrelated: InboundHandler
    ) -> StdioUpstreamSession:
        """Spawn the command and run `initialize` / `notifications/initialized` on it."""
        session = await cls.spawned(settings)
        await session.initialize(capabilities, on_unrelated=on_unrelated)
        return session

    @classmethod
    async def spawned(
        cls, settings: UpstreamSettings, children: ChildProcesses | None = None
    ) -> StdioUpstreamSession:
        """A started process (recorded in `children`), not yet initialized (a spare): its
        output is read, nothing is sent."""
        started = time.monotonic()
        process, program = await spawn(settings, children)
        session = cls(process, settings, program, _nobody)
        session._spawned_at = started
        session._children = children
        session._start_readers()
        return session

    @classmethod
    def adopted(
        cls,
        process: asyncio.subprocess.Process,
        settings: UpstreamSettings,
        program: str,
        children: ChildProcesses | None = None,
    ) -> StdioUpstreamSession:
        """A process started elsewhere (already recorded in `children`), not yet initialized: from
        here on as if `spawned` had started it."""
        session = cls(process, settings, program, _nobody)
        session._children = children
        session._start_readers()
        return session

    def on_settled(self, callback: Callable[[], None]) -> None:
        """Call `callback` once `initialize` has answered or failed, or the session closed."""
        self._on_settled.append(callback)

    def _settle(self) -> None:
        callbacks, self._on_settled = self._on_settled, []
        for callback in callbacks:
            callback()

    async def initialize(self, capabilities: JsonObject, *, on_unrelated: InboundHandler) -> None:
        """Make a spawned process a session: `initialize` with these capabilities, then
        `initialized`."""
        self._on_unrelated = on_unrelated
        started = time.monotonic()
        try:
            await self._initialize(capabilities)
        except BaseException:
            await self.aclose()
            raise
        finally:
            self._settle()
        now = time.monotonic()
        self._log.info(
            "upstream_process_initialized",
            duration_s=round(now - started, 4),
            age_s=round(now - self._spawned_at, 3),
        )

    def _start_readers(self) -> None:
        self._readers = (
            self._tasks.spawn(self._read_stdout(), name=f"stdio-stdout-{self.pid}"),
            self._tasks.spawn(
                self.stderr.run(self._process.stderr), name=f"stdio-stderr-{self.pid}"
            ),
        )

    # ---- UpstreamSession ------------------------------------------------------------------------

    @property
    def is_alive(self) -> bool:
        return self._lost is None and not self._closing and self._process.returncode is None

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def program(self) -> str:
        return self._program

    @property
    def has_get_stream(self) -> bool:
        return True  # stdout carries session-wide messages too

    @property
    def reinitialized_count(self) -> int:
        """Always 0 (read by the pool's stats): a process that dies is replaced, never
        re-initialized."""
        return 0

    def start(
        self,
        method: str,
        params: JsonObject,
        *,
        headers: Mapping[str, str] | None = None,
        on_inbound: InboundHandler | None = None,
    ) -> OutcomeCall:
        """Send a request from a task the session owns. `headers` and `on_inbound` are unused: stdio
        has no headers, and every inbound message is unrelated (module docstring)."""
        call = OutcomeCall(next(self._ids), method, self._send_cancel)
        if self._lost is not None or self._closing:
            call.fail(self._lost_error())
            return call
        self._calls[call.upstream_request_id] = call
        message = jsonrpc.request(call.upstream_request_id, method, params)
        self._tasks.spawn(
            self._send_request(call, message), name=f"stdio-request-{call.upstream_request_id}"
        )
        return call

    async def _send_message(self, message: JsonObject, action: str) -> None:
        await self._write(message)

    async def aclose(self, *, at_once: bool = False) -> None:
        """Fail pending calls, stop the process (stdin EOF or `at_once` SIGTERM...), await tasks."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            self._fail_pending("the legacy stdio session was closed by the bridge")
            how = await stop_process(
                self._process, self._settings.kill_grace_s, self._log, at_once=at_once
            )
            if how != "unreaped":  # the pipes are closed: let the readers drain what is buffered
                if self._children is not None:
                    self._children.discard(self._process)
                await asyncio.wait(self._readers, timeout=EXIT_CODE_WAIT_S)
            await self._tasks.aclose()
            self._log.info("upstream_process_stopped", how=how, code=self._process.returncode)
        finally:
            self._closed.set()
            self._settle()

    # ---- lifecycle ------------------------------------------------------------------------------

    async def _initialize(self, capabilities: JsonObject) -> None:
        params = {
            "protocolVersion": OFFERED,
            "capabilities": capabilities,
            "clientInfo": CLIENT_INFO,
        }
        call = self.start(INITIALIZE, params)
        timeout = self._settings.init_timeout_s
        data = upstream_label(self._program)
        try:
            async with asyncio.timeout(timeout):
                result = await call.result()
        except TimeoutError:
            raise UpstreamTimeout(
                f"Legacy stdio server {self._program!r} did not answer initialize within "
                f"{timeout:g} s (upstream.init_timeout_s)",
                data,
                reason=f"it did not answer initialize within {timeout:g} s"
                " (upstream.init_timeout_s)",
            ) from None
        except UpstreamReturnedError as exc:
            raise UpstreamUnavailable(
                f"Legacy stdio server {self._program!r} refused initialize: {exc.message}",
                data,
                reason=f"it refused initialize: {exc.message}",
            ) from exc
        except UpstreamSessionLost as exc:
            raise UpstreamUnavailable(
                f"Legacy stdio server {self._program!r} stopped before answering initialize: "
                f"{exc.message}",
                data,
                reason=await self._exit_reason(),
            ) from exc
        self.revision = negotiated(
            f"stdio server {self._program!r}", result.get("protocolVersion"), data
        )
        self._decoder.batches = self.revision.batches
        self.init_result = result
        await self.notify(INITIALIZED)

    async def _exit_reason(self) -> str:
        """Why a process that exited before answering `initialize` did: its exit, and the last
        lines it wrote to stderr (read to their end, within `EXIT_CODE_WAIT_S`)."""
        if len(self._readers) > 1:
            await asyncio.wait({self._readers[1]}, timeout=EXIT_CODE_WAIT_S)
        exited = self._lost or "the process stopped"
        return died_saying(f"{exited} before answering initialize", self.stderr)

    def _lost_error(self) -> UpstreamSessionLost:
        message = self._lost or "the legacy stdio session was closed by the bridge"
        return (
            UpstreamSessionLost(  # the reason is the bridge's own words (exit code, or its close)
                f"{message} (command: {self._program}, pid {self.pid})",
                upstream_label(self._program),
                public=f"The upstream session was lost: {message}",
            )
        )

    def _fail_pending(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
        calls = list(self._calls.values())
        self._calls.clear()
        for call in calls:
            call.fail(self._lost_error())

    # ---- writing --------------------------------------------------------------------------------

    async def _write(self, message: JsonObject) -> None:
        """Write one line to the child's stdin; the lock keeps lines whole and in order."""
        if self._lost is not None or self._closing:
            raise self._lost_error()
        stdin = self._process.stdin
        if stdin is None:
            raise BridgeBug("stdio upstream process has no stdin pipe")
        data = frame(message)
        async with self._write_lock:
            try:
                stdin.write(data)
                await stdin.drain()
            except (OSError, RuntimeError) as exc:  # a gone child (uvloop: RuntimeError)
                self._log.info("upstream_stdin_write_failed", error=type(exc).__name__)
                if self._lost is None:  # say why, as the reader will once it sees the end of stdout
                    self._fail_pending(
                        exit_message(await exit_code(self._process, EXIT_CODE_WAIT_S))
                    )
                raise self._lost_error() from exc

    async def _send_request(self, call: OutcomeCall, message: JsonObject) -> None:
        try:
            await self._write(message)
        except UpstreamFault as exc:
            self._calls.pop(call.upstream_request_id, None)
            call.fail(exc)

    async def _send_cancel(self, call: OutcomeCall, reason: str) -> None:
        self._calls.pop(call.upstream_request_id, None)
        if self._lost is not None or self._closing:
            return
        params = {"requestId": call.upstream_request_id, "reason": reason}
        try:
            await self.notify(CANCELLED, params)
        except UpstreamFault:
            self._log.info("upstream_cancel_not_sent", upstream_request_id=call.upstream_request_id)


__all__ = ["CLIENT_INFO", "OutcomeCall", "StdioUpstreamSession"]
