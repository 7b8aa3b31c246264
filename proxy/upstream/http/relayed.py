"""A legacy Streamable HTTP session driven by a legacy client's own lines (the upstream side of
`proxy.passthrough.legacy_http`, which relays a stdio client to an HTTP upstream): each line
becomes a POST to `upstream.url` with the session id the upstream issued; a JSON or SSE answer is
written back line by line, a GET stream carries the server's messages outside any request, and
`close()` ends the session with `DELETE`. Nothing is translated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Final, Protocol

import aiohttp
import structlog

from config.settings import UpstreamSettings
from translators.protocol.eras import INITIALIZED
from translators.wire.errors import UpstreamLimitExceeded
from translators.wire.jsonrpc import JsonObject, to_error_response
from translators.wire.sse import SSEDecoder
from translators.wire.stdio_framing import frame

log = structlog.get_logger("proxy.passthrough.legacy_stdio")
READ_CHUNK: Final = 65536
SESSION: Final = "Mcp-Session-Id"
_ACCEPT: Final = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


class ByteWriter(Protocol):
    """The client's stdout (as `proxy.passthrough.legacy_stdio.ByteWriter`)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class RelayedHttpSession:
    """A legacy Streamable HTTP client session driven by the stdio client's lines."""

    def __init__(
        self, client: aiohttp.ClientSession, settings: UpstreamSettings, writer: ByteWriter
    ) -> None:
        self._client = client
        self._url = settings.url or ""
        self._settings = settings
        self._writer = writer
        self._session_id: str | None = None
        self._version: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._get_stream: asyncio.Task[None] | None = None

    def _headers(self) -> dict[str, str]:
        headers = dict(_ACCEPT)
        if self._session_id is not None:
            headers[SESSION] = self._session_id
        if self._version is not None:
            headers["MCP-Protocol-Version"] = self._version
        if self._settings.authorization is not None:
            headers["Authorization"] = self._settings.authorization.get_secret_value()
        return headers

    async def _emit(self, data: bytes) -> None:
        # the initialize answer names the revision every later request carries
        if self._version is None:
            with contextlib.suppress(ValueError, AttributeError):
                version = json.loads(data).get("result", {}).get("protocolVersion")
                self._version = version if isinstance(version, str) else None
        self._writer.write(data.rstrip(b"\n") + b"\n")
        await self._writer.drain()

    async def _answer(self, response: aiohttp.ClientResponse, line: bytes | None = None) -> None:
        """Relay an answer: SSE events one by one, or a JSON body of at most
        `upstream.max_line_bytes` (past it, the client gets -32603 for its request `line`)."""
        limit = self._settings.max_line_bytes
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            decoder = SSEDecoder(max_event_size=limit)
            async for chunk in response.content.iter_any():
                for event in decoder.feed(chunk):
                    if event.data:
                        await self._emit(event.data.encode())
        elif response.status != 202:
            body = bytearray()
            async for chunk in response.content.iter_chunked(READ_CHUNK):
                body += chunk
                if len(body) > limit:
                    log.warning("legacy_stdio_answer_too_large", limit=limit)
                    await self._emit(frame(too_large(line, limit)))
                    return
            if body.strip():
                await self._emit(bytes(body))

    async def send(self, line: bytes) -> None:
        """POST one client line; the first answer with a session id opens the session."""
        async with self._client.post(self._url, data=line, headers=self._headers()) as response:
            issued = response.headers.get(SESSION)
            if issued and self._session_id is None:
                self._session_id = issued
            await self._answer(response, line)
        if self._get_stream is None and f'"{INITIALIZED}"'.encode() in line:
            self._get_stream = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        with contextlib.suppress(aiohttp.ClientError, OSError):
            async with self._client.get(self._url, headers=self._headers()) as response:
                if response.status == 200:
                    await self._answer(response)

    async def forward(self, line: bytes) -> None:
        """A request runs in a task of its own (its answer may stream for long); a notification or a
        response to a push is sent at once, so it reaches the server in the client's order."""
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" in message and "id" in message:
            self.start(line)
        else:
            await self._send_logged(line)

    def start(self, line: bytes) -> None:
        task = asyncio.create_task(self._send_logged(line))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_logged(self, line: bytes) -> None:
        try:
            await self.send(line)
        except (aiohttp.ClientError, OSError) as exc:
            log.warning("legacy_stdio_relay_failed", error=type(exc).__name__)

    async def close(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self._settings.kill_grace_s)
        for task in [*self._tasks, *([self._get_stream] if self._get_stream else [])]:
            task.cancel()
        if self._session_id is not None:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with self._client.delete(self._url, headers=self._headers()):
                    pass


def too_large(line: bytes | None, limit: int) -> JsonObject:
    """The client's error for an upstream answer past `upstream.max_line_bytes`, with the id of
    the request `line` (null when it has none)."""
    try:
        request = json.loads(line) if line is not None else None
    except ValueError:
        request = None
    request_id = request.get("id") if isinstance(request, dict) else None
    fault = UpstreamLimitExceeded(
        f"The upstream server's answer is larger than the limit of {limit} bytes",
        "upstream.max_line_bytes",
    )
    return to_error_response(fault, request_id if isinstance(request_id, int | str) else None)


__all__ = ["ByteWriter", "RelayedHttpSession", "too_large"]
