"""Re-initializing a legacy Streamable HTTP session in place when the server ends it (a 404 on a
call, on a notification or on the GET stream; 2025-11-25/basic/transports.mdx § Session
Management): once per expiry, however many callers saw it, in a task the session owns.

`Reinitialization` is one of the session's parts (proxy/upstream/http/session.py), given what it
needs: the channel (whose generation a re-initialize moves on), the session's tasks, its
handshake, its check that it is still open and what it does when a re-initialize fails. A call
reads only `pending`, a plain attribute that is False unless a re-initialize is due, under way or
failed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.http.channel import HttpChannel
from translators.wire.errors import BridgeError


class Reinitialization:
    """Starts a new upstream session in place (§ 10.5) for one `HttpUpstreamSession`.

    The handshake runs in a task the session owns, so a caller cancelled meanwhile cannot leave the
    session half initialized; every caller waits for the same outcome. A failed handshake is final
    (`error`): every later call gets it, and the pool replaces the session."""

    def __init__(
        self,
        channel: HttpChannel,
        tasks: TaskOwner,
        handshake: Callable[[], Awaitable[None]],
        check_open: Callable[[], None],
        on_failed: Callable[[], None],
        log: Any,
    ) -> None:
        self._channel = channel
        self._tasks = tasks
        self._handshake = handshake  # stops the old GET stream, then initializes anew
        self._check_open = check_open  # raises once the session is closed
        self._on_failed = on_failed  # the session is broken: the pool replaces it
        self._log = log
        self.pending = False  # a re-initialize is due, under way or failed: ask `generation()`
        self.count = 0  # re-initializes that succeeded
        self.error: BridgeError | None = None
        self._due = False
        self._task: asyncio.Task[None] | None = None

    async def generation(self) -> int:
        """The generation to send on, after any re-initialize that is due or under way."""
        if self.error is not None:
            raise self.error
        if self._due or (self._task is not None and not self._task.done()):
            await self.reinitialize(self._channel.generation)
        return self._channel.generation

    def due(self) -> None:
        """A message of the current generation met a 404: re-initialize before the next call."""
        self._due = self.pending = True

    def now(self) -> None:
        """The GET stream met a 404: re-initialize now, not at the next call."""
        self.due()
        self._tasks.spawn(
            self._eagerly(self._channel.generation), name="upstream-reinitialize-eager"
        )

    async def reinitialize(self, seen_generation: int) -> None:
        """Re-initialize the session whose generation `seen_generation` expired, unless that was
        done already; wait for it either way."""
        self._check_open()
        running = self._task is not None and not self._task.done()
        if self.error is not None and not running:
            raise self.error
        if not running and self._channel.generation == seen_generation:
            self.pending = True
            self._task = self._tasks.spawn(self._run(), name="upstream-reinitialize")
        if self._task is not None:
            await asyncio.wait({self._task})
        self._check_open()
        if self.error is not None:
            raise self.error

    async def _eagerly(self, generation: int) -> None:
        try:
            await self.reinitialize(generation)
        except BridgeError:
            pass  # logged by _run; the session is broken and the pool replaces it

    async def _run(self) -> None:
        self._log.info("upstream_session_reinitializing")
        try:
            await self._handshake()
        except BridgeError as exc:
            self.error = exc  # `pending` stays set: every later call raises it
            self._on_failed()
            self._log.warning("upstream_session_reinitialize_failed", error=exc.message)
            return
        self._due = self.pending = False
        self.count += 1
        self._log.info("upstream_session_reinitialized")


__all__ = ["Reinitialization"]
