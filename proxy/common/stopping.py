"""How a bridge process stops: the first request to stop is graceful, the deadline or a later signal
is not.

A stop is requested by stdin EOF (the stdio front) or by SIGTERM / SIGINT. The first request runs
the front's graceful stop (`on_request` callbacks: end the input, or end `serve`) and arms the
deadline, if there is one. When the deadline passes, or another SIGTERM / SIGINT arrives while the
bridge is already stopping, `hurry` runs once: it stops the legacy processes at once instead of one
session's grace after another, so the rest of the shutdown finishes quickly. A stdio client gives
the bridge 2 s after closing its stdin, then sends SIGTERM; the stdio front's deadline keeps the
bridge inside that window (docs/operations.md, "Shutdown").

The handlers are installed for the bridge's whole life (`signals()`), from before the first process
is spawned until the last one is gone, so a signal never finds the bridge without them and kills it
with its children left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, Final

import structlog

log = structlog.get_logger(__name__)

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
Hurry = Callable[[], Coroutine[Any, Any, None]]


class BridgeStop:
    """One bridge's stop, whoever asks for it. `hurry` stops the upstream processes at once."""

    def __init__(self, hurry: Hurry | None = None, *, deadline_s: float | None = None) -> None:
        self._hurry = hurry
        self._deadline_s = deadline_s
        self._requested = asyncio.Event()
        self._callbacks: list[Callable[[], None]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._hurrying: asyncio.Task[None] | None = None
        self.signum: signal.Signals | None = None  # the signal that requested the stop, if one did

    @property
    def is_requested(self) -> bool:
        return self._requested.is_set()

    @property
    def is_hurried(self) -> bool:
        """Whether `hurry` has run (its coroutine started at once, as a task)."""
        return self._hurrying is not None

    def on_request(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the stop is requested (at once if it already was)."""
        self._callbacks.append(callback)
        if self.is_requested:
            callback()

    async def wait(self) -> None:
        await self._requested.wait()

    async def before_stop(self, work: Awaitable[None]) -> bool:
        """Await `work` unless the stop is requested first: then `work` is cancelled, awaited while
        it unwinds (what it opened is closed), and the answer is False."""
        task = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self._requested.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            return False
        task.result()  # its failure, if it failed
        return True

    def request(self, reason: str) -> None:
        """Begin the graceful stop (once; later requests change nothing) and arm the deadline."""
        if self.is_requested:
            return
        self._requested.set()
        log.info("bridge_stop_requested", reason=reason, deadline_s=self._deadline_s)
        if self._deadline_s is not None:
            self._timer = asyncio.get_running_loop().call_later(
                self._deadline_s, self.hurry, "deadline"
            )
        for callback in list(self._callbacks):
            callback()

    def hurry(self, reason: str) -> None:
        """Stop the upstream processes now (once), whatever the graceful stop is waiting for."""
        if self._hurry is None or self._hurrying is not None:
            return
        log.info("bridge_stop_hurried", reason=reason)
        self._hurrying = asyncio.get_running_loop().create_task(
            self._hurry(), name="bridge-stop-hurry"
        )

    def _on_signal(self, signum: signal.Signals) -> None:
        if self.is_requested:
            self.hurry(signum.name)
        else:
            self.signum = signum
            self.request(signum.name)

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """SIGTERM and SIGINT request the stop (the first) or hurry it (any later one) while
        inside; on leaving, the handlers from before are back (`mrtr-bridge`'s own,
        proxy/app/interrupts.py, for the rest of the shutdown)."""
        loop = asyncio.get_running_loop()
        previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            yield
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)  # which installs Python's default: undo that
                signal.signal(signum, previous[signum] or signal.SIG_DFL)

    async def aclose(self) -> None:
        """Disarm the deadline and let a hurry under way finish (its SIGKILLs must go out)."""
        if self._timer is not None:
            self._timer.cancel()
        if self._hurrying is not None:
            await asyncio.gather(self._hurrying, return_exceptions=True)


__all__ = ["STOP_SIGNALS", "BridgeStop", "Hurry"]
