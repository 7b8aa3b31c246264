"""One call on a legacy Streamable HTTP session, from its POST to its response
(2025-11-25/basic/transports.mdx), in the order the code runs:

- `HttpUpstreamCall`: the request, its outcome slot (`OutcomeCall`) and what arrives on its own
  stream (its pushes and notifications go to its `on_inbound`);
- `CallSender`: POSTs the call and reads its JSON or SSE answer; resumes a stream closed early
  with GET + `Last-Event-ID` (§ Resumability and Redelivery); sends the call again, once, on a
  re-initialized session when the server ended the session before any push was delivered;
- `StreamRouter`: reads an SSE stream and sends each message where it belongs (the call's own, a
  call's progress on the GET stream, the session's `on_unrelated`), answering server pings itself.
  The session's GET stream (proxy/upstream/http/streams.py) is read through it too.

They are one module because every call walks through all three, in this order; the session
(proxy/upstream/http/session.py) builds one `CallSender` and one `StreamRouter` and hands them
their collaborators: the channel, the table of calls in flight, the re-initialization.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import aiohttp
import structlog

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.base import Inbound, InboundHandler
from proxy.upstream.call import CancelSender, OutcomeCall
from proxy.upstream.http.channel import HttpChannel, SessionExpired
from proxy.upstream.http.reinitialize import Reinitialization
from proxy.upstream.http.wire import (
    SSE_TYPE,
    StreamCursor,
    is_json,
    is_request,
    is_response,
    is_sse,
    messages_of,
    read_json_message,
    stream_decoder,
)
from translators.protocol.eras import LEGACY_PING, META_PROGRESS_TOKEN, PROGRESS
from translators.wire import jsonrpc
from translators.wire.errors import (
    BridgeBug,
    BridgeError,
    UpstreamFault,
    UpstreamProtocolError,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from translators.wire.jsonrpc import JsonObject, result_response

MAX_RESUME_ATTEMPTS: Final = 5  # consecutive resumptions of a call's stream that bring nothing new
_BROKEN_STREAM_ERRORS: Final = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, OSError)
_log = structlog.get_logger(__name__)


def invoke_handler(handler: InboundHandler, inbound: Inbound) -> None:
    """Run an inbound callback; a failing callback is logged, never allowed to kill a stream
    reader."""
    try:
        handler(inbound)
    except Exception:
        _log.exception("upstream_inbound_handler_failed", method=inbound.message.get("method"))


class HttpUpstreamCall(OutcomeCall):
    """An `OutcomeCall` that also knows its request and routes what arrives on its own stream."""

    # class-level defaults, set on an instance only where they change (a legacy task's
    # `tasks/result`): an attribute first set outside `__init__` gives the object a dict of its own
    # (hundreds of bytes), and every held call has one of these objects
    replayed = False  # a stream another process opened, read again (an adopted task)
    _first_event: asyncio.Future[None] | None = None  # made only when awaited

    def __init__(
        self,
        upstream_request_id: int,
        method: str,
        params: JsonObject,
        *,
        headers: dict[str, str],
        on_inbound: InboundHandler | None,
        on_unrelated: InboundHandler,
        send_cancel: CancelSender,
        upstream: str,
    ) -> None:
        super().__init__(upstream_request_id, method, send_cancel, f"Upstream {upstream}")
        self.params = params
        self.headers = headers
        self._on_inbound = on_inbound
        self._on_unrelated = on_unrelated
        self.pushes_delivered = False
        self.task: asyncio.Task[None] | None = None  # the call's own (CallSender.run)
        self._first_event_id: str | None = None  # where this call's SSE stream can be resumed
        self._events_seen = False

    def note_event_id(self, event_id: str | None) -> None:
        """An event of this call's stream arrived: remember the first id (a legacy task keeps it
        to resume `tasks/result` from another process, docs/tasks.md)."""
        if self._events_seen:
            return
        self._events_seen = True
        self._first_event_id = event_id  # a priming event, on a server with an event store
        if self._first_event is not None and not self._first_event.done():
            self._first_event.set_result(None)

    async def first_event_id(self, wait_s: float) -> str | None:
        if not self._events_seen and not self.is_done:
            if self._first_event is None:
                self._first_event = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(wait_s):
                    await asyncio.shield(self._first_event)
            except TimeoutError:
                pass
        return self._first_event_id

    def request_message(self) -> JsonObject:
        return jsonrpc.request(self.upstream_request_id, self.method, self.params)

    def deliver(self, message: JsonObject) -> None:
        """A push or notification from this call's own stream (POST, or its resumption)."""
        if is_request(message):
            self.pushes_delivered = True
        inbound = Inbound(message=message, related_request_id=self.upstream_request_id)
        invoke_handler(self._on_inbound or self._on_unrelated, inbound)


