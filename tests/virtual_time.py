"""An event loop whose clock moves only when nothing else can run: straight to its next timer.

The bridge's loop timers (a held call's batch window and deadline, an attempt's timeout) read the
loop's clock. On a `VirtualTimeLoop` that clock stands still while anything is ready to run, and
when nothing is, it jumps to the earliest timer instead of waiting for it. So `advance(s)` runs
every timer due within `s` seconds, in order, each with all the work it sets off, and returns in
no real time: a test shows that something did not happen within a time by advancing past it, and
measures a deadline exactly, whatever the machine's load.

Only for tests with no real I/O (the scripted engine tests: no socket, no subprocess): a socket's
data would not arrive before the clock had jumped past its timeouts. Work handed to a thread
(`run_in_executor`) is waited for in real time before the clock moves.
"""

from __future__ import annotations

import asyncio
import functools
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")


class _Selector(selectors.DefaultSelector):
    """Polls; where the loop would block until its next timer, moves its clock there instead."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        ready: list[tuple[Any, int]] = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None or self._loop.threads_running:
            return super().select(timeout)  # real I/O only (a thread's result, a signal)
        self._loop.move_to(self._loop.time() + timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a virtual clock that starts at 0."""

    def __init__(self) -> None:
        self._now = 0.0
        self.threads_running = 0
        super().__init__(_Selector(self))

    def time(self) -> float:
        return self._now

    def move_to(self, when: float) -> None:
        self._now = max(self._now, when)

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self.threads_running += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future: asyncio.Future[Any]) -> None:
        self.threads_running -= 1


async def advance(seconds: float) -> None:
    """Move the virtual clock `seconds` on, running every timer due meanwhile (never a real
    sleep: only on a `VirtualTimeLoop`)."""
    if not isinstance(asyncio.get_running_loop(), VirtualTimeLoop):
        raise RuntimeError("advance() moves a virtual clock: run the test @on_virtual_time")
    await asyncio.sleep(seconds)


def on_virtual_time(
    test: Callable[[], Coroutine[Any, Any, None]],
) -> Callable[[], None]:
    """Run the async test `test` (which takes no fixtures) on a fresh `VirtualTimeLoop`."""

    @functools.wraps(test)
    def run() -> None:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            runner.run(test())

    return run


__all__ = ["VirtualTimeLoop", "advance", "on_virtual_time"]
