"""A loopback TCP relay whose connections can all be cut at once: a dropped network path, with both
ends alive (the bridge keeps running, and so does the legacy server)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class TcpRelay:
    """Accepts on a free 127.0.0.1 port and relays every connection to `target_port`."""

    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.accepted = 0

    @property
    def port(self) -> int:
        assert self._server is not None, "the relay is not started"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _handle(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        self.accepted += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                "127.0.0.1", self._target_port
            )
        except OSError:
            client_writer.close()
            return
        self._writers |= {client_writer, upstream_writer}
        await asyncio.gather(
            _pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer)
        )
        self._writers -= {client_writer, upstream_writer}

    def cut(self) -> int:
        """Abort every relayed connection (both sides see a reset); returns how many were cut."""
        writers, self._writers = list(self._writers), set()
        for writer in writers:
            writer.transport.abort()
        return len(writers) // 2


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()


@contextlib.asynccontextmanager
async def tcp_relay(target_port: int) -> AsyncIterator[TcpRelay]:
    relay = TcpRelay(target_port)
    relay._server = await asyncio.start_server(relay._handle, "127.0.0.1", 0)
    try:
        yield relay
    finally:
        relay.cut()
        relay._server.close()
        await relay._server.wait_closed()


__all__ = ["TcpRelay", "tcp_relay"]
