"""A legacy Streamable HTTP session driven by a legacy client's own lines (the upstream side of
`proxy.passthrough.legacy_http`, which relays a stdio client to an HTTP upstream): each line
becomes a POST to `upstream.url` with the session id the upstream issued; a JSON or SSE answer is
written back line by line, a GET stream carries the server's messages outside any request, and
`close()` ends the session with `DELETE`. Nothing is translated. Answers are read with the one
body reader and requests held to the one redirect rule of every upstream client: an answer past
`upstream.max_line_bytes`, or a redirect off the upstream's origin, becomes the client's -32603
for its request, naming the reason (`proxy.common.faults.reported_error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Final, Protocol

import aiohttp
import structlog

from config.settings import UpstreamSettings
from proxy.common.faults import reported_error
from proxy.upstream.http.wire import is_sse, read_body, stream_decoder
from translators.protocol.eras import INITIALIZED
from translators.wire.errors import UpstreamFault
from translators.wire.jsonrpc import error_response
from translators.wire.stdio_framing import frame

log = structlog.get_logger("proxy.passthrough.legacy_stdio")
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

    async def _answer(self, response: aiohttp.ClientResponse) -> None:
        """Relay an answer: SSE events one by one, or a JSON body, each of at most
        `upstream.max_line_bytes` (`UpstreamMessageTooLarge` past it)."""
        limit = self._settings.max_line_bytes
        if is_sse(response):
            decoder = stream_decoder(limit)
            async for chunk in response.content.iter_any():
                for event in decoder.feed(chunk):
                    if event.data:
                        await self._emit(event.data.encode())
        elif response.status != 202:
            body = await read_body(response, limit)
            if body.strip():
                await self._emit(body)

    async def send(self, line: bytes) -> None:
        """POST one client line; the first answer with a session id opens the session. A failure
        of the bridge's own (an answer past the cap, a redirect it does not follow) answers the
        request `line` with its -32603."""
        try:
            async with self._client.post(self._url, data=line, headers=self._headers()) as response:
                issued = response.headers.get(SESSION)
                if issued and self._session_id is None:
                    self._session_id = issued
                await self._answer(response)
        except UpstreamFault as fault:
            await self._emit(frame(error_response(_request_id(line), reported_error(fault))))
            return
        if self._get_stream is None and f'"{INITIALIZED}"'.encode() in line:
            self._get_stream = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        with contextlib.suppress(aiohttp.ClientError, OSError, UpstreamFault):
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
            with contextlib.suppress(aiohttp.ClientError, OSError, UpstreamFault):
                async with self._client.delete(self._url, headers=self._headers()):
                    pass


def _request_id(line: bytes) -> int | str | None:
    """The id of the request `line`, None when it is not one (the error then has no id)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, int | str) else None


__all__ = ["ByteWriter", "RelayedHttpSession"]
