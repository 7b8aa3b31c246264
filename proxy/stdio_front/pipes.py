"""The stdio front's own stdin and stdout (`proxy.stdio_front.front.serve_stdio`).

Protocol bytes go to a private duplicate of fd 1, and fd 1 then points at stderr, so nothing else
can write into the protocol stream. A pipe is read and written by the event loop (the write side
with no buffer, so `drain()` is per-line backpressure); a file or terminal, which cannot be
polled, is read by a daemon thread and written with blocking writes.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import Final, Protocol

READ_CHUNK: Final = 65536


class LineWriter(Protocol):
    """Where protocol bytes go: an `asyncio.StreamWriter`, or anything with the same two methods."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class _BlockingWriter:
    """A `LineWriter` over a file descriptor that is not a pipe (a file, a terminal, /dev/null).

    Such descriptors are not switched to non-blocking mode, which on a terminal would also change
    stderr."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def drain(self) -> None:
        return None


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def claim_stdout() -> int:
    """A private duplicate of fd 1 for protocol bytes; fd 1 itself then points at stderr, so a stray
    `print` or a library writing to stdout cannot corrupt the protocol stream."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return protocol_fd


async def open_stdin(
    loop: asyncio.AbstractEventLoop,
) -> tuple[asyncio.StreamReader, asyncio.BaseTransport | None]:
    reader = asyncio.StreamReader()
    if _is_pipe(0):
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
        )
        return reader, transport

    def pump() -> None:  # files and terminals cannot be polled: read them in a daemon thread
        try:
            while chunk := os.read(0, READ_CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)
        # stdin unreadable, or the loop already closed on the way out
        except (
            OSError,
            RuntimeError,
        ):
            return

    threading.Thread(target=pump, name="stdio-front-stdin", daemon=True).start()
    return reader, None


async def open_stdout(
    loop: asyncio.AbstractEventLoop, fd: int
) -> tuple[LineWriter, asyncio.BaseTransport | None]:
    """A writer for the protocol fd. On a pipe the write buffer limit is 0, so `drain()` returns
    only once every line has reached the pipe: backpressure per response, and nothing lost at exit.
    """
    if not _is_pipe(fd):
        return _BlockingWriter(fd), None
    pipe = os.fdopen(fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    transport.set_write_buffer_limits(high=0)
    return asyncio.StreamWriter(transport, protocol, None, loop), transport


def end_input(
    reader: asyncio.StreamReader, stdin_transport: asyncio.BaseTransport | None
) -> Callable[[], None]:
    """What a stop signal does to the front: end the input as EOF does."""

    def end() -> None:
        if stdin_transport is not None:
            stdin_transport.close()  # no more reads; its protocol feeds the EOF
        else:
            reader.feed_eof()

    return end


async def read_chunk(reader: asyncio.StreamReader) -> bytes:
    """What stdin has now (at most `READ_CHUNK` bytes); b"" at its end or on a read error."""
    try:
        return await reader.read(READ_CHUNK)
    except OSError:
        return b""


async def first_line(reader: asyncio.StreamReader, limit: int) -> bytes:
    """What stdin holds up to and including its first newline (or up to `limit`, or EOF)."""
    buffer = b""
    while b"\n" not in buffer and len(buffer) <= limit:
        chunk = await read_chunk(reader)
        if not chunk:
            break
        buffer += chunk
    return buffer


__all__ = [
    "READ_CHUNK",
    "LineWriter",
    "claim_stdout",
    "end_input",
    "first_line",
    "open_stdin",
    "open_stdout",
    "read_chunk",
]
