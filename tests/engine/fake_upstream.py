"""An in-memory legacy upstream for scripted engine tests: no sockets, no processes, no legacy venv.

`FakeUpstream.open` is a `SessionOpener` (the seam `proxy.upstream.pool.UpstreamPool` opens sessions
through); `bridge_runtime(settings, opener=upstream.open)` builds the real engine, pool and
held-call registry around it. Every session it opens is a `FakeSession` (a `PooledSession`) that
answers `initialize` with the chosen protocol version and capabilities, records everything the
bridge sends (answers to pushes, cancellations, notifications, closes) in `received`, and lets the
test script the server side of each call:

    call = await upstream.next_call("tools/call")   # the bridge started a call upstream push =
    call.push("elicitation/create", {...})    # on the call's stream (or on_get=True: GET stream)
    answer = await push.answered()                   # what the bridge answered it
    call.finish({"content": [...]})                   # or finish_after(s, ...), fail(...), drop(),
                                                      # reply_raw(...), garbage(...), session.die()

Messages reach the bridge synchronously, in the order the test sends them, like a transport that
delivers each message the moment it is read. Calls of the methods in `auto` are answered at once.
The call's outcome slot is the transports' own `OutcomeCall`, so results, JSON-RPC errors and
malformed replies settle exactly as they do over HTTP and stdio.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any

from proxy.upstream.base import Inbound, InboundHandler
from proxy.upstream.call import OutcomeCall
from translators.protocol.eras import LEGACY_VERSION, META_INPUT_KEY_HINT
from translators.protocol.revisions import REVISIONS, Revision
from translators.wire.errors import BridgeError, UpstreamSessionLost, UpstreamUnavailable
from translators.wire.jsonrpc import JsonObject

WAIT_S = 5.0  # a generous ceiling for anything a test waits for; a pass takes milliseconds
SERVER_CAPABILITIES: JsonObject = {"tools": {}, "prompts": {}, "resources": {}}


class Push:
    """One server-to-client request the fake sent, and the bridge's answer to it once it comes."""

    def __init__(self, push_id: int, method: str, params: JsonObject) -> None:
        self.push_id = push_id
        self.method = method
        self.params = params
        self._answer: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()

    @property
    def is_answered(self) -> bool:
        return self._answer.done()

    async def answered(self, timeout: float = WAIT_S) -> JsonObject:
        """The bridge's response: `{"result": ...}` or `{"error": ...}`."""
        async with asyncio.timeout(timeout):
            return await asyncio.shield(self._answer)

    def settle(self, outcome: JsonObject) -> None:
        if not self._answer.done():
            self._answer.set_result(outcome)


