"""Re-initializing a legacy Streamable HTTP session in place when the server ends it (a 404 on a
call or on the GET stream; 2025-11-25/basic/transports.mdx § Session Management): once per expiry,
however many callers saw it, in a task the session owns. A mixin of `HttpUpstreamSession`
(proxy/upstream/http/session.py)."""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Any

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.http.channel import HttpChannel
from proxy.upstream.http.streams import GetStream, GetStreamState
from translators.wire.errors import BridgeError


class SessionState(enum.Enum):
    """Where an HTTP upstream session's life stands (re-initializing in place keeps it OPEN)."""

    OPEN = "open"
    BROKEN = "broken"  # a re-initialize failed: calls get its error, the pool replaces the session
    CLOSED = "closed"  # aclose() ran


class Reinitializes:
    """Needs the session's channel, GET stream, tasks, state and log."""

    _channel: HttpChannel
    _get_stream: GetStream | None
    _reinit_task: asyncio.Task[None] | None
    _reinit_error: BridgeError | None
    _tasks: TaskOwner
    _state: SessionState
    _log: Any
    reinitialized_count: int

    if TYPE_CHECKING:  # the session's own (never defined here: they must not shadow its bases)

        @property
        def has_get_stream(self) -> bool: ...

        def _check_open(self) -> None: ...

        async def _handshake(self) -> None: ...

    async def _current_generation(self) -> int:
        """The generation to send on, after any re-initialize that is due or under way."""
        if self._get_stream is not None and self._get_stream.state is GetStreamState.EXPIRED:
            await self._reinitialize(self._channel.generation)
        elif self._reinit_task is not None and not self._reinit_task.done():
            await self._reinitialize(self._channel.generation)
        elif self._reinit_error is not None:
            raise self._reinit_error
        return self._channel.generation

    async def _reinitialize(self, seen_generation: int) -> None:
        """Start a new upstream session in place (§ 10.5), once per expiry however many saw it.

        The handshake runs in a task the session owns, so a caller cancelled meanwhile cannot leave
        the session half initialized; every caller waits for the same outcome."""
        self._check_open()
        running = self._reinit_task is not None and not self._reinit_task.done()
        if not running and self._channel.generation == seen_generation:
            self._reinit_task = self._tasks.spawn(
                self._run_reinitialize(), name="upstream-reinitialize"
            )
        if self._reinit_task is not None:
            await asyncio.wait({self._reinit_task})
        self._check_open()
        if self._reinit_error is not None:
            raise self._reinit_error

    def _get_stream_expired(self) -> None:
        """The GET stream met a 404: re-initialize now, not at the next call."""
        if self._state is not SessionState.CLOSED:
            self._tasks.spawn(
                self._reinitialize_eagerly(self._channel.generation),
                name="upstream-reinitialize-eager",
            )

    async def _reinitialize_eagerly(self, generation: int) -> None:
        try:
            await self._reinitialize(generation)
        except BridgeError:
            pass  # logged by _run_reinitialize; the session is broken and the pool replaces it

    async def _run_reinitialize(self) -> None:
        self._log.info("upstream_session_reinitializing")
        if self._get_stream is not None:
            await self._get_stream.stop()
        try:
            await self._handshake()
        except BridgeError as exc:
            self._reinit_error = exc
            if self._state is SessionState.OPEN:
                self._state = SessionState.BROKEN
            self._log.warning("upstream_session_reinitialize_failed", error=exc.message)
            return
        self.reinitialized_count += 1
        self._log.info("upstream_session_reinitialized", has_get_stream=self.has_get_stream)


__all__ = ["Reinitializes", "SessionState"]
