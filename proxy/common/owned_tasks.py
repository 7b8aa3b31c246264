"""Owned background tasks: every task the bridge starts is cancelled and awaited on close
(docs/decisions.md § 6)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine
from typing import Any

import structlog

log = structlog.get_logger()


class TaskOwner:
    """A set of tasks with one owner; exceptions are logged, never lost."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background_task_failed", task=task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def stop(self, tasks: Collection[asyncio.Task[Any]] | None = None) -> None:
        """Cancel and await `tasks` (default: all owned), never the calling task itself."""
        current = asyncio.current_task()
        chosen = list(self._tasks if tasks is None else tasks)
        pending = [task for task in chosen if task is not current and not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    async def aclose(self) -> None:
        await self.stop()
