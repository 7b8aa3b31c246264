"""A call's own stream on a legacy Streamable HTTP session: POST the request, read its JSON or SSE
answer, and resume a stream closed early with GET + `Last-Event-ID` (2025-11-25/basic/transports.mdx
§ Resumability and Redelivery). A mixin of `HttpUpstreamSession`
(proxy/upstream/http/session.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import aiohttp

from proxy.common.owned_tasks import TaskOwner
from proxy.upstream.base import InboundHandler
from proxy.upstream.http.call import HttpUpstreamCall
from proxy.upstream.http.channel import HttpChannel, SessionExpired
from proxy.upstream.http.streams import StreamRouter
from proxy.upstream.http.wire import (
    SSE_TYPE,
    StreamCursor,
    drain,
    is_json,
    is_response,
    is_sse,
    read_json_message,
)
from translators.wire.errors import (
    BridgeError,
    UpstreamProtocolError,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from translators.wire.jsonrpc import JsonObject

MAX_RESUME_ATTEMPTS: Final = 5  # consecutive resumptions of a call's stream that bring nothing new


class CallStreams:
    """Sends a call and reads its reply; needs the session's channel, router, log and label."""

    _channel: HttpChannel
    _router: StreamRouter
    _log: Any
    upstream: str
    _calls: dict[int, HttpUpstreamCall]
    _tasks: TaskOwner
    _on_unrelated: InboundHandler

    if TYPE_CHECKING:  # the session's own (never defined here: they must not shadow its bases)

        def _check_open(self) -> None: ...

        async def _cancel_call(self, call: HttpUpstreamCall, reason: str) -> None: ...

    async def _send_call(self, call: HttpUpstreamCall, generation: int) -> JsonObject:
        cursor = StreamCursor()
        async with self._channel.exchange(
            "POST", call.method, body=call.request_message(), extra=call.headers
        ) as resp:
            await self._channel.check_status(resp, generation, call.method)
            sse = is_sse(resp)  # aiohttp parses the Content-Type on every read of it
            reply = await self._read_reply(resp, call, cursor, sse)
            if reply is not None and sse:
                call.resolve(reply)  # the caller has its answer; now let the connection be reused
                await drain(resp)
        if reply is None:
            reply = await self._resume(call, cursor, generation)
        return reply

    async def _read_reply(
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

    async def _resume(
        self, call: HttpUpstreamCall, cursor: StreamCursor, generation: int
    ) -> JsonObject:
        """GET + `Last-Event-ID` after the `retry` delay until the response comes
        (2025-11-25/basic/transports.mdx § Resumability and Redelivery)."""
        failures = 0
        while failures < MAX_RESUME_ATTEMPTS:
            if cursor.last_event_id is None:
                raise UpstreamProtocolError(
                    f"Upstream {self.upstream} closed the stream of {call.method} before answering,"
                    " with no event id to resume from"
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
            f"Upstream {self.upstream}: the stream of {call.method} could not be resumed"
            f" after {MAX_RESUME_ATTEMPTS} attempts"
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
                    f"Upstream {self.upstream} closed the stream of {call.method} early and does "
                    "not"
                    " support resumption (GET answered 405)"
                )
            await self._channel.check_status(resp, generation, action, content_type=SSE_TYPE)
            self._log.debug("upstream_stream_resumed", method=call.method)
            return await self._router.read_stream(resp, cursor, call)

    def resume(
        self,
        method: str,
        upstream_request_id: int,
        last_event_id: str,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> HttpUpstreamCall:
        """Read on, with GET + `Last-Event-ID`, the stream of a request this session's previous
        owner sent (transports.mdx § Resumability and Redelivery): what the server replays
        arrives at `on_inbound`, and the request's response, if it comes, is the call's result."""
        self._check_open()
        call = HttpUpstreamCall(
            upstream_request_id,
            method,
            {},
            headers=dict(headers),
            on_inbound=on_inbound,
            on_unrelated=self._on_unrelated,
            send_cancel=self._cancel_call,
            upstream=self.upstream,
        )
        call.replayed = True
        self._calls[upstream_request_id] = call
        cursor = StreamCursor(last_event_id=last_event_id, retry_ms=0)
        generation = self._channel.generation
        call.task = self._tasks.spawn(
            self._run_resumed(call, cursor, generation), name=f"upstream-resume-{method}"
        )
        return call

    async def _run_resumed(
        self, call: HttpUpstreamCall, cursor: StreamCursor, generation: int
    ) -> None:
        try:
            call.resolve(await self._resume(call, cursor, generation))
        except SessionExpired:
            call.fail(UpstreamSessionLost(f"Upstream {self.upstream} ended the session"))
        except BridgeError as exc:
            call.fail(exc)
        except asyncio.CancelledError:
            call.fail(UpstreamSessionLost(f"Upstream session to {self.upstream} was closed"))
            raise
        finally:
            self._calls.pop(call.upstream_request_id, None)


__all__ = ["MAX_RESUME_ATTEMPTS", "CallStreams"]
