"""Legacy Streamable HTTP upstream session on one shared `aiohttp.ClientSession` (2025-11-25/basic/
transports.mdx).

One `HttpUpstreamSession` is one `Mcp-Session-Id`: `initialize` → `notifications/initialized` → a
GET stream kept open for pushes unrelated to a call (the `mcp` 1.x SDK sends sampling and roots
there and drops them when no GET stream is open). Each request runs in a task of its own; its POST
answer is JSON or SSE; a stream closed early is resumed with GET + `Last-Event-ID`; a 404 on the
session id re-initializes once and retries the request when that is safe (no push delivered yet).

The session is composed of parts that receive their collaborators (docs/architecture.md, "The
Streamable HTTP client"): the channel (proxy/upstream/http/channel.py: where and how to send), the
table of calls in flight, the router of what the streams bring and the sender of calls
(proxy/upstream/http/call.py), the GET stream (streams.py) and the re-initialization
(reinitialize.py). What is here is the session's own: its surface, its handshake and its end.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
from collections.abc import Mapping
from typing import Final

import aiohttp
import structlog

from config.settings import UpstreamSettings
from proxy.common.owned_tasks import TaskOwner
from proxy.common.shown import bounded
from proxy.upstream.base import InboundHandler, shared_init_result
from proxy.upstream.errors import map_upstream_errors
from proxy.upstream.http.call import (
    MAX_RESUME_ATTEMPTS,
    CallSender,
    HttpUpstreamCall,
    StreamRouter,
)
from proxy.upstream.http.channel import HttpChannel, SessionExpired
from proxy.upstream.http.cookies import SessionCookies
from proxy.upstream.http.reinitialize import Reinitialization
from proxy.upstream.http.streams import GetStream, GetStreamState
from proxy.upstream.http.wire import (
    CLIENT_NAME,
    SESSION_HEADER,
    StreamCursor,
    client_info,
    is_sse,
)
from translators.protocol.eras import CANCELLED, INITIALIZE, INITIALIZED
from translators.protocol.revisions import OFFERED, Revision, negotiated
from translators.tasks_ext.task_ids import SealedCookie
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

# A session closed right after one of its calls was cancelled waits this long before its DELETE:
# a FastMCP server of mcp 1.8/1.9 whose session is deleted while a cancelled handler still unwinds
# can crash its whole session manager (every later request answered 500); see docs/revisions.md.
CANCEL_SETTLE_S: Final = 0.5


class SessionState(enum.Enum):
    """Where an HTTP upstream session's life stands (re-initializing in place keeps it OPEN)."""

    OPEN = "open"
    BROKEN = "broken"  # a re-initialize failed: calls get its error, the pool replaces the session
    CLOSED = "closed"  # aclose() ran


def _is_valid_session_id(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(char) <= 0x7E for char in value)