class FakeCall:
    """One request the bridge sent upstream (implements `UpstreamCall`), scripted by the test."""

    def __init__(
        self,
        session: FakeSession,
        request_id: int,
        method: str,
        params: JsonObject,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> None:
        self.session = session
        self.method = method
        self.params = params
        self.headers = dict(headers)
        self._on_inbound = on_inbound
        self._outcome = OutcomeCall(request_id, method, self._send_cancel, "Fake upstream")
        self.cancelled = asyncio.Event()
        self.cancel_reason: str | None = None

    # ---- UpstreamCall --------------------------------------------------------------------------

    @property
    def upstream_request_id(self) -> int:
        return self._outcome.upstream_request_id

    async def result(self) -> JsonObject:
        return await self._outcome.result()

    def outcome(self) -> JsonObject:
        return self._outcome.outcome()

    def watch(self, waiter: asyncio.Future[None]) -> None:
        self._outcome.watch(waiter)

    async def cancel(self, reason: str) -> None:
        await self._outcome.cancel(reason)

    async def first_event_id(self, wait_s: float) -> str | None:
        return None  # no stream of its own to resume, as over stdio

    async def _send_cancel(self, _call: Any, reason: str) -> None:
        self.session.record("cancel", self.upstream_request_id, reason)
        self.cancel_reason = reason
        self.cancelled.set()

    # ---- the server's side ---------------------------------------------------------------------

    @property
    def is_done(self) -> bool:
        return self._outcome.is_done

    async def cancellation(self, timeout: float = WAIT_S) -> str | None:
        """Wait (bounded) until the bridge cancels this call; the reason it gave."""
        async with asyncio.timeout(timeout):
            await self.cancelled.wait()
        return self.cancel_reason

    @property
    def arguments(self) -> JsonObject:
        arguments = self.params.get("arguments")
        return arguments if isinstance(arguments, dict) else {}

    def push(
        self,
        method: str,
        params: JsonObject | None = None,
        *,
        key: str | None = None,
        on_get: bool = False,
    ) -> Push:
        """Send a push (elicitation/sampling/roots) on this call's stream, or on the session's GET
        stream; `key` asks for that input key (the `dev.mrtr-bridge/inputKey` hint)."""
        body = dict(params or {})
        if key is not None:
            body["_meta"] = {META_INPUT_KEY_HINT: key}
        return self.session.send_push(
            method, body, related=None if on_get else self.upstream_request_id
        )

    def notify(
        self, method: str, params: JsonObject | None = None, *, on_get: bool = False
    ) -> None:
        message: JsonObject = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        self.session.deliver(message, related=None if on_get else self.upstream_request_id)

    def garbage(self, message: JsonObject) -> None:
        """Deliver a malformed message on this call's stream (the transport parsed it as JSON)."""
        self.session.deliver(message, related=self.upstream_request_id)

    def finish(self, result: JsonObject) -> None:
        self._outcome.resolve({"jsonrpc": "2.0", "id": self.upstream_request_id, "result": result})

    def finish_after(self, delay_s: float, result: JsonObject) -> asyncio.TimerHandle:
        """Answer with `result` once `delay_s` has passed (a slow server)."""
        return asyncio.get_running_loop().call_later(delay_s, self.finish, result)

    def fail(self, code: int, message: str, data: Any = None) -> None:
        error: JsonObject = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._outcome.resolve({"jsonrpc": "2.0", "id": self.upstream_request_id, "error": error})

    def reply_raw(self, response: JsonObject) -> None:
        """Answer with any response object (e.g. a non-object result)."""
        self._outcome.resolve(response)

    def drop(self) -> None:
        """The call's stream ends without its response."""
        self.fail_with(
            UpstreamSessionLost(
                f"Fake upstream closed the stream of {self.method} before answering"
            )
        )

    def fail_with(self, error: BridgeError) -> None:
        self._outcome.fail(error)

    def deliver(self, message: JsonObject) -> None:
        if self._on_inbound is not None:
            self._on_inbound(Inbound(message, self.upstream_request_id))


def _lost(reason: str) -> str:
    """The client's message for a dead server, in the bridge's own words as the stdio transport
    gives them."""
    return f"The upstream session was lost: {reason}"


class FakeSession:
    """One initialized legacy session (implements `PooledSession`)."""

    def __init__(
        self,
        upstream: FakeUpstream,
        number: int,
        capabilities: JsonObject,
        headers: Mapping[str, str],
        on_unrelated: InboundHandler,
    ) -> None:
        self.upstream = upstream
        self.number = number
        self.client_capabilities = capabilities  # what the bridge declared in initialize
        self.init_headers = dict(headers)
        self.on_unrelated = on_unrelated
        self.init_result: JsonObject = {
            "protocolVersion": upstream.protocol_version,
            "capabilities": upstream.capabilities,
            "serverInfo": {"name": "fake-legacy", "version": "1.0"},
        }
        self.calls: list[FakeCall] = []
        self.received: list[
            tuple[str, Any, Any]
        ] = []  # ("answer", push id, outcome), ("cancel", id, reason)...
        self.pushes: dict[int, Push] = {}
        self.closed = asyncio.Event()
        self._dead: str | None = None
        self.answers_fail: str | None = (
            None  # answers to pushes fail with this reason; calls stay open
        )
        self.has_get_stream = upstream.get_stream
        self.reinitialized_count = 0
        self.forgotten = False

    @property
    def revision(self) -> Revision:
        return REVISIONS[self.upstream.protocol_version]

    # a session that ends with its process, as over stdio: nothing another process could reopen
    session_id: str | None = None

    def sealable_cookies(self) -> list[Any]:
        return []

    def forget_on_close(self) -> bool:
        self.forgotten = True  # closing ends it all the same, as a process ends
        return False

    def resume(self, method: str, upstream_request_id: int, last_event_id: str, **_: Any) -> None:
        return None

    @property
    def is_alive(self) -> bool:
        return self._dead is None and not self.closed.is_set()

    async def wait_closed(self, timeout: float = WAIT_S) -> None:
        async with asyncio.timeout(timeout):
            await self.closed.wait()

    def record(self, kind: str, subject: Any, detail: Any) -> None:
        self.received.append((kind, subject, detail))

    def start(
        self,
        method: str,
        params: JsonObject,
        *,
        headers: Mapping[str, str],
        on_inbound: InboundHandler | None,
    ) -> FakeCall:
        call = FakeCall(self, next(self.upstream.request_ids), method, params, headers, on_inbound)
        self.calls.append(call)
        self.record("request", call.upstream_request_id, method)
        if not self.is_alive:
            call.fail_with(UpstreamSessionLost("Upstream session to Fake upstream was closed"))
        elif method in self.upstream.auto:
            call.finish(self.upstream.auto[method])
        else:
            self.upstream.started(call)
        return call

    async def respond(
        self,
        push_id: int | str,
        *,
        result: JsonObject | None = None,
        error: JsonObject | None = None,
    ) -> None:
        if not self.is_alive:
            raise UpstreamSessionLost(
                f"Upstream session to Fake upstream is closed ({self._dead or 'closed'})"
            )
        if self.answers_fail is not None:
            raise UpstreamSessionLost(
                f"Fake upstream {self.answers_fail}", public=_lost(self.answers_fail)
            )
        outcome: JsonObject = {"result": result} if error is None else {"error": error}
        self.record("answer", push_id, outcome)
        push = self.pushes.get(push_id) if isinstance(push_id, int) else None
        if push is not None:
            push.settle(outcome)

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        if not self.is_alive:
            raise UpstreamSessionLost("Upstream session to Fake upstream is closed")
        self.record("notify", method, params)

    async def aclose(self) -> None:
        if not self.closed.is_set():
            self.record("close", None, None)
            self.closed.set()
            self._fail_calls(UpstreamSessionLost("Upstream session to Fake upstream was closed"))

    # ---- the server's side ---------------------------------------------------------------------

    async def initialize(self, capabilities: JsonObject, *, on_unrelated: InboundHandler) -> None:
        """A spare process becomes a session (the stdio opener's second step)."""
        if self._dead is not None:
            await self.aclose()
            raise UpstreamUnavailable(f"Fake upstream {self._dead} before answering initialize")
        self.client_capabilities = capabilities
        self.on_unrelated = on_unrelated
        self.upstream.sessions.append(self)

    def die(self, reason: str = "exited with code 1") -> None:
        """The server goes away: every open call fails, answers can no longer be sent."""
        self._dead = reason
        self._fail_calls(UpstreamSessionLost(f"Fake upstream {reason}", public=_lost(reason)))

    def _fail_calls(self, error: BridgeError) -> None:
        for call in self.calls:
            call.fail_with(error)

    def send_push(self, method: str, params: JsonObject, *, related: int | None) -> Push:
        push = Push(next(self.upstream.push_ids), method, params)
        self.pushes[push.push_id] = push
        self.deliver(
            {"jsonrpc": "2.0", "id": push.push_id, "method": method, "params": params},
            related=related,
        )
        return push

    def push_on_get(self, method: str, params: JsonObject | None = None) -> Push:
        return self.send_push(method, dict(params or {}), related=None)

    def deliver(self, message: JsonObject, *, related: int | None) -> None:
        """Hand a message to the bridge; a closed session's streams are gone, so it is lost."""
        if self.closed.is_set():
            return
        if related is None:
            self.on_unrelated(Inbound(message, None))
            return
        call = next(c for c in self.calls if c.upstream_request_id == related)
        call.deliver(message)

    def answers(self) -> list[tuple[Any, JsonObject]]:
        return [(subject, detail) for kind, subject, detail in self.received if kind == "answer"]

    def cancellations(self) -> list[tuple[Any, str]]:
        return [(subject, detail) for kind, subject, detail in self.received if kind == "cancel"]


class FakeUpstream:
    """The fake server: how it initializes, the sessions it opened and the calls waiting for a
    script."""

    def __init__(
        self,
        *,
        protocol_version: str = LEGACY_VERSION,
        capabilities: JsonObject | None = None,
        get_stream: bool = True,
    ) -> None:
        self.protocol_version = protocol_version
        self.capabilities = dict(SERVER_CAPABILITIES if capabilities is None else capabilities)
        self.get_stream = get_stream
        self.auto: dict[str, JsonObject] = {"tools/list": {"tools": []}, "logging/setLevel": {}}
        self.open_errors: list[BridgeError] = []  # raised by the next opens, in order
        self.sessions: list[FakeSession] = []
        self.request_ids = itertools.count(1)
        self.push_ids = itertools.count(1001)
        self._waiting: asyncio.Queue[FakeCall] = asyncio.Queue()

    async def open(
        self, capabilities: JsonObject, headers: Mapping[str, str], on_unrelated: InboundHandler
    ) -> FakeSession:
        """The `SessionOpener`: initialize a new session (or raise the next scripted open error)."""
        if self.open_errors:
            raise self.open_errors.pop(0)
        session = FakeSession(self, len(self.sessions) + 1, capabilities, headers, on_unrelated)
        self.sessions.append(session)
        return session

    def spares(self, *, dead_first: int = 0) -> FakeSpares:
        """Spare processes for `proxy.app.compose.stdio_opener`; the first `dead_first` died while
        waiting."""
        return FakeSpares(self, dead_first)

    def started(self, call: FakeCall) -> None:
        self._waiting.put_nowait(call)

    async def next_call(self, method: str = "tools/call", timeout: float = WAIT_S) -> FakeCall:
        """The next call the bridge started upstream (not auto-answered); it must be of `method`."""
        async with asyncio.timeout(timeout):
            call = await self._waiting.get()
        assert call.method == method, (
            f"expected an upstream {method}, the bridge sent {call.method}"
        )
        return call

    def no_call_waiting(self) -> bool:
        return self._waiting.empty()

    def all_received(self) -> list[tuple[int, str, Any, Any]]:
        return [(s.number, *entry) for s in self.sessions for entry in s.received]


class FakeSpares:
    """Stands in for `SpareProcesses`: `take()` hands out started, uninitialized fake processes."""

    def __init__(self, upstream: FakeUpstream, dead_first: int) -> None:
        self.upstream = upstream
        self.dead_first = dead_first
        self.taken: list[FakeSession] = []

    async def take(self) -> FakeSession:
        spare = FakeSession(self.upstream, len(self.taken) + 1, {}, {}, _unset_handler)
        if len(self.taken) < self.dead_first:
            spare.die("exited with code 1")
        self.taken.append(spare)
        return spare


def _unset_handler(inbound: Inbound) -> None:
    raise AssertionError(f"a message reached a process before its initialize: {inbound.message}")
