"""2026-07-28 requests to a modern stdio server (docs/directions.md).

`ModernStdioCaller` keeps one process of `upstream.command` (started on the first call, started
again after it exits) and sends every caller's requests to it: a modern server is stateless, so
sessions and principals share it as they share an HTTP upstream. Each request gets an id of the
bridge's own (two clients may both use id 1) and, if it asked for progress, a progress token of
the bridge's own; the answer and the notifications come back to their caller by those: progress
by token, a `subscriptions/listen` stream's by its `subscriptionId`, and log messages (which carry
nothing that names their request) only when exactly one request in flight asked for them, else
they are dropped. A cancelled or timed-out call sends `notifications/cancelled` (the 2026-07-28
cancellation on stdio).
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
from proxy.upstream.stdio.process import spawn, stop_process
from proxy.upstream.stdio.stderr import StderrRelay
from translators.protocol.eras import (
    CANCELLED,
    LOG_MESSAGE,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_SUBSCRIPTION_ID,
    PROGRESS,
    SUBSCRIPTIONS_LISTEN,
)
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
            _log.warning("reverse_stdio_upstream_unavailable", error=type(exc).__name__)
            return failure(request_id, "The upstream server cannot be started")
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
            return failure(request_id, "The upstream server did not answer in time")
        except asyncio.CancelledError:
            self._cancel(own_id)
            raise
        except ConnectionError:
            return failure(request_id, "The upstream server process exited")
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
        stderr = StderrRelay(_log.bind(pid=process.pid)).run(process.stderr)
        drain = asyncio.get_running_loop().create_task(stderr)
        splitter = LineSplitter(self._upstream.max_line_bytes)
        try:
            while chunk := await process.stdout.read(65536):
                for line in splitter.feed(chunk):
                    if isinstance(line, bytes):
                        with contextlib.suppress(ValueError):
                            self._route(json.loads(line))
        except ConnectionError:
            pass  # a broken pipe: the process is of no further use
        finally:
            drain.cancel()
            for own_id, call in list(self._calls.items()):
                if not call.reply.done():
                    call.reply.set_exception(ConnectionResetError("the process exited"))
                self._calls.pop(own_id, None)
            _log.info("reverse_stdio_upstream_ended", pid=process.pid)

    def _route(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" not in message:
            call = self._calls.get(str(message.get("id")))
            if call is not None and not call.reply.done():
                call.reply.set_result(message)
            return
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

    async def aclose(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            await stop_process(process, self._upstream.kill_grace_s, _log.bind(pid=process.pid))
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader


__all__ = ["ModernStdioCaller"]
