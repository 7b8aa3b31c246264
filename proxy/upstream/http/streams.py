"""A legacy session's GET stream (§ 10.3): kept open for the messages the server sends outside any
call, reconnected after `retry` and resumed with `Last-Event-ID` (§ 10.4); what it brings goes
through the session's `StreamRouter` (proxy/upstream/http/call.py, docs/decisions.md § 7, § 16)."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any, Final

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.http.call import StreamRouter
from proxy.upstream.http.channel import HttpChannel, SessionExpired
from proxy.upstream.http.wire import SSE_TYPE, StreamCursor
from translators.wire.errors import UpstreamFault, UpstreamProtocolError

MAX_GET_FAILURES: Final = (
    5  # consecutive GET-stream attempts that fail, or end soon bringing nothing
)
HEALTHY_STREAM_S: Final = (
    5.0  # a GET stream open this long counts as healthy even if it brought nothing
)


class GetStreamState(enum.Enum):
    """Where a GET stream's life stands (it is reopened while OPEN and the generation is
    current)."""

    OPEN = "open"
    EXPIRED = "expired"  # the upstream answered 404: the session is gone (re-initialized now)
    LOST = "lost"  # repeated failures: pushes sent there would be dropped, the session is not alive


class GetStream:
    """The session's GET stream for one generation (one `Mcp-Session-Id`)."""

    def __init__(
        self,
        channel: HttpChannel,
        router: StreamRouter,
        tasks: TaskOwner,
        log: Any,
        *,
        on_expired: Callable[[], None],
    ) -> None:
        self._channel = channel
        self._on_expired = on_expired  # the server ended the session: re-initialize it now
        self._router = router
        self._tasks = tasks
        self._log = log
        self._generation = channel.generation
        self._task: asyncio.Task[None] | None = None
        self.state = GetStreamState.OPEN

    @property
    def is_open(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Open the stream and return once the upstream accepted it (or said 405: none offered)."""
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = self._tasks.spawn(self._run(opened), name="upstream-get-stream")
        await opened

    async def stop(self) -> None:
        if self._task is not None:
            await self._tasks.stop([self._task])

    async def _run(self, opened: asyncio.Future[None]) -> None:
        cursor, failures, loop = StreamCursor(), 0, asyncio.get_running_loop()
        while self._generation == self._channel.generation:
            before, started = cursor.events_seen, loop.time()
            try:
                if not await self._connect_once(cursor, opened):
                    return
            except UpstreamFault as exc:
                if not opened.done():
                    opened.set_exception(exc)
                    return
                self._log.info("upstream_get_stream_failed", error=exc.message)
            healthy = cursor.events_seen > before or loop.time() - started >= HEALTHY_STREAM_S
            failures = 0 if healthy else failures + 1
            if failures >= MAX_GET_FAILURES:
                self.state = GetStreamState.LOST
                self._log.warning("upstream_get_stream_lost", attempts=failures)
                return
            await asyncio.sleep(cursor.retry_s)

    async def _connect_once(self, cursor: StreamCursor, opened: asyncio.Future[None]) -> bool:
        """One GET connection, read to its end; False when the stream should not be reopened."""
        async with self._channel.exchange(
            "GET", "GET stream", accept=SSE_TYPE, last_event_id=cursor.last_event_id
        ) as resp:
            if resp.status == 405:
                self._log.info("upstream_get_stream_unsupported")
                _settle(opened)
                return False
            try:
                await self._channel.check_status(
                    resp, self._generation, "GET stream", content_type=SSE_TYPE
                )
            except SessionExpired:
                if not opened.done():
                    raise UpstreamProtocolError("answered the first GET stream with 404") from None
                self.state = GetStreamState.EXPIRED
                self._log.info("upstream_session_expired", stream="get")
                self._on_expired()
                return False
            _settle(opened)
            await self._router.read_stream(resp, cursor, None)
        return True


def _settle(opened: asyncio.Future[None]) -> None:
    if not opened.done():
        opened.set_result(None)


__all__ = ["HEALTHY_STREAM_S", "MAX_GET_FAILURES", "GetStream", "GetStreamState"]