class HttpUpstreamSession:
    """Implements `UpstreamSession` over legacy Streamable HTTP. Build it with `open()`."""

    revision: Revision  # set by `initialize` (or `adopt`), as `init_result`

    def __init__(
        self,
        client: aiohttp.ClientSession,
        url: str,
        capabilities: JsonObject,
        *,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
        settings: UpstreamSettings,
        cookies: SessionCookies | None = None,
    ) -> None:
        channel = self._channel = HttpChannel(
            client, url, headers=headers, settings=settings, cookies=cookies
        )
        self.upstream = channel.upstream
        self._capabilities = dict(capabilities)
        self._on_unrelated = on_unrelated
        self.init_result: JsonObject = {}
        self._initialized = False
        self._state = SessionState.OPEN
        self._tasks = TaskOwner()  # the GET stream, ping answers, re-initializes
        # the calls in flight, by upstream id: the table owns each call's task (CallSender.run)
        self._calls: dict[int, HttpUpstreamCall] = {}
        self._ids = itertools.count(1)
        self._cancelled_at: float | None = None  # when a call was last cancelled upstream
        self._delete_on_close = True  # False: a one-session server (see forget_on_close)
        self._log = log = _log.bind(url=self.upstream, upstream_session=next(_session_refs))
        self._router = StreamRouter(channel, self._tasks, self._calls, on_unrelated, log)
        self._reinitialization = Reinitialization(
            channel, self._tasks, self._handshake_again, self._check_open, self._broken, log
        )
        self._sender = CallSender(channel, self._router, self._reinitialization, self._calls, log)
        self._get_stream: GetStream | None = None

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
    ) -> HttpUpstreamSession:
        """Initialize a new session within `init_timeout_s`; on any failure nothing is left open."""
        session = cls(
            client, url, capabilities, headers=headers, on_unrelated=on_unrelated, settings=settings
        )
        try:
            await session._handshake()
        except BaseException:
            await session.aclose()
            raise
        session._log.info("upstream_session_opened", has_get_stream=session.has_get_stream)
        return session

    @classmethod
    def adopt(
        cls,
        client: aiohttp.ClientSession,
        url: str,
        capabilities: JsonObject,
        *,
        session_id: str,
        init_result: JsonObject,
        first_request_id: int,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
        settings: UpstreamSettings,
        cookies: SessionCookies | None = None,
    ) -> HttpUpstreamSession:
        """Take over a session another bridge process initialized (a legacy task it created,
        docs/tasks.md § What survives what): no `initialize`, no GET stream. `init_result` is what
        the server answers to `initialize` now, with the revision the session negotiated; request
        ids start at `first_request_id`, clear of the ones the old process used; `cookies` are
        the ones the old process's session kept (a load balancer's pin to the replica that holds
        the session)."""
        if not _is_valid_session_id(session_id):
            raise UpstreamProtocolError("the adopted Mcp-Session-Id is not visible ASCII")
        session = cls(
            client,
            url,
            capabilities,
            headers=headers,
            on_unrelated=on_unrelated,
            settings=settings,
            cookies=cookies,
        )
        session._channel.begin_generation()
        session._channel.session_id = session_id
        session._accept_init_result(init_result)
        session._ids = itertools.count(first_request_id)
        session._log.info("upstream_session_adopted")
        return session

    @property
    def is_alive(self) -> bool:
        get_lost = self._get_stream is not None and self._get_stream.state is GetStreamState.LOST
        return self._state is SessionState.OPEN and not get_lost

    @property
    def session_id(self) -> str | None:
        """The upstream `Mcp-Session-Id` (sealed into a legacy task's id; never shown)."""
        return self._channel.session_id

    def sealable_cookies(self) -> list[SealedCookie]:
        return self._channel.cookies.sealable()

    @property
    def url(self) -> str:
        """Where this session sends (after a remembered same-origin redirect)."""
        return self._channel.url

    @property
    def has_get_stream(self) -> bool:
        return self._get_stream is not None and self._get_stream.is_open

    @property
    def reinitialized_count(self) -> int:
        return self._reinitialization.count

    # -- the UpstreamSession surface --------------------------------------------------------------

    def start(
        self,
        method: str,
        params: JsonObject,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> HttpUpstreamCall:
        self._check_open()
        call = self._new_call(next(self._ids), method, params, headers, on_inbound)
        self._calls[call.upstream_request_id] = call
        call.task = asyncio.get_running_loop().create_task(
            self._sender.run(call), name="upstream-call"
        )
        return call

    def resume(
        self,
        method: str,
        upstream_request_id: int,
        last_event_id: str,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> HttpUpstreamCall:
        self._check_open()
        call = self._new_call(upstream_request_id, method, {}, headers, on_inbound)
        call.replayed = True
        self._calls[upstream_request_id] = call
        call.task = asyncio.get_running_loop().create_task(
            self._sender.run(call, resume_after=last_event_id), name="upstream-resume"
        )
        return call

    async def respond(
        self,
        push_id: int | str,
        *,
        result: JsonObject | None = None,
        error: JsonObject | None = None,
    ) -> None:
        answer = jsonrpc.answer(push_id, result=result, error=error)
        await self._send_bounded(answer, "response to a push")

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        await self._send_bounded(jsonrpc.notification(method, params), method)

    def forget_on_close(self) -> bool:
        """Close without a DELETE (a one-session server: proxy/upstream/session_limit.py; a
        legacy task another process adopts)."""
        self._delete_on_close = False
        return True

    async def aclose(self) -> None:
        if self._state is SessionState.CLOSED:
            return
        self._state = SessionState.CLOSED
        calls = list(self._calls.values())
        for call in calls:
            call.fail(UpstreamSessionLost(f"Upstream session to {self.upstream} was closed"))
        await self._tasks.stop([call.task for call in calls if call.task is not None])
        await self._tasks.stop()
        if self._channel.session_id is not None and self._delete_on_close:
            await self._let_cancellation_settle()
            try:
                status = await self._channel.delete()
                self._log.debug("upstream_session_deleted", status=status)
            except UpstreamFault as exc:
                self._log.info("upstream_session_delete_failed", error=exc.message)
        self._log.info("upstream_session_closed", reinitialized=self.reinitialized_count)

    async def _let_cancellation_settle(self) -> None:
        if self._cancelled_at is not None:
            wait_s = self._cancelled_at + CANCEL_SETTLE_S - asyncio.get_running_loop().time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)

    # -- one call ---------------------------------------------------------------------------------

    def _new_call(
        self,
        upstream_request_id: int,
        method: str,
        params: JsonObject,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> HttpUpstreamCall:
        return HttpUpstreamCall(
            upstream_request_id,
            method,
            params,
            headers=dict(headers),
            on_inbound=on_inbound,
            on_unrelated=self._on_unrelated,
            send_cancel=self._cancel_call,
            upstream=self.upstream,
        )

    async def _cancel_call(self, call: HttpUpstreamCall, reason: str) -> None:
        if call.task is not None and call.task is not asyncio.current_task():
            call.task.cancel()
        params = {"requestId": call.upstream_request_id, "reason": reason}
        self._cancelled_at = asyncio.get_running_loop().time()
        try:
            await self.notify(CANCELLED, params)
        except UpstreamFault as exc:
            self._log.info("upstream_cancel_not_delivered", method=call.method, error=exc.message)
        self._log.info("upstream_call_cancelled", method=call.method)

    # -- session lifecycle ------------------------------------------------------------------------

    async def _handshake(self) -> None:
        """initialize → GET stream → notifications/initialized, within `init_timeout_s` (§ 10.1).
        The GET stream opens first so that a push the server sends on `initialized` (a `roots/list`,
        typically) has a stream to arrive on: the `mcp` 1.x SDK drops it otherwise."""
        self._channel.begin_generation()
        with map_upstream_errors(self.upstream, INITIALIZE):
            async with asyncio.timeout(self._channel.settings.init_timeout_s):
                await self._initialize()
                self._get_stream = GetStream(
                    self._channel,
                    self._router,
                    self._tasks,
                    self._log,
                    on_expired=self._reinitialization.now,
                )
                await self._get_stream.start()
                initialized = jsonrpc.notification(INITIALIZED)
                await self._channel.post_accepted(initialized, INITIALIZED)

    async def _handshake_again(self) -> None:
        """The re-initialization's handshake (reinitialize.py): a new session in place."""
        if self._get_stream is not None:
            await self._get_stream.stop()
        await self._handshake()

    async def _initialize(self) -> None:
        params = {
            "protocolVersion": OFFERED,
            "capabilities": self._capabilities,
            "clientInfo": client_info(),
        }
        call = self._new_call(next(self._ids), INITIALIZE, params, {}, None)
        channel = self._channel
        exchange = channel.exchange("POST", INITIALIZE, body=call.request_message())
        async with exchange as resp:
            await channel.check_status(resp, channel.generation, INITIALIZE)
            session_id = resp.headers.get(SESSION_HEADER)
            if session_id is not None and not _is_valid_session_id(session_id):
                raise UpstreamProtocolError("sent an Mcp-Session-Id that is not visible ASCII")
            channel.session_id = session_id
            reply = await self._sender.read_reply(resp, call, StreamCursor(), is_sse(resp))
            if reply is not None:
                exchange.let_go()
        if reply is None:
            raise UpstreamProtocolError("closed the initialize stream before answering")
        call.resolve(reply)
        try:
            result = await call.result()
        except UpstreamReturnedError as exc:
            raise UpstreamProtocolError(f"refused initialize: {bounded(exc.message, 200)}") from exc
        self._accept_init_result(result)

    def _accept_init_result(self, result: JsonObject) -> None:
        """Remember the negotiated revision; the version header goes only where the revision has it.

        A re-initialize must land on the same revision: the capabilities were shaped for it."""
        revision = negotiated(self.upstream, result.get("protocolVersion"))
        if self._initialized and revision != self.revision:
            raise UpstreamProtocolError(
                f"Upstream {self.upstream} re-initialized with protocol version "
                f"{revision.version!r} after {self.revision.version!r}"
            )
        self.revision, self._initialized = revision, True
        self._channel.protocol_version = revision.version if revision.version_header else None
        self._channel.batches = revision.batches
        self.init_result = shared_init_result(self.upstream, result)

    # -- plumbing ---------------------------------------------------------------------------------

    async def _send_bounded(self, message: JsonObject, action: str) -> None:
        """POST a notification or response and expect 202 within `init_timeout_s`."""
        self._check_open()
        try:
            await self._channel.post_bounded(message, action)
        except SessionExpired as exc:
            if self._get_stream is not None and exc.generation == self._channel.generation:
                self._reinitialization.due()  # re-initialize before the next call
            raise UpstreamSessionLost(
                f"Upstream {self.upstream} ended the session; the {action} was not delivered"
            ) from None

    def _check_open(self) -> None:
        if self._state is SessionState.CLOSED:
            raise UpstreamSessionLost(f"Upstream session to {self.upstream} is closed")

    def _broken(self) -> None:
        """A re-initialize failed: the session serves no more calls (the pool replaces it)."""
        if self._state is SessionState.OPEN:
            self._state = SessionState.BROKEN


__all__ = [
    "CLIENT_NAME",
    "MAX_RESUME_ATTEMPTS",
    "HttpUpstreamSession",
    "SessionState",
    "client_info",
]
