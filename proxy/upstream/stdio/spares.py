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
from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.stdio.children import ChildProcesses
from proxy.upstream.stdio.session import StdioUpstreamSession
from translators.wire.errors import BridgeError

log = structlog.get_logger(__name__)


class SpareProcesses:
    """Spawns every stdio process of one bridge (spares and on-demand ones alike), recording each in
    `children`."""

    def __init__(self, settings: UpstreamSettings, children: ChildProcesses | None = None) -> None:
        self._settings = settings
        self._children = children if children is not None else ChildProcesses()
        self._spares: list[StdioUpstreamSession] = []
        self._changed = asyncio.Condition()  # a spare was added, or a refill ended
        self._tasks = TaskOwner()
        self._refilling: asyncio.Task[bool] | None = None
        self._closed = False

    def start(self) -> None:
        """Start filling in the background (a command that cannot start is reported on first
        use)."""
        self._refill_soon()

    async def take(self) -> StdioUpstreamSession:
        """A started, uninitialized process: a live spare, or the one being started, or a
        new one."""
        async with self._changed:
            while True:
                while self._spares:
                    spare = self._spares.pop(0)
                    if spare.is_alive:
                        self._refill_soon()
                        return spare
                    self._tasks.spawn(spare.aclose(at_once=True), name="stdio-spare-close")
                if not self._is_refilling():
                    break
                # starting one is under way: sooner than starting another
                await self._changed.wait()
        self._refill_soon()
        return await StdioUpstreamSession.spawned(self._settings, self._children)

    def _is_refilling(self) -> bool:
        return self._refilling is not None and not self._refilling.done()

    def _refill_soon(self) -> None:
        if not self._closed and self._settings.spare_processes > 0 and not self._is_refilling():
            self._refilling = self._tasks.spawn(self._refill(), name="stdio-spares-refill")
            self._refilling.add_done_callback(self._after_refill)

    def _after_refill(self, task: asyncio.Task[bool]) -> None:
        """A spare taken while the refill was finishing is replaced too (unless starting one
        failed)."""
        if not task.cancelled() and task.exception() is None and task.result():
            if len(self._spares) < self._settings.spare_processes:
                self._refill_soon()

    async def _refill(self) -> bool:
        """Start processes until there are enough spares; False at the first failure, so a broken
        command is not restarted in a tight loop (the next `take()` tries again)."""
        try:
            while (
                not self._closed
                and (missing := self._settings.spare_processes - len(self._spares)) > 0
            ):
                if not all(await asyncio.gather(*(self._add_one() for _ in range(missing)))):
                    return False
            return True
        finally:
            async with self._changed:
                self._changed.notify_all()

    async def _add_one(self) -> bool:
        try:
            spare = await StdioUpstreamSession.spawned(self._settings, self._children)
        except BridgeError as exc:
            log.warning("upstream_spare_not_started", error=exc.message)
            return False
        if self._closed:
            await spare.aclose(at_once=True)
            return False
        async with self._changed:
            self._spares.append(spare)
            self._changed.notify_all()
        return True

    async def aclose(self) -> None:
        """Stop every spare at once: none was initialized, so none has anything to finish (a
        spare still importing would read its stdin EOF only when started, seconds later)."""
        self._closed = True
        await self._tasks.aclose()
        spares, self._spares = self._spares, []
        await asyncio.gather(
            *(spare.aclose(at_once=True) for spare in spares), return_exceptions=True
        )
