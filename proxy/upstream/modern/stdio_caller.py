"""2026-07-28 requests to a modern stdio server (docs/directions.md).

`ModernStdioCaller` keeps one process of `upstream.command` (started on the first call, started
again after it exits) and sends every caller's requests to it: a modern server is stateless, so
sessions and principals share it as they share an HTTP upstream. Each request gets an id of the
bridge's own (two clients may both use id 1) and, if it asked for progress, a progress token of
the bridge's own; the answer and the notifications come back to their caller by those: progress
by token, a `subscriptions/listen` stream's by its `subscriptionId`, and log messages (which carry
nothing that names their request) only when exactly one request in flight asked for them, else
they are dropped. A cancelled or timed-out call sends `notifications/cancelled` (the 2026-07-28
cancellation on stdio). A process that exits before its first answer fails the calls waiting on it
with the last lines it wrote to stderr as the reason (the user's own program's words: why it could
not start, proxy/common/faults.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Mapping
from typing import Any

import structlog

from config.settings import UpstreamSettings
from proxy.upstream.modern.caller import OnMessage, failure
from proxy.upstream.stdio.process import exit_code, exit_message, spawn, stop_process
from proxy.upstream.stdio.reading import EXIT_CODE_WAIT_S
from proxy.upstream.stdio.stderr import StderrRelay, died_saying
from translators.protocol.eras import (
    CANCELLED,
    LOG_MESSAGE,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_SUBSCRIPTION_ID,
    PROGRESS,
    SUBSCRIPTIONS_LISTEN,
)
from translators.wire.errors import UpstreamSessionLost, UpstreamTimeout, UpstreamUnavailable
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject, notification
from translators.wire.stdio_framing import LineSplitter

_log = structlog.get_logger("proxy.upstream.modern")


class _Call:
    def __init__(self, on_message: OnMessage, token: Any, wants_logs: bool) -> None:
        self.reply: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self.on_message = on_message
        self.token = token  # the caller's own progress token, or None
        self.wants_logs = wants_logs


class ModernStdioCaller:
    """Sends 2026-07-28 requests to one shared process of `upstream.command` (module docstring);
    `aclose()` stops it."""

    def __init__(self, upstream: UpstreamSettings, timeout_s: float) -> None:
        self._upstream = upstream
        self._timeout_s = timeout_s
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._calls: dict[str, _Call] = {}
        self._ids = itertools.count(1)
        self._exited = "the process exited"  # why the calls waiting on a process that ended failed

    async def call(
        self,
        message: JsonObject,
        on_message: OnMessage,
        authorization: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> JsonObject:
        """`authorization` and `headers` have no place on stdio."""
        request_id = message.get("id")
        try:
            process = await self._ensure()
        except Exception as exc:
            start = UpstreamUnavailable(
                f"The modern stdio server cannot be started: {type(exc).__name__}: {exc}",
                public="The upstream server cannot be started",
                reason=f"{type(exc).__name__}: {exc}",  # the user's own command, as it was given
            )
            return failure(request_id, start)
        own_id = f"mrtr-bridge-{next(self._ids)}"
        params = dict(as_object(message.get("params")))
        meta = dict(as_object(params.get("_meta")))
        token = meta.get(META_PROGRESS_TOKEN)
        if token is not None:
            meta[META_PROGRESS_TOKEN] = own_id
        params["_meta"] = meta
        call = _Call(on_message, token, META_LOG_LEVEL in meta)
        self._calls[own_id] = call
        lasting = message.get("method") == SUBSCRIPTIONS_LISTEN
        try:
            self._write(process, {**message, "id": own_id, "params": params})
            async with asyncio.timeout(None if lasting else self._timeout_s):
                reply = await call.reply
        except TimeoutError:
            self._cancel(own_id)
            public = "The upstream server did not answer in time"
            return failure(request_id, UpstreamTimeout(f"{public} ({message.get('method')})"))
        except asyncio.CancelledError:
            self._cancel(own_id)
            raise
        except ConnectionError:
            public = "The upstream server process exited"
            lost = UpstreamSessionLost(public, public=public, reason=self._exited)
            return failure(request_id, lost)
        finally:
            self._calls.pop(own_id, None)
        return {**reply, "id": request_id}

    def _write(self, process: asyncio.subprocess.Process, message: JsonObject) -> None:
        assert process.stdin is not None
        if process.stdin.is_closing():
            raise ConnectionResetError("stdin closed")
        process.stdin.write(json.dumps(message).encode() + b"\n")

    def _cancel(self, own_id: str) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ConnectionError, AssertionError):
                self._write(process, notification(CANCELLED, {"requestId": own_id}))

    async def _ensure(self) -> asyncio.subprocess.Process:
        async with self._starting:
            if self._process is not None and self._process.returncode is None:
                return self._process
            process, program = await spawn(self._upstream)
            _log.info("reverse_stdio_upstream_started", program=program, pid=process.pid)
            self._process = process
            self._reader = asyncio.get_running_loop().create_task(self._read(process))
            return process

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None and process.stderr is not None
        relay = StderrRelay(_log.bind(pid=process.pid))
        drain = asyncio.get_running_loop().create_task(relay.run(process.stderr))
        splitter = LineSplitter(self._upstream.max_line_bytes)
        answered = False
        try:
            while chunk := await process.stdout.read(65536):
                for line in splitter.feed(chunk):
                    if isinstance(line, bytes):
                        with contextlib.suppress(ValueError):
                            answered = self._route(json.loads(line)) or answered
        except ConnectionError:
            pass  # a broken pipe: the process is of no further use
        finally:
            code = await exit_code(process, EXIT_CODE_WAIT_S)
            await asyncio.wait({drain}, timeout=EXIT_CODE_WAIT_S)  # its last words, if it exited
            drain.cancel()
            # the stderr of a process that never answered says why it could not start
            exited = exit_message(code)
            self._exited = exited if answered else died_saying(exited, relay)
            for own_id, call in list(self._calls.items()):
                if not call.reply.done():
                    call.reply.set_exception(ConnectionResetError("the process exited"))
                self._calls.pop(own_id, None)
            _log.info("reverse_stdio_upstream_ended", pid=process.pid)

    def _route(self, message: Any) -> bool:
        """Hand one message to its call; whether it was an answer."""
        if not isinstance(message, dict):
            return False
        if "method" not in message:
            call = self._calls.get(str(message.get("id")))
            if call is not None and not call.reply.done():
                call.reply.set_result(message)
            return True
        params = as_object(message.get("params"))
        method = message.get("method")
        listen = as_object(params.get("_meta")).get(META_SUBSCRIPTION_ID)
        if listen is not None:
            target = self._calls.get(str(listen))
        elif method == PROGRESS:
            target = self._calls.get(str(params.get(META_PROGRESS_TOKEN)))
            if target is not None:
                message = {**message, "params": {**params, META_PROGRESS_TOKEN: target.token}}
        elif method == LOG_MESSAGE:
            asking = [call for call in self._calls.values() if call.wants_logs]
            target = asking[0] if len(asking) == 1 else None
        else:
            target = None
        if target is not None:
            target.on_message(message)
        return False

    async def aclose(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            await stop_process(process, self._upstream.kill_grace_s, _log.bind(pid=process.pid))
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader


__all__ = ["ModernStdioCaller"]
