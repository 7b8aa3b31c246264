"""A legacy client on the stdio front: its whole session relayed to the upstream, untranslated.

`mrtr-bridge stdio` decides on the first line: a legacy `initialize` (no modern `_meta`) makes the
rest of the process a legacy session
(`translators.protocol.paths.is_legacy_client_message`).

- **stdio upstream**: one legacy server process is started for the client, and the bytes are
  piped both ways as they come (the client's first line included): requests, pushes and their
  answers, notifications. When the client closes stdin, the process gets EOF and is stopped like
  every legacy process (`upstream.kill_grace_s`); when the process ends, so does the relay.
- **HTTP upstream** (`proxy.passthrough.legacy_http`, imported only for one: it needs aiohttp, and
  a stdio client's first answer waits for the bridge's imports): each line becomes a POST to
  `upstream.url` with the session id the upstream issued; a JSON or SSE answer is written back line
  by line, a GET stream carries the server's messages outside any request, and stdin EOF ends the
  session with `DELETE`.

With `front.legacy_clients = "refuse"` the modern front answers the `initialize` with -32601 naming
the modern versions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

import structlog

from config.settings import Settings, UpstreamSettings
from proxy.common.log_context import log_context
from proxy.upstream.stdio.process import spawn, stop_process

log = structlog.get_logger(__name__)
READ_CHUNK: Final = 65536


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


LegacyStdio = Callable[[bytes, asyncio.StreamReader, ByteWriter], Awaitable[None]]


class StdioProcesses(Protocol):
    """Where a relay gets its legacy process (`proxy.upstream.stdio.spares.SpareProcesses`: the
    process started before the bridge's imports, or one probed and given back, or a new one)."""

    async def take_process(self) -> tuple[asyncio.subprocess.Process, str]: ...

    def give_back(self, process: asyncio.subprocess.Process) -> None: ...

    def forget(self, process: asyncio.subprocess.Process) -> None: ...


async def _pump(reader: asyncio.StreamReader, write: Callable[[bytes], Awaitable[None]]) -> None:
    while chunk := await reader.read(READ_CHUNK):
        await write(chunk)


async def relay_to_process(
    settings: UpstreamSettings,
    first: bytes,
    reader: asyncio.StreamReader,
    writer: ByteWriter,
    processes: StdioProcesses | None = None,
) -> None:
    """Pipe the client to one upstream process (from `processes`, else a new one) and back until
    either side ends."""
    process, program = await (processes.take_process() if processes else spawn(settings))
    assert process.stdin is not None and process.stdout is not None
    stdin = process.stdin
    log.info("legacy_stdio_session_relayed", upstream=f"stdio:{program}", pid=process.pid)

    async def to_process(data: bytes) -> None:
        stdin.write(data)
        await stdin.drain()

    async def to_client(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    try:
        await to_process(first)
        up = asyncio.create_task(_pump(reader, to_process))
        down = asyncio.create_task(_pump(process.stdout, to_client))
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if up.done():  # the client closed stdin: let the server finish writing, then stop it
            with contextlib.suppress(ConnectionError):
                stdin.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settings.kill_grace_s):
                    await down
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
    finally:
        await stop_process(
            process, settings.kill_grace_s, log.bind(program=program, pid=process.pid)
        )
        if processes is not None:
            processes.forget(process)


def legacy_stdio(settings: Settings, processes: StdioProcesses | None = None) -> LegacyStdio | None:
    """The stdio front's handler for a legacy client (by the upstream kind); None when
    `front.legacy_clients = "refuse"`. A stdio upstream's process comes from `processes`."""
    if settings.front.legacy_clients == "refuse":
        return None
    upstream = settings.upstream

    async def handle(first: bytes, reader: asyncio.StreamReader, writer: ByteWriter) -> None:
        with log_context(era="legacy"):
            if upstream.command:
                await relay_to_process(upstream, first, reader, writer, processes)
            else:
                from proxy.passthrough.legacy_http import relay_to_http  # aiohttp: HTTP only

                await relay_to_http(
                    upstream, first, reader, writer, max_line_bytes=settings.front.max_body_bytes
                )

    return handle


__all__ = ["ByteWriter", "LegacyStdio", "StdioProcesses", "legacy_stdio", "relay_to_process"]
