"""Reading a legacy session's SSE streams: routing what arrives (docs/decisions.md § 7, § 16) and
keeping the GET stream open (§ 10.3), reconnecting after `retry` and resuming with `Last-Event-ID`
(§ 10.4)."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any, Final

import aiohttp

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.base import Inbound, InboundHandler
from proxy.upstream.http.call import HttpUpstreamCall, invoke_handler
from proxy.upstream.http.channel import HttpChannel, SessionExpired
from proxy.upstream.http.wire import (
    SSE_TYPE,
    StreamCursor,
    is_request,
    is_response,
    messages_of,
    stream_decoder,
)
from translators.protocol.eras import LEGACY_PING, META_PROGRESS_TOKEN, PROGRESS
from translators.wire.errors import UpstreamFault, UpstreamProtocolError
from translators.wire.jsonrpc import JsonObject, result_response

MAX_GET_FAILURES: Final = (
    5  # consecutive GET-stream attempts that fail, or end soon bringing nothing
)
HEALTHY_STREAM_S: Final = (
    5.0  # a GET stream open this long counts as healthy even if it brought nothing
)
_BROKEN_STREAM_ERRORS: Final = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, OSError)


class StreamRouter:
    """Sends each message of a session's streams where it belongs; answers server pings itself."""

    def __init__(
        self,
        channel: HttpChannel,
        tasks: TaskOwner,
        calls: dict[int, HttpUpstreamCall],
        on_unrelated: InboundHandler,
        log: Any,
    ) -> None:
        self._channel = channel
        self._tasks = tasks
        self._calls = calls
        self._on_unrelated = on_unrelated
        self._log = log

    async def read_stream(
        self, resp: aiohttp.ClientResponse, cursor: StreamCursor, call: HttpUpstreamCall | None
    ) -> JsonObject | None:
        """Route a stream's messages until `call`'s response (returned) or the stream's end (None).

        A broken connection is an end like any other: the caller resumes from the cursor. The
        chunks are read here, without nested async generators: a held call has two streams read for
        its whole life, and every suspended generator frame stays allocated with it."""
        decoder = stream_decoder(self._channel.settings.max_line_bytes)
        batches = self._channel.batches
        replay = call is not None and call.replayed
        try:
            async for chunk in resp.content.iter_any():
                for event in decoder.feed(chunk):
                    cursor.note(event)
                    if call is not None:
                        call.note_event_id(event.event_id)
                    for message in messages_of(event, batches=batches, quiet=replay):
                        if not is_response(message):
                            self._route_inbound(message, call)
                        elif call is not None and message.get("id") == call.upstream_request_id:
                            return message
                        else:
                            self._resolve_elsewhere(message, quiet=replay)
                cursor.absorb(decoder)
        except _BROKEN_STREAM_ERRORS as exc:
            self._log.info("upstream_stream_broken", error=type(exc).__name__)
        return None

    def _route_inbound(self, message: JsonObject, call: HttpUpstreamCall | None) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            self._log.warning(
                "upstream_message_ignored", reason="neither request, notification nor response"
            )
        elif method == LEGACY_PING and is_request(message):
            self._tasks.spawn(self._answer_ping(message["id"]), name="upstream-ping-answer")
        elif call is not None:
            self._log.debug("upstream_inbound_received", method=method, stream="post")
            call.deliver(message)
        elif (owner := self._progress_owner(message)) is not None:
            self._log.debug(
                "upstream_inbound_received", method=method, stream="get", attributed="progressToken"
            )
            owner.deliver(message)
        else:
            self._log.debug("upstream_inbound_received", method=method, stream="get")
            invoke_handler(self._on_unrelated, Inbound(message=message, related_request_id=None))

    def _progress_owner(self, message: JsonObject) -> HttpUpstreamCall | None:
        """The call in flight whose upstream progress token a `notifications/progress` names.

        `mcp` 1.x before 1.13 (2025-06-18 and older) sends progress on the session's GET stream, not
        on the call's stream; the bridge's upstream tokens are unique, so the token finds the call.
        """
        params = message.get("params")
        token = params.get(META_PROGRESS_TOKEN) if isinstance(params, dict) else None
        if message.get("method") != PROGRESS or token is None:
            return None
        for call in self._calls.values():
            meta = call.params.get("_meta")
            if (
                isinstance(meta, dict)
                and meta.get(META_PROGRESS_TOKEN) == token
                and not call.is_done
            ):
                return call
        return None

    def _resolve_elsewhere(self, message: JsonObject, *, quiet: bool = False) -> None:
        """A response on another stream (e.g. replayed on the GET stream) settles its own call;
        on a stream replayed for an adopted task (`quiet`), an old process's responses are
        expected."""
        upstream_request_id = message.get("id")
        call = (
            self._calls.get(upstream_request_id) if isinstance(upstream_request_id, int) else None
        )
        if call is None or call.is_done:
            (self._log.debug if quiet else self._log.warning)("upstream_response_unmatched")
            return
        call.resolve(message)
        if call.task is not None and call.task is not asyncio.current_task():
            call.task.cancel()

    async def _answer_ping(self, ping_id: int | str) -> None:
        try:
            await self._channel.post_bounded(result_response(ping_id, {}), "ping response")
        except (UpstreamFault, SessionExpired) as exc:
            self._log.info("upstream_ping_not_answered", error=str(exc))


class GetStreamState(enum.Enum):
    """Where a GET stream's life stands (it is reopened while OPEN and the generation is
    current)."""

    OPEN = "open"
    # the upstream answered 404: the session is gone, re-initialize before the next call
    EXPIRED = "expired"
    LOST = (
        "lost"  # repeated failures: pushes sent there would be dropped, so the session is not alive
    )


class GetStream:
    """The session's GET stream for one generation (one `Mcp-Session-Id`)."""

    def __init__(
        self,
        channel: HttpChannel,
        router: StreamRouter,
        tasks: TaskOwner,
        log: Any,
        *,
        on_expired: Callable[[], None] | None = None,
    ) -> None:
        self._channel = channel
        self._on_expired = on_expired
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
                if self._on_expired is not None:
                    self._on_expired()
                return False
            _settle(opened)
            await self._router.read_stream(resp, cursor, None)
        return True


def _settle(opened: asyncio.Future[None]) -> None:
    if not opened.done():
        opened.set_result(None)


__all__ = ["HEALTHY_STREAM_S", "MAX_GET_FAILURES", "GetStream", "GetStreamState", "StreamRouter"]
