"""A legacy stdio client relayed to a legacy HTTP upstream (`proxy.passthrough.legacy_stdio` says
when): the client's lines are cut as the modern stdio front cuts them and handed to a
`proxy.upstream.http.relayed.RelayedHttpSession`, which POSTs each to `upstream.url` and writes the
answers back line by line; stdin EOF ends the session with `DELETE`. A module of its own so that
the relay to a stdio upstream never imports aiohttp.
"""

from __future__ import annotations

import asyncio
from typing import Final

import aiohttp
import structlog

from config.settings import UpstreamSettings
from proxy.upstream.http.outbound import upstream_client
from proxy.upstream.http.relayed import ByteWriter, RelayedHttpSession
from translators.wire.stdio_framing import FramingError, LineSplitter, frame, oversized_reply

log = structlog.get_logger("proxy.passthrough.legacy_stdio")
READ_CHUNK: Final = 65536


async def relay_to_http(
    settings: UpstreamSettings,
    first: bytes,
    reader: asyncio.StreamReader,
    writer: ByteWriter,
    *,
    max_line_bytes: int,
) -> None:
    """Drive a legacy HTTP session from the client's lines until stdin ends. Lines are cut as the
    modern stdio front cuts them (`LineSplitter`: linear, at most `max_line_bytes` buffered); a
    longer one never reaches the upstream, and the client gets the same -32600 for it."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.connect_timeout_s)
    async with upstream_client(settings, timeout=timeout) as client:
        session = RelayedHttpSession(client, settings, writer)
        log.info("legacy_stdio_session_relayed", upstream="http")
        splitter = LineSplitter(max_line_bytes)
        opened = False

        async def take(items: list[bytes | FramingError]) -> None:
            nonlocal opened
            for item in items:
                if isinstance(item, FramingError):
                    await _reject(writer, item, max_line_bytes)
                elif not opened:  # initialize, answered before anything else
                    opened = True
                    await session.send(item)
                else:
                    await session.forward(item)

        try:
            chunk = first
            while chunk:
                await take(splitter.feed(chunk))
                chunk = await reader.read(READ_CHUNK)
            await take(splitter.feed(b"\n"))  # a last line without its newline still counts
        finally:
            await session.close()


async def _reject(writer: ByteWriter, error: FramingError, max_line_bytes: int) -> None:
    log.info("front_line_rejected", reason=error.reason, size=error.size)
    reply = oversized_reply(error, max_line_bytes)
    if reply is not None:
        writer.write(frame(reply))
        await writer.drain()


__all__ = ["relay_to_http"]
