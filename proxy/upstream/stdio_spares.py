"""Spare legacy processes: started ahead of need, so a new stdio session skips the spawn.

Starting a legacy server costs far more than its `initialize` (a Python `mcp` server spends about
half a second importing), and the capabilities a session must declare are only known when a
request arrives. So the bridge keeps `upstream.spare_processes` processes started but not yet
initialized; a new session takes one and initializes it with the request's capabilities, and a
replacement is started in the background. A spare that died is discarded, never handed out.
"""

from __future__ import annotations

import asyncio

import structlog

from config.settings import UpstreamSettings
from proxy.tasks import TaskOwner
from proxy.upstream.stdio import StdioUpstreamSession
from translators.errors import BridgeError

log = structlog.get_logger(__name__)


class SpareProcesses:
    def __init__(self, settings: UpstreamSettings) -> None:
        self._settings = settings
        self._spares: list[StdioUpstreamSession] = []
        self._tasks = TaskOwner()
        self._refilling: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Start filling in the background (a command that cannot start is reported on first use)."""
        self._refill_soon()

    async def take(self) -> StdioUpstreamSession:
        """A started, uninitialized process: a live spare if there is one, else a new one."""
        while self._spares:
            spare = self._spares.pop(0)
            if spare.is_alive:
                self._refill_soon()
                return spare
            await spare.aclose()
        self._refill_soon()
        return await StdioUpstreamSession.spawned(self._settings)

    def _refill_soon(self) -> None:
        if self._closed or self._settings.spare_processes == 0:
            return
        if self._refilling is None or self._refilling.done():
            self._refilling = self._tasks.spawn(self._refill(), name="stdio-spares-refill")

    async def _refill(self) -> None:
        while not self._closed and len(self._spares) < self._settings.spare_processes:
            try:
                spare = await StdioUpstreamSession.spawned(self._settings)
            except BridgeError as exc:
                log.warning("upstream_spare_not_started", error=exc.message)
                return
            if self._closed:
                await spare.aclose()
                return
            self._spares.append(spare)

    async def aclose(self) -> None:
        self._closed = True
        await self._tasks.aclose()
        spares, self._spares = self._spares, []
        await asyncio.gather(*(spare.aclose() for spare in spares), return_exceptions=True)
