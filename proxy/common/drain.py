"""Shutdown within one grace period: refuse new work, let attached requests finish, cut off the
rest.

`Drain` tracks the engine requests in flight (the tasks inside `Engine.handle`). `stop()` refuses
new work from then on; `drain(deadline)` waits for the requests in flight until `deadline` (loop
time) and then cuts the rest off: each such task is cancelled (which cancels its upstream call) and
`Engine.handle` turns that cancellation into a JSON-RPC error saying the bridge is shutting down, so
the client gets an answer rather than a dropped connection. The whole timeline is in
docs/operations.md § Shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

import structlog

# The part of the grace kept, after the drain, for cutting off what is left, abandoning held calls
# and closing upstream sessions: a quarter of it, at most this.
CLOSE_RESERVE_MAX_S: Final = 2.0
_log = structlog.get_logger("proxy.common.drain")


def close_reserve_s(grace_s: float) -> float:
    """How much of `grace_s` comes after the drain (cut-off, abandoning, closing)."""
    return min(CLOSE_RESERVE_MAX_S, grace_s / 4)


class Drain:
    """The engine's requests in flight, and the shutdown that drains them."""

    def __init__(self) -> None:
        self._inflight: set[asyncio.Task[object]] = set()
        self._cut: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.stopping = False

    def enter(self) -> asyncio.Task[object] | None:
        """The calling task starts a request (None outside a task)."""
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
            self._idle.clear()
        return task

    def leave(self, task: asyncio.Task[object] | None) -> None:
        if task is None:
            return
        self._inflight.discard(task)
        if not self._inflight:
            self._idle.set()

    def was_cut(self, task: asyncio.Task[object] | None) -> bool:
        """Whether `task` was cancelled by the cut-off (then the cancellation is undone once)."""
        if task is None or task not in self._cut:
            return False
        self._cut.discard(task)
        task.uncancel()
        return True

    def stop(self) -> None:
        """From now on new requests are refused."""
        self.stopping = True

    async def drain(
        self, deadline: float, cut_wait_s: float, before_cut: Callable[[], None]
    ) -> None:
        """Wait for the requests in flight until `deadline` (loop time); then `before_cut()`
        (which answers what it can itself), cut off the rest, and give them `cut_wait_s` to send
        their upstream cancels and answer their clients."""
        try:
            async with asyncio.timeout_at(deadline):
                await self._idle.wait()
            return
        except TimeoutError:
            pass
        before_cut()
        await asyncio.sleep(0)  # the requests answered by `before_cut` leave
        left = [task for task in self._inflight if not task.done()]
        _log.warning("shutdown_cut_off", cancelled=len(left))
        for task in left:
            self._cut.add(task)
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=cut_wait_s)


__all__ = ["CLOSE_RESERVE_MAX_S", "Drain", "close_reserve_s"]
