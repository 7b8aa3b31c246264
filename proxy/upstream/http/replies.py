"""A call's own stream on a legacy Streamable HTTP session: POST the request, read its JSON or SSE
answer, and resume a stream closed early with GET + `Last-Event-ID` (2025-11-25/basic/transports.mdx
§ Resumability and Redelivery). A mixin of `HttpUpstreamSession`
(proxy/upstream/http/session.py)."""

from __future__ import annotations

import asyncio
from typing import Any, Final

import aiohttp

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

    async def _send_call(self, call: HttpUpstreamCall, generation: int) -> JsonObject:
        cursor = StreamCursor()
        async with self._channel.exchange(
            "POST", call.method, body=call.request_message(), extra=call.headers
        ) as resp:
            await self._channel.check_status(resp, generation, call.method)
            reply = await self._read_reply(resp, call, cursor)
            if reply is not None and is_sse(resp):
                call.resolve(reply)  # the caller has its answer; now let the connection be reused
                await drain(resp)
        if reply is None:
            reply = await self._resume(call, cursor, generation)
        return reply

    async def _read_reply(
        self, resp: aiohttp.ClientResponse, call: HttpUpstreamCall, cursor: StreamCursor
    ) -> JsonObject | None:
        """The response to `call` from a JSON or SSE answer; None when the SSE stream ended
        first."""
        if is_sse(resp):
            return await self._router.read_stream(resp, cursor, call)
        if not is_json(resp):
            raise UpstreamProtocolError(
                f"answered {call.method} with content type {resp.content_type!r}"
            )
        message = await read_json_message(resp)
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


__all__ = ["MAX_RESUME_ATTEMPTS", "CallStreams"]
