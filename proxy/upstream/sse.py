"""Legacy HTTP+SSE upstream (the 2024-11-05 transport): one SSE connection is one legacy session.

The bridge opens `GET <sse url>`; the server's first event, `endpoint`, names the URI that every
message is POSTed to (resolved against the SSE URL; another origin is refused). Every POST is
answered `202`; every response, push and notification arrives on the one SSE stream. Nothing on
that stream links a push or a notification to the call that caused it, so, as on stdio, every
inbound message is *unrelated* (`related_request_id=None`) and the pool hands it to the session's
exclusive lease holder (docs/architecture.md, "The HTTP+SSE transport"); a response settles its
call by id. `ping` is answered here and never surfaces.

There is no session id and no resumption: when the stream ends or breaks, the session is lost for
good, every call in flight fails at once with `UpstreamSessionLost`, and the pool replaces the
session. Closing the session closes the stream, which ends it on the server too.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Final

import aiohttp
import structlog
from yarl import URL

from config.settings import UpstreamSettings
from proxy.common.owned_tasks import TaskOwner
from proxy.common.shown import bounded
from proxy.upstream.base import EndsWithItsConnection, Inbound, InboundHandler, SendsMessages
from proxy.upstream.call import OutcomeCall
from proxy.upstream.errors import map_upstream_errors
from proxy.upstream.http.call import invoke_handler
from proxy.upstream.http.channel import HttpChannel, UpstreamRefused
from proxy.upstream.http.outbound import origin_of
from proxy.upstream.http.wire import (
    SSE_TYPE,
    StreamCursor,
    client_info,
    event_messages,
    is_request,
    is_response,
    iter_stream_events,
)
from translators.protocol.eras import CANCELLED, INITIALIZE, INITIALIZED, LEGACY_PING
from translators.protocol.revisions import OFFERED, Revision, negotiated
from translators.wire import jsonrpc
from translators.wire.errors import (
    UpstreamFault,
    UpstreamProtocolError,
    UpstreamReturnedError,
    UpstreamSessionLost,
)
from translators.wire.jsonrpc import JsonObject

_log = structlog.get_logger(__name__)
_session_refs = itertools.count(1)

ENDPOINT_EVENT: Final = "endpoint"
MESSAGE_EVENT: Final = "message"
TRANSPORT_NAME: Final = "sse"


def resolve_endpoint(sse_url: str, data: str) -> str:
    """The POST URI of an `endpoint` event, resolved against the SSE URL; same origin only."""
    base = URL(sse_url)
    try:
        target = base.join(URL(data.strip()))
    except ValueError:
        raise UpstreamProtocolError("sent an endpoint event that is not a URI") from None
    if not data.strip() or origin_of(target) != origin_of(base):
        raise UpstreamProtocolError(
            "sent an endpoint event for another origin; the bridge POSTs only to its own"
        )
    return str(target)


class SseUpstreamSession(EndsWithItsConnection, SendsMessages):
    """Implements `UpstreamSession` over one legacy HTTP+SSE connection. Build it with `open()`."""

    revision: Revision  # set by `initialize`, as `init_result`

    def __init__(
        self,
        client: aiohttp.ClientSession,
        url: str,
        *,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
        settings: UpstreamSettings,
    ) -> None:
        self._client = client
        self._url = url
        self._headers = dict(headers)
        self._settings = settings
        self._stream = HttpChannel(client, url, headers=headers, settings=settings)
        self.upstream = self._stream.upstream
        self._poster: HttpChannel | None = None
        self._on_unrelated = on_unrelated
        self._endpoint: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._calls: dict[int, OutcomeCall] = {}
        self._ids = itertools.count(1)
        self._tasks = TaskOwner()
        self._reader: asyncio.Task[None] | None = None
        self.init_result: JsonObject = {}
        self._batches = False  # the negotiated revision's, once known
        self._lost: str | None = None
        self._closing = False
        self._log = _log.bind(
            url=self.upstream, upstream_session=next(_session_refs), transport=TRANSPORT_NAME
        )

    @classmethod
    async def open(
        cls,
        client: aiohttp.ClientSession,
        url: str,
        capabilities: JsonObject,
        *,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
        settings: UpstreamSettings,
    ) -> SseUpstreamSession:
        """Open the stream, wait for its endpoint, then `initialize` within `init_timeout_s`; on any
        failure nothing is left open."""
        session = cls(client, url, headers=headers, on_unrelated=on_unrelated, settings=settings)
        try:
            with map_upstream_errors(session.upstream, INITIALIZE):
                async with asyncio.timeout(settings.init_timeout_s):
                    await session._handshake(capabilities)
        except BaseException:
            await session.aclose()
            raise
        session._log.info("upstream_session_opened", has_get_stream=True)
        return session

    # -- the UpstreamSession surface --------------------------------------------------------------

    @property
    def is_alive(self) -> bool:
        return self._lost is None and not self._closing

    @property
    def has_get_stream(self) -> bool:
        return self.is_alive  # the one stream carries session-wide messages too

    @property
    def reinitialized_count(self) -> int:
        """Always 0: a lost SSE session is replaced by the pool, never re-initialized in place."""
        return 0

    def start(
        self,
        method: str,
        params: JsonObject,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> OutcomeCall:
        """POST a request from a task the session owns; its response comes on the stream.
        `on_inbound` is unused: every inbound message is unrelated (module docstring)."""
        call = OutcomeCall(next(self._ids), method, self._send_cancel, f"Upstream {self.upstream}")
        if self._lost is not None or self._closing:
            call.fail(self._lost_error())
            return call
        self._calls[call.upstream_request_id] = call
        message = jsonrpc.request(call.upstream_request_id, method, params)
        self._tasks.spawn(
            self._post_request(call, message, dict(headers)),
            name=f"sse-request-{call.upstream_request_id}",
        )
        return call

    async def _send_message(self, message: JsonObject, action: str) -> None:
        await self._send(message, action)

    async def aclose(self) -> None:
        """Fail the calls in flight and close the stream (which ends the session on the server)."""
        if self._closing:
            return
        self._closing = True
        self._fail_pending(f"Upstream session to {self.upstream} was closed")
        await self._tasks.stop()
        if not self._endpoint.done():
            self._endpoint.cancel()
        self._log.info("upstream_session_closed", reinitialized=0)

    # -- the handshake ----------------------------------------------------------------------------

    async def _handshake(self, capabilities: JsonObject) -> None:
        self._reader = self._tasks.spawn(self._read_stream(), name="sse-stream")
        endpoint = await self._endpoint
        # one session, one cookie jar: what the stream's responses set goes with the POSTs
        self._poster = HttpChannel(
            self._client,
            endpoint,
            headers=self._headers,
            settings=self._settings,
            cookies=self._stream.cookies,
        )
        params = {
            "protocolVersion": OFFERED,
            "capabilities": capabilities,
            "clientInfo": client_info(),
        }
        try:
            result = await self.start(INITIALIZE, params, headers={}, on_inbound=None).result()
        except UpstreamReturnedError as exc:
            raise UpstreamProtocolError(
                f"Upstream {self.upstream} refused initialize: {bounded(exc.message, 200)}"
            ) from exc
        self.revision = negotiated(self.upstream, result.get("protocolVersion"))
        self._batches = self.revision.batches
        self.init_result = result
        await self.notify(INITIALIZED)

    # -- the stream -------------------------------------------------------------------------------

    async def _read_stream(self) -> None:
        """Read the stream to its end; then the session is lost (module docstring)."""
        reason = (
            f"Upstream {self.upstream} closed the SSE stream of the session (HTTP+SSE transport)"
        )
        try:
            async with self._stream.exchange("GET", "SSE stream", accept=SSE_TYPE) as resp:
                await self._stream.check_status(
                    resp, self._stream.generation, "SSE stream", content_type=SSE_TYPE
                )
                limit = self._settings.max_line_bytes
                async for event in iter_stream_events(resp, StreamCursor(), limit):
                    self._on_event(event.event, event.data)
        except UpstreamFault as exc:
            reason = exc.message
            if not self._endpoint.done():
                self._endpoint.set_exception(exc)
        if not self._endpoint.done():
            self._endpoint.set_exception(
                UpstreamProtocolError(
                    f"Upstream {self.upstream} ended the SSE stream before its endpoint event"
                )
            )
        if not self._closing:
            self._log.warning("upstream_sse_stream_lost", pending_calls=len(self._calls))
            self._fail_pending(f"{reason}; the session is lost")

    def _on_event(self, event: str, data: str) -> None:
        if event == ENDPOINT_EVENT and not self._endpoint.done():
            self._endpoint.set_result(resolve_endpoint(self._url, data))
        elif event == MESSAGE_EVENT and data.strip() and self._endpoint.done():
            self._on_message_event(data)
        else:
            self._log.debug("upstream_sse_event_ignored", sse_event=event[:40])

    def _on_message_event(self, data: str) -> None:
        """Each message of the event (each element of a 2025-03-26 batch), in order, as if it came
        alone: one that is not a JSON-RPC message is logged and skipped (`event_messages`, the
        same rule as on Streamable HTTP)."""
        for message in event_messages(data, batches=self._batches):
            self._receive(message)

    def _receive(self, message: JsonObject) -> None:
        if is_response(message):
            upstream_request_id = message.get("id")
            call = (
                self._calls.pop(upstream_request_id, None)
                if type(upstream_request_id) is int
                else None
            )
            if call is None:
                self._log.debug("upstream_response_unmatched")
            else:
                call.resolve(message)
        elif message.get("method") == LEGACY_PING and is_request(message):
            self._tasks.spawn(self._answer_ping(message["id"]), name="sse-ping-answer")
        elif isinstance(message.get("method"), str):
            self._log.debug("upstream_inbound_received", method=message["method"], stream="sse")
            invoke_handler(self._on_unrelated, Inbound(message=message, related_request_id=None))
        else:
            self._log.warning(
                "upstream_message_ignored", reason="neither request, notification nor response"
            )

    # -- sending ----------------------------------------------------------------------------------

    async def _post_request(
        self, call: OutcomeCall, message: JsonObject, headers: dict[str, str]
    ) -> None:
        try:
            await self._send(message, call.method, headers)
        except UpstreamFault as exc:
            self._calls.pop(call.upstream_request_id, None)
            call.fail(exc)

    async def _send(
        self, message: JsonObject, action: str, headers: Mapping[str, str] | None = None
    ) -> None:
        """POST one message to the endpoint; the server must accept it (202) within
        `init_timeout_s`."""
        if self._lost is not None or self._closing or self._poster is None:
            raise self._lost_error()
        try:
            await self._poster.post_bounded(message, action, extra=headers)
        except UpstreamRefused as exc:
            if exc.status == 404:  # the server no longer knows this connection's session
                self._fail_pending(
                    f"Upstream {self.upstream} no longer knows the session (HTTP 404)"
                )
            raise

    async def _send_cancel(self, call: OutcomeCall, reason: str) -> None:
        self._calls.pop(call.upstream_request_id, None)
        params = {"requestId": call.upstream_request_id, "reason": reason}
        try:
            await self.notify(CANCELLED, params)
        except UpstreamFault as exc:
            self._log.info("upstream_cancel_not_delivered", method=call.method, error=exc.message)
        self._log.info("upstream_call_cancelled", method=call.method)

    async def _answer_ping(self, ping_id: int | str) -> None:
        try:
            await self.respond(ping_id, result={})
        except UpstreamFault as exc:
            self._log.info("upstream_ping_not_answered", error=exc.message)

    # -- loss -------------------------------------------------------------------------------------

    def _fail_pending(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
        calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.fail(self._lost_error(call.method))

    def _lost_error(self, method: str | None = None) -> UpstreamSessionLost:
        reason = self._lost or f"Upstream session to {self.upstream} is closed"
        during = f" while {method} was in flight" if method else ""
        return UpstreamSessionLost(
            f"{reason}{during}",
            {"upstream": self.upstream},
            public=f"The upstream session was lost: its SSE stream closed{during}",
        )


__all__ = ["TRANSPORT_NAME", "SseUpstreamSession", "resolve_endpoint"]
