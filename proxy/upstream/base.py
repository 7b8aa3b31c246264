"""The seam between the engine and a legacy upstream (docs/decisions.md § 1; the httpx transport
idea).

Every upstream transport (Streamable HTTP, HTTP+SSE, stdio) implements `UpstreamSession`.
Messages are plain JSON-RPC dicts in the *legacy* era; translation happens elsewhere.

Routing of inbound messages (pushes and notifications from the legacy server):
* a message that arrived on the SSE stream of a POST carries `related_request_id` = the
  upstream JSON-RPC id of that POST's request; it is handed to that call's `on_inbound`.
* a message that arrived on the session's GET stream (or, on stdio and HTTP+SSE, anywhere) has
  `related_request_id=None` and is handed to the session's `on_unrelated` callback, which
  the pool routes to the session's exclusive lease holder (docs/decisions.md § 7) or to policy.
* `ping` requests from the server are answered by the transport itself and never surface.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from translators.protocol.revisions import Revision
from translators.tasks_ext.task_ids import SealedCookie
from translators.wire import jsonrpc
from translators.wire.jsonrpc import JsonObject


@dataclass(frozen=True)
class Inbound:
    """One server-to-client message from the legacy server: a push (has `id` and `method`) or a
    notification."""

    message: JsonObject
    related_request_id: int | str | None


InboundHandler = Callable[[Inbound], None]


class UpstreamCall(Protocol):
    """One in-flight upstream request."""

    @property
    def upstream_request_id(self) -> int: ...

    @property
    def is_done(self) -> bool:
        """Whether its outcome (result, error or failure) is in."""
        ...

    async def result(self) -> JsonObject:
        """The legacy result object; raises `UpstreamReturnedError` for a JSON-RPC error reply and
        `UpstreamFault` subclasses for transport failures (never a foreign exception)."""
        ...

    def outcome(self) -> JsonObject:
        """What `result()` returns or raises, once `is_done` (a `BridgeBug` before)."""
        ...

    def watch(self, waiter: asyncio.Future[None]) -> None:
        """Resolve `waiter` (unless already done) once `result()` would return or raise; at once
        if it already would."""
        ...

    async def cancel(self, reason: str) -> None:
        """Send `notifications/cancelled` for this request and stop waiting for its result.
        `result()` then raises `asyncio.CancelledError`-free `UpstreamFault`. Idempotent."""
        ...

    async def first_event_id(self, wait_s: float) -> str | None:
        """The id of the first event of the call's own stream, where another process can resume it
        (`UpstreamSession.resume`), waiting up to `wait_s` for that event (a server with an event
        store primes the stream at once); None where the transport has no such stream (stdio,
        HTTP+SSE) or the server gave the event no id."""
        ...


class UpstreamSession(Protocol):
    """One initialized legacy session (an `Mcp-Session-Id`, or one stdio process).

    `init_result` and `revision` are set by `initialize` (plain attributes in every transport: the
    hot path reads them on every call)."""

    @property
    def init_result(self) -> JsonObject:
        """The upstream `InitializeResult` (capabilities, serverInfo, instructions,
        protocolVersion)."""
        ...

    @property
    def revision(self) -> Revision:
        """The legacy revision negotiated at `initialize`; everything sent on the session is valid
        in it."""
        ...

    @property
    def session_id(self) -> str | None:
        """What a new bridge process reopens this session with (Streamable HTTP's `Mcp-Session-Id`,
        sealed into a legacy task's id, never shown); None where the session ends with its
        connection or process (stdio, HTTP+SSE), or the server gave no id."""
        ...

    def sealable_cookies(self) -> list[SealedCookie]:
        """The cookies the session's responses set, as a legacy task's id carries them (a load
        balancer's pin to the replica that holds the session: docs/decisions.md § 33); none where
        the transport keeps none."""
        ...

    def forget_on_close(self) -> bool:
        """Close later without ending the session upstream (no `DELETE`): a one-session server
        (session_limit.py), or a legacy task another process adopts. Whether the session then
        outlives its close: False where closing the connection or the process is the end (stdio,
        HTTP+SSE), with nothing to forget."""
        ...

    def resume(
        self,
        method: str,
        upstream_request_id: int,
        last_event_id: str,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> UpstreamCall | None:
        """Read on, from the event after `last_event_id`, the stream of a request an earlier owner
        of the session sent (transports.mdx § Resumability and Redelivery): what the server replays
        arrives at `on_inbound`, the request's response (if it comes) is the call's result; None
        where the transport cannot resume a stream (stdio, HTTP+SSE)."""
        ...

    @property
    def is_alive(self) -> bool: ...

    @property
    def has_get_stream(self) -> bool:
        """Whether session-wide server messages (list changes, resource updates) can reach the
        bridge."""
        ...

    def start(
        self,
        method: str,
        params: JsonObject,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> UpstreamCall:
        """Send a request (a fresh upstream id is minted) and return at once; the POST runs
        in a task owned by the session. `headers` are per-request extras (Authorization,
        traceparent...)."""
        ...

    async def respond(
        self,
        push_id: int | str,
        *,
        result: JsonObject | None = None,
        error: JsonObject | None = None,
    ) -> None:
        """Answer a push with a JSON-RPC response (exactly one of result/error)."""
        ...

    async def notify(self, method: str, params: JsonObject | None = None) -> None: ...

    async def aclose(self) -> None:
        """Cancel the session's tasks, DELETE the session (HTTP) or stop the process (stdio)."""
        ...


class PooledSession(UpstreamSession, Protocol):
    """What the pool needs of a transport's session beyond `UpstreamSession`."""

    @property
    def reinitialized_count(self) -> int: ...


class TransportInfo(Protocol):
    """What the engine and `/readyz` may know of the upstream transport (never how it works)."""

    @property
    def name(self) -> str:
        """`stdio`, `streamable-http`, `sse`, or `auto (not detected yet)`."""
        ...

    @property
    def streams_per_call(self) -> bool:
        """Whether each call's pushes and notifications come on a stream of its own
        (Streamable HTTP), so an interactive call may share its session; over stdio and HTTP+SSE
        only an exclusive lease attributes them. A plain attribute where it can change (read on
        every lease)."""
        ...

    def adopt(
        self,
        session_id: str,
        init_result: JsonObject,
        *,
        first_request_id: int,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
        cookies: Iterable[SealedCookie] = (),
    ) -> PooledSession | None:
        """The session `session_id` another bridge process opened (a legacy task's,
        docs/tasks.md § What survives what), with the cookies that process's session kept, taken
        over without `initialize`; None where the transport has no such sessions."""
        ...


_init_results: dict[str, JsonObject] = {}  # the last `initialize` result seen, per upstream
_MAX_INIT_RESULTS: Final = 64


def shared_init_result(upstream: str, result: JsonObject) -> JsonObject:
    """One object for equal `initialize` results of the same upstream: every held call keeps a
    session, and the results are only read (server/discover, capability checks)."""
    last = _init_results.get(upstream)
    if last == result:
        return last
    if len(_init_results) >= _MAX_INIT_RESULTS:
        _init_results.clear()
    _init_results[upstream] = result
    return result


class EndsWithItsConnection:
    """What a session that ends with its connection or process (stdio, HTTP+SSE) answers of
    outliving it: no id to reopen it with, no cookies, nothing to forget, no stream to resume."""

    session_id: str | None = None

    def sealable_cookies(self) -> list[SealedCookie]:
        return []

    def forget_on_close(self) -> bool:
        """Closing is the end of the session whatever is forgotten: nothing to do."""
        return False

    def resume(
        self,
        method: str,
        upstream_request_id: int,
        last_event_id: str,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> UpstreamCall | None:
        return None


class SendsMessages:
    """`respond` and `notify` of an `UpstreamSession`, for a transport that sends one message
    upstream with `_send_message` (each transport implements only that)."""

    async def _send_message(self, message: JsonObject, action: str) -> None:
        raise NotImplementedError

    async def respond(
        self,
        push_id: int | str,
        *,
        result: JsonObject | None = None,
        error: JsonObject | None = None,
    ) -> None:
        await self._send_message(
            jsonrpc.answer(push_id, result=result, error=error), "response to a push"
        )

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        await self._send_message(jsonrpc.notification(method, params), method)


@dataclass(frozen=True)
class FixedTransport:
    """A `TransportInfo` that never changes and has no sessions to adopt (stdio, or a scripted
    transport in tests)."""

    name: str
    streams_per_call: bool

    def adopt(
        self,
        session_id: str,
        init_result: JsonObject,
        *,
        first_request_id: int,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
        cookies: Iterable[SealedCookie] = (),
    ) -> PooledSession | None:
        return None


STREAMABLE_HTTP: Final = FixedTransport("streamable-http", streams_per_call=True)
STDIO: Final = FixedTransport("stdio", streams_per_call=False)


# Opens one initialized session: (capabilities, headers, on_unrelated) -> session. The composition
# root picks the transport (HTTP or stdio); the pool never knows which.
SessionOpener = Callable[[JsonObject, Mapping[str, str], InboundHandler], Awaitable[PooledSession]]