class CallSender:
    """Sends the calls of one session and reads their answers, each call in a task of its own that
    the session's table of calls in flight owns (`calls`: the session cancels and awaits what is
    in it when it closes)."""

    def __init__(
        self,
        channel: HttpChannel,
        router: StreamRouter,
        reinitialization: Reinitialization,
        calls: dict[int, HttpUpstreamCall],
        log: Any,
    ) -> None:
        self._channel = channel
        self._router = router
        self._reinitialization = reinitialization
        self._calls = calls
        self._log = log
        self._upstream = channel.upstream

    async def run(self, call: HttpUpstreamCall, resume_after: str | None = None) -> None:
        """The call's task: its outcome, whatever happens (never an exception of its own). With
        `resume_after`, the call is one an earlier owner of the session sent
        (`HttpUpstreamSession.resume`): its stream is read on from the event after that id."""
        try:
            if resume_after is None:
                reply = await self._answer(call)
            else:
                cursor = StreamCursor(last_event_id=resume_after, retry_ms=0)
                reply = await self.resume(call, cursor, self._channel.generation)
            call.resolve(reply)
        except SessionExpired:  # under a resumed call: it cannot be sent again
            call.fail(UpstreamSessionLost(f"Upstream {self._upstream} ended the session"))
        except BridgeError as exc:
            call.fail(exc)
        except asyncio.CancelledError:
            call.fail(UpstreamSessionLost(f"Upstream session to {self._upstream} was closed"))
            raise
        except Exception as exc:
            self._log.exception("upstream_call_crashed", method=call.method)
            call.fail(BridgeBug(f"upstream call crashed: {type(exc).__name__}"))
        finally:
            self._calls.pop(call.upstream_request_id, None)

    async def _answer(self, call: HttpUpstreamCall) -> JsonObject:
        reinitialization, retried = self._reinitialization, False
        while True:
            generation = (  # `pending` is False unless the session must be re-initialized first
                await reinitialization.generation()
                if reinitialization.pending
                else self._channel.generation
            )
            try:
                return await self._send(call, generation)
            except SessionExpired as exc:
                self._log.info(
                    "upstream_session_expired", method=call.method, pushes=call.pushes_delivered
                )
                if retried or call.pushes_delivered:
                    raise UpstreamSessionLost(
                        f"Upstream {self._upstream} ended the session while {call.method} was in "
                        "flight; the call was not replayed"
                    ) from None
                retried = True
                await reinitialization.reinitialize(exc.generation)

    async def _send(self, call: HttpUpstreamCall, generation: int) -> JsonObject:
        cursor = StreamCursor()
        channel = self._channel
        exchange = channel.exchange(
            "POST", call.method, body=call.request_message(), extra=call.headers
        )
        async with exchange as resp:
            await channel.check_status(resp, generation, call.method)
            sse = is_sse(resp)  # aiohttp parses the Content-Type on every read of it
            reply = await self.read_reply(resp, call, cursor, sse)
            if reply is not None and sse:
                exchange.let_go()  # the caller has its answer: nothing waits for the stream's end
        if reply is None:
            reply = await self.resume(call, cursor, generation)
        return reply

    async def read_reply(
        self, resp: aiohttp.ClientResponse, call: HttpUpstreamCall, cursor: StreamCursor, sse: bool
    ) -> JsonObject | None:
        """The response to `call` from a JSON or SSE (`sse`) answer; None when the SSE stream
        ended first."""
        if sse:
            return await self._router.read_stream(resp, cursor, call)
        if not is_json(resp):
            raise UpstreamProtocolError(
                f"answered {call.method} with content type {resp.content_type!r}"
            )
        message = await read_json_message(resp, self._channel.settings.max_line_bytes)
        if not is_response(message) or message.get("id") != call.upstream_request_id:
            raise UpstreamProtocolError(
                f"answered {call.method} with JSON that is not its response"
            )
        return message

    async def resume(
        self, call: HttpUpstreamCall, cursor: StreamCursor, generation: int
    ) -> JsonObject:
        """GET + `Last-Event-ID` after the `retry` delay until the response comes
        (2025-11-25/basic/transports.mdx § Resumability and Redelivery)."""
        failures = 0
        while failures < MAX_RESUME_ATTEMPTS:
            if cursor.last_event_id is None:
                raise UpstreamProtocolError(
                    f"Upstream {self._upstream} closed the stream of {call.method} before "
                    "answering, with no event id to resume from",
                    reason=f"it closed the stream of {call.method} before answering",
                )
            await asyncio.sleep(cursor.retry_s)
            before = (cursor.last_event_id, cursor.events_seen)
            try:
                reply = await self._resume_once(call, cursor, generation)
            except (UpstreamUnavailable, UpstreamTimeout) as exc:
                self._log.info("upstream_resume_failed", method=call.method, error=exc.message)
                reply = None
            if reply is not None:
                return reply
            failures = 0 if (cursor.last_event_id, cursor.events_seen) != before else failures + 1
        raise UpstreamSessionLost(
            f"Upstream {self._upstream}: the stream of {call.method} could not be resumed"
            f" after {MAX_RESUME_ATTEMPTS} attempts",
            reason=f"the stream of {call.method} closed before its answer and could not be resumed",
        )

    async def _resume_once(
        self, call: HttpUpstreamCall, cursor: StreamCursor, generation: int
    ) -> JsonObject | None:
        if generation != self._channel.generation:
            raise SessionExpired(generation)  # the session was re-initialized under this call
        action = f"resuming {call.method}"
        async with self._channel.exchange(
            "GET", action, extra=call.headers, accept=SSE_TYPE, last_event_id=cursor.last_event_id
        ) as resp:
            if resp.status == 405:
                raise UpstreamProtocolError(
                    f"Upstream {self._upstream} closed the stream of {call.method} early and does"
                    " not support resumption (GET answered 405)",
                    reason=f"it closed the stream of {call.method} before answering, and cannot"
                    " resume it",
                )
            await self._channel.check_status(resp, generation, action, content_type=SSE_TYPE)
            self._log.debug("upstream_stream_resumed", method=call.method)
            return await self._router.read_stream(resp, cursor, call)


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


__all__ = [
    "MAX_RESUME_ATTEMPTS",
    "CallSender",
    "HttpUpstreamCall",
    "StreamRouter",
    "invoke_handler",
]
