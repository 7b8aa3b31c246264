"""The reading side of a legacy stdio session: its stdout split into lines, each one a response
resolving its call, a `ping` answered here, a push or notification handed to `on_unrelated`, or a
line refused (malformed or over `upstream.max_line_bytes`). A mixin of `StdioUpstreamSession`
(proxy/upstream/stdio/session.py)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Final

from config.settings import UpstreamSettings
from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.base import Inbound, InboundHandler
from proxy.upstream.call import OutcomeCall
from proxy.upstream.stdio.process import exit_code, exit_message, upstream_label
from translators.protocol.eras import LEGACY_PING
from translators.wire.errors import INVALID_REQUEST, UpstreamFault, UpstreamProtocolError
from translators.wire.jsonrpc import JsonObject
from translators.wire.stdio_framing import FramingError, LineDecoder

READ_CHUNK: Final = 65536
EXIT_CODE_WAIT_S: Final = 0.5  # after stdout closes, how long to wait for the exit code


def message_kind(message: JsonObject) -> str:
    """'response', 'request', 'notification' or 'invalid' for one decoded line."""
    if message.get("jsonrpc") != "2.0":
        return "invalid"
    if "method" not in message:
        return "response" if "result" in message or "error" in message else "invalid"
    if not isinstance(message["method"], str):
        return "invalid"
    return "notification" if "id" not in message else "request"


class ReadsStdout:
    """Reads the process's stdout; needs the session's process, calls, settings and log."""

    _process: asyncio.subprocess.Process
    _settings: UpstreamSettings
    _program: str
    _on_unrelated: InboundHandler
    _decoder: LineDecoder
    _calls: dict[int, OutcomeCall]
    _tasks: TaskOwner
    _closing: bool
    _log: Any

    if TYPE_CHECKING:  # the session's own (never defined here: they must not shadow its bases)

        def _fail_pending(self, reason: str) -> None: ...

        async def respond(
            self,
            push_id: int | str,
            *,
            result: JsonObject | None = None,
            error: JsonObject | None = None,
        ) -> None: ...

    async def _read_stdout(self) -> None:
        stdout = self._process.stdout
        while stdout is not None:
            try:
                chunk = await stdout.read(READ_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                break
            for item in self._decoder.feed(chunk):
                self._receive(item)
        code = await exit_code(self._process, EXIT_CODE_WAIT_S)
        if not self._closing:
            self._log.warning("upstream_process_exited", code=code, pending_calls=len(self._calls))
            self._fail_pending(exit_message(code))

    def _receive(self, item: JsonObject | FramingError) -> None:
        if isinstance(item, FramingError):
            self._reject_line(item)
            return
        kind = message_kind(item)
        if kind == "response":
            self._resolve(item)
        elif kind == "request" and item["method"] == LEGACY_PING:
            name = f"stdio-ping-{self._process.pid}"
            self._tasks.spawn(self._answer_ping(item["id"]), name=name)
        elif kind in ("request", "notification"):
            self._deliver(Inbound(message=item, related_request_id=None))
        else:
            self._log.warning("upstream_stdio_message_invalid", keys=len(item))

    def _resolve(self, response: JsonObject) -> None:
        upstream_request_id = response.get("id")
        call = (
            self._calls.pop(upstream_request_id, None) if type(upstream_request_id) is int else None
        )
        if call is None:
            self._log.debug("upstream_response_unmatched")
            return
        call.resolve(response)

    def _deliver(self, inbound: Inbound) -> None:
        try:
            self._on_unrelated(inbound)
        except Exception:
            self._log.exception(
                "upstream_inbound_handler_failed", inbound_method=inbound.message.get("method")
            )

    async def _answer_ping(self, push_id: int | str) -> None:
        with contextlib.suppress(UpstreamFault):
            await self.respond(push_id, result={})

    def _reject_line(self, error: FramingError) -> None:
        """A malformed or oversized line is logged (size only) and skipped. An oversized response
        fails its call at once; an oversized push is refused, so neither side waits forever."""
        self._log.warning("upstream_stdio_line_rejected", reason=error.reason, size=error.size)
        head_id = error.head_id
        if error.is_response_head and type(head_id) is int and head_id in self._calls:
            call = self._calls.pop(head_id)
            call.fail(
                UpstreamProtocolError(
                    f"Legacy stdio server {self._program!r} answered {call.method} with a message "
                    "larger than "
                    f"{self._settings.max_line_bytes} bytes (upstream.max_line_bytes)",
                    upstream_label(self._program),
                )
            )
        elif error.head_key == "method" and head_id is not None:
            refusal = {
                "code": INVALID_REQUEST,
                "message": "Request too large for the client (limit "
                f"{self._settings.max_line_bytes} bytes)",
            }
            self._tasks.spawn(
                self._refuse(head_id, refusal), name=f"stdio-refuse-{self._process.pid}"
            )

    async def _refuse(self, push_id: int | str, error: JsonObject) -> None:
        with contextlib.suppress(UpstreamFault):
            await self.respond(push_id, error=error)


__all__ = ["EXIT_CODE_WAIT_S", "READ_CHUNK", "ReadsStdout", "message_kind"]
