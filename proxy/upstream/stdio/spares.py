"""Spare legacy processes: started ahead of need, so a new stdio session skips the spawn.

Starting a legacy server costs far more than its `initialize` (a Python `mcp` server spends about
half a second importing), and the capabilities a session must declare are only known when a
request arrives. So the bridge keeps `upstream.spare_processes` processes started but not yet
initialized; a new session takes one and initializes it with the request's capabilities, and a
replacement is started in the background. A spare that died is discarded, never handed out.

Over the stdio front the client waits for its first answer, and spares starting then would take the
CPU from the one process that gives it. So there the first process is the one the entry point
started before the bridge's imports (`adopt_first`), handed out to the first session or to a legacy
client's relay (`take_process`), and the spares start only once `release()` says the first answer
went out, and not before that first process has settled (initialized, or gone). `serve` calls
`start()` instead: it has no client waiting yet, so it fills at once.
"""

from __future__ import annotations

import asyncio

import structlog

from config.settings import UpstreamSettings
from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.stdio.children import ChildProcesses
from proxy.upstream.stdio.early import EarlyProcess
from proxy.upstream.stdio.process import command_argv, spawn, stop_process
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
        self._started = False  # filling allowed (`start`, or `release` once the first settled)
        self._first: asyncio.subprocess.Process | None = None  # started first, not handed out yet
        self._first_settled = asyncio.Event()  # the first process is initialized, or gone
        self._first_settled.set()
        self._released = False

    def start(self) -> None:
        """Start filling in the background (a command that cannot start is reported on first
        use)."""
        self._started = True
        self._refill_soon()

    async def adopt_first(self, early: EarlyProcess) -> None:
        """Take over the process the entry point started: it is handed out before any other."""
        process = await early.adopt()
        self._children.add(process)
        self._first = process
        self._first_settled.clear()
        log.debug("upstream_first_process_adopted", pid=process.pid)

    def release(self) -> None:
        """The first answer went out: the spares may start, once the first process has settled."""
        if self._released or self._closed:
            return
        self._released = True
        self._tasks.spawn(self._start_when_settled(), name="stdio-spares-release")

    async def _start_when_settled(self) -> None:
        await self._first_settled.wait()
        if not self._closed:
            log.debug("upstream_spares_released", spares=self._settings.spare_processes)
            self.start()

    def _take_first(self) -> asyncio.subprocess.Process | None:
        process, self._first = self._first, None
        if process is not None and process.returncode is not None:
            self._first_settled.set()
            self._tasks.spawn(self._stop(process), name="stdio-first-close")
            return None
        return process

    async def take_process(self) -> tuple[asyncio.subprocess.Process, str]:
        """A raw started process and its program, for a legacy client's relay (recorded in the
        children; the caller stops it): the first one if it is still there, else a new one. It
        counts as settled at once: no spare waits for a relayed session."""
        process = self._take_first()
        self._first_settled.set()
        if process is not None:
            return process, self._settings_program()
        return await spawn(self._settings, self._children)

    def give_back(self, process: asyncio.subprocess.Process) -> None:
        """A process taken with `take_process` and not used (only probed): the next
        `take_process` gets it again. A second one given back is stopped."""
        if self._first is None and not self._closed and process.returncode is None:
            self._first = process
            return
        self._tasks.spawn(self._stop(process), name="stdio-given-back-close")

    def forget(self, process: asyncio.subprocess.Process) -> None:
        """A process from `take_process` has been stopped by its user."""
        self._children.discard(process)

    def _settings_program(self) -> str:
        return command_argv(self._settings)[1]

    async def _stop(self, process: asyncio.subprocess.Process) -> None:
        """Stop a process never initialized (SIGTERM at once, as a spare)."""
        logger = log.bind(pid=process.pid)
        how = await stop_process(process, self._settings.kill_grace_s, logger, at_once=True)
        self._children.discard(process)
        logger.info("upstream_process_stopped", how=how, code=process.returncode)

    async def take(self) -> StdioUpstreamSession:
        """A started, uninitialized process: the first one, a live spare, or the one being
        started, or a new one."""
        first = self._take_first()
        if first is not None:
            session = StdioUpstreamSession.adopted(
                first, self._settings, self._settings_program(), self._children
            )
            session.on_settled(self._first_settled.set)
            return session
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
        if (
            self._started
            and not self._closed
            and self._settings.spare_processes > 0
            and not self._is_refilling()
        ):
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
        log.info("upstream_spare_started", pid=spare.pid)
        async with self._changed:
            self._spares.append(spare)
            self._changed.notify_all()
        return True

    async def aclose(self) -> None:
        """Stop every spare (and a first process not handed out) at once: none was initialized,
        so none has anything to finish (a spare still importing would read its stdin EOF only when
        started, seconds later). Closing twice is harmless."""
        self._closed = True
        await self._tasks.aclose()
        spares, self._spares = self._spares, []
        first, self._first = self._first, None
        self._first_settled.set()
        await asyncio.gather(
            *(spare.aclose(at_once=True) for spare in spares),
            *([self._stop(first)] if first is not None else []),
            return_exceptions=True,
        )
