"""Legacy Streamable HTTP sessions served by the bridge in front of a 2026-07-28 upstream
(docs/directions.md).

What a legacy server does, the bridge does here: `initialize` (answered from the upstream's
`server/discover`, issuing an `Mcp-Session-Id`), the session's requests (each sent upstream as a
stateless 2026-07-28 request by `proxy.reverse.rounds`), its notifications (`initialized`,
`cancelled`), the client's answers to pushes, `ping`, `logging/setLevel`, the GET stream of
session-wide notifications and `DELETE`. A session is usable only by the principal that opened it:
anyone else gets 404, as from a server that does not know the session. Sessions are capped per
principal and in total (`proxy.reverse.sessions`): a new one that does not fit gets 503, and never
takes the place of another principal's session in use. A request that waits for the client's
answer to a push counts in `held.*` (`proxy.reverse.rounds`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import structlog
from aiohttp import web

from config.settings import Settings
from proxy.common.faults import Observe, reported_error
from proxy.common.http_replies import Exchange, json_reply, streamed
from proxy.common.per_principal import Caps, PrincipalCounts
from proxy.reverse.listen import Listener
from proxy.reverse.local import answer_locally
from proxy.reverse.rounds import Rounds
from proxy.reverse.sessions import ReverseSession, ReverseSessions
from proxy.upstream.modern.caller import ModernCaller
from translators.protocol.era_detection import discover_request
from translators.protocol.eras import (
    CANCELLED,
    INITIALIZE,
)
from translators.reverse.session import initialize_result, modern_meta, open_client
from translators.wire import fast_json
from translators.wire.errors import INVALID_REQUEST, LimitExceeded
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject, error_response, result_response
from translators.wire.sse import encode_event

_log = structlog.get_logger("proxy.reverse")
SESSION: Final = "Mcp-Session-Id"
NOT_FOUND: Final = -32001
_SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


def _error(status: int, code: int, message: str, request_id: Any = None) -> web.Response:
    body = error_response(request_id, {"code": code, "message": message})
    return web.json_response(body, status=status)


class ReverseFront:
    """Serves legacy HTTP clients itself, speaking 2026-07-28 to the upstream through `caller`."""

    def __init__(
        self,
        settings: Settings,
        caller: ModernCaller,
        client_info: JsonObject,
        held: PrincipalCounts,
        observe: Observe | None = None,
    ) -> None:
        """`held`: the bridge's count of calls waiting for their client's input; `observe` hears
        of every refusal (the metrics)."""
        self._settings = settings
        self._caller = caller
        self._client_info = client_info
        self._held = held
        self._observe = observe
        caps = Caps(
            settings.reverse.max_sessions_per_principal,
            settings.front.max_legacy_sessions,
            "reverse.max_sessions_per_principal",
            "front.max_legacy_sessions",
            "legacy sessions",
        )
        self.sessions = ReverseSessions(caps, settings.reverse.session_idle_s)
        self._listener = Listener(caller)

    def serves(self, session_id: str | None) -> bool:
        return session_id is not None and self.sessions.knows(session_id)

    async def serve(
        self,
        request: web.Request,
        exchange: Exchange,
        decoded: Any,
        principal: str,
    ) -> web.StreamResponse:
        """`decoded` is the parsed POST body (None for GET / DELETE)."""
        exchange.mode = "reverse"
        session_id = request.headers.get(SESSION)
        authorization = request.headers.get("Authorization")
        if request.method == "POST" and isinstance(decoded, dict):
            if decoded.get("method") == INITIALIZE and session_id is None:
                return await self._initialize(decoded, principal, authorization, exchange)
        if session_id is None:
            return _error(400, INVALID_REQUEST, "Bad Request: Missing session ID")
        session = self.sessions.get(session_id, principal)
        if session is None:
            return _error(404, NOT_FOUND, "Session not found")
        if request.method == "DELETE":
            self.sessions.close(session_id)
            return web.Response(status=200)
        self.sessions.begin(session_id)  # in use, so no other principal's session takes its place
        try:
            if request.method == "GET":
                return await self._get_stream(request, session, authorization)
            if isinstance(decoded, list):
                return _error(400, INVALID_REQUEST, "Batches are not supported by this server")
            if not isinstance(decoded, dict):
                return _error(400, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")
            return await self._post(request, session, decoded, authorization, exchange)
        finally:
            self.sessions.end(session_id)

    async def _initialize(
        self, message: JsonObject, principal: str, authorization: str | None, exchange: Exchange
    ) -> web.StreamResponse:
        request_id = message.get("id")
        view = open_client(as_object(message.get("params")))
        discover = discover_request(self._client_info)
        discover["params"]["_meta"] = modern_meta(view)
        reply = await self._caller.call(discover, lambda _: None, authorization)
        if "error" in reply:
            error = as_object(reply.get("error"))
            _log.warning("reverse_discover_failed", code=error.get("code"))
            return json_reply(error_response(request_id, error), 502, exchange)
        result = initialize_result(view, as_object(reply.get("result")), listen_supported=True)
        try:
            session = self.sessions.open(principal, view)
        except LimitExceeded as refusal:
            return self._refused(refusal, request_id, exchange)
        response = json_reply(result_response(request_id, result), 200, exchange)
        response.headers[SESSION] = session.id
        return response

    def _refused(
        self, refusal: LimitExceeded, request_id: Any, exchange: Exchange
    ) -> web.StreamResponse:
        """503: no room for a new session (the same `initialize` succeeds once some end)."""
        if self._observe is not None:
            self._observe(refusal)
        reply = json_reply(error_response(request_id, reported_error(refusal)), 503, exchange)
        reply.headers["Retry-After"] = "5"
        return reply

    async def _post(
        self,
        request: web.Request,
        session: ReverseSession,
        message: JsonObject,
        authorization: str | None,
        exchange: Exchange,
    ) -> web.StreamResponse:
        method = message.get("method")
        exchange.method = method if isinstance(method, str) else None
        if not isinstance(method, str):
            if "id" in message and ("result" in message or "error" in message):
                session.answered(message)
                return web.Response(status=202)
            return _error(400, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")
        if "id" not in message:
            if method == CANCELLED:
                session.cancel(as_object(message.get("params")).get("requestId"))
            return web.Response(status=202)
        request_id = message["id"]
        exchange.front_request_id = request_id if isinstance(request_id, int | str) else None
        local = answer_locally(
            session, message, lambda: self._listener.refresh(session, authorization)
        )
        if local is not None:
            return json_reply(local, 400 if "error" in local else 200, exchange)
        return await self._stream(request, session, message, authorization, exchange)

    async def _stream(
        self,
        request: web.Request,
        session: ReverseSession,
        message: JsonObject,
        authorization: str | None,
        exchange: Exchange,
    ) -> web.StreamResponse:
        owner = asyncio.current_task()
        assert owner is not None
        key = repr(message["id"])
        session.in_flight[key] = owner
        rounds = Rounds(
            self._settings, self._caller, session, authorization, self._held, self._observe
        )
        try:
            stream, response = await streamed(
                request,
                self._settings.front.sse_keepalive_s,
                lambda send: rounds.run(message, send),
            )
        finally:
            if session.in_flight.get(key) is owner:
                del session.in_flight[key]
        if stream is not None:
            exchange.mode = "reverse-sse"
            return stream
        return json_reply(response, 200, exchange)

    async def _get_stream(
        self, request: web.Request, session: ReverseSession, authorization: str | None
    ) -> web.StreamResponse:
        if session.outbox is not None:
            return _error(
                409, INVALID_REQUEST, "Conflict: Only one SSE stream is allowed per session"
            )
        outbox: asyncio.Queue[JsonObject] = asyncio.Queue()
        session.outbox = outbox
        stream = web.StreamResponse(status=200, headers={**_SSE_HEADERS, SESSION: session.id})
        try:
            await stream.prepare(request)
            self._listener.refresh(session, authorization)
            keepalive = self._settings.front.sse_keepalive_s
            while not session.closed:
                try:
                    async with asyncio.timeout(keepalive):
                        message = await outbox.get()
                except TimeoutError:
                    await stream.write(b": keep-alive\n\n")
                    continue
                data = fast_json.dumps(message).decode()
                await stream.write(encode_event(data, event="message"))
        except ConnectionResetError:
            _log.debug("reverse_get_stream_closed")
        finally:
            if session.outbox is outbox:
                session.outbox = None
            self._listener.stop(session)
        return stream

    async def aclose(self) -> None:
        self.sessions.close_all()
        await self._listener.aclose()
        await self._caller.aclose()


__all__ = ["ReverseFront"]
