"""HttpUpstreamSession against the scriptable fake legacy server
(2025-11-25/basic/transports.mdx)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from fake_legacy import FakeCall, FakeLegacy, FakeRpcError, text_result
from structlog.testing import capture_logs

from config.settings import UpstreamSettings
from proxy.upstream.base import Inbound
from proxy.upstream.http.session import CLIENT_NAME, MAX_RESUME_ATTEMPTS, HttpUpstreamSession
from proxy.upstream.http.streams import MAX_GET_FAILURES
from translators.protocol.eras import ELICIT, LEGACY_VERSION, SAMPLE
from translators.protocol.revisions import UnsupportedUpstreamVersion
from translators.wire.errors import (
    INVALID_PARAMS,
    UpstreamFault,
    UpstreamProtocolError,
    UpstreamReturnedError,
    UpstreamSessionLost,
    UpstreamTimeout,
    UpstreamUnavailable,
)

CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}
ServerFactory = Callable[..., Awaitable[TestServer]]


class Inbox:
    """Collects inbound messages; `next()` waits (bounded) for the next one."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Inbound] = asyncio.Queue()
        self.seen: list[Inbound] = []

    def __call__(self, inbound: Inbound) -> None:
        self.seen.append(inbound)
        self.queue.put_nowait(inbound)

    async def next(self) -> Inbound:
        async with asyncio.timeout(5):
            return await self.queue.get()


@pytest.fixture
def fake() -> FakeLegacy:
    fake = FakeLegacy()

    async def echo(call: FakeCall) -> dict[str, Any]:
        return text_result(str(call.arguments.get("text", "")))

    fake.tools["echo"] = echo
    return fake


@pytest.fixture
async def url(fake: FakeLegacy, aiohttp_server: ServerFactory) -> str:
    server = await aiohttp_server(fake.app)
    return str(server.make_url("/mcp"))


async def open_session(
    client: aiohttp.ClientSession, url: str, unrelated: Inbox | None = None, **settings: Any
) -> HttpUpstreamSession:
    options = {"url": url, "init_timeout_s": 2.0, "connect_timeout_s": 1.0, **settings}
    return await HttpUpstreamSession.open(
        client,
        url,
        CAPS,
        headers={"Authorization": "Bearer s3cret"},
        on_unrelated=unrelated or Inbox(),
        settings=UpstreamSettings(**options),
    )


async def call_tool(
    session: HttpUpstreamSession, name: str, inbox: Inbox | None = None, **args: Any
) -> Any:
    call = session.start(
        "tools/call", {"name": name, "arguments": args}, headers={}, on_inbound=inbox
    )
    async with asyncio.timeout(5):
        return await call.result()


async def test_open_initializes_and_keeps_a_get_stream(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """open() sends initialize with the legacy version, the given capabilities and the bridge's
    clientInfo, then notifications/initialized, then opens a GET stream; later requests carry
    session and version."""
    session = await open_session(client, url)
    try:
        [server_session] = fake.all_sessions
        assert server_session.init_params["protocolVersion"] == LEGACY_VERSION
        assert server_session.init_params["capabilities"] == CAPS
        assert server_session.init_params["clientInfo"]["name"] == CLIENT_NAME
        assert server_session.initialized
        assert session.has_get_stream and session.is_alive
        assert session.init_result["serverInfo"]["name"] == "fake-legacy"
        assert await call_tool(session, "echo", text="hi") == text_result("hi")
        verb, rpc, headers = fake.requests[-1]
        assert (verb, rpc) == ("POST", "tools/call")
        assert headers["Mcp-Session-Id"] == server_session.session_id
        assert headers["MCP-Protocol-Version"] == LEGACY_VERSION
        assert headers["Accept"] == "application/json, text/event-stream"
        assert headers["Authorization"] == "Bearer s3cret"
        assert fake.rpc_methods() == ["initialize", "notifications/initialized", "tools/call"]
    finally:
        await session.aclose()


async def test_json_replies_are_supported(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A server answering with application/json (initialize and calls) works the same."""
    fake.json_mode = True
    session = await open_session(client, url)
    try:
        assert await call_tool(session, "echo", text="json") == text_result("json")
    finally:
        await session.aclose()


async def test_post_stream_push_goes_to_the_call(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """An elicitation on the POST stream reaches on_inbound with the call's id; the answer completes
    the call."""

    async def ask(call: FakeCall) -> dict[str, Any]:
        await call.notify("notifications/progress", {"progressToken": 1, "progress": 0.5})
        answer = await call.push(
            ELICIT, {"message": "Name?", "requestedSchema": {"type": "object"}}
        )
        return text_result(answer["result"]["content"]["name"])

    fake.tools["ask"] = ask
    unrelated, inbox = Inbox(), Inbox()
    session = await open_session(client, url, unrelated)
    try:
        call = session.start("tools/call", {"name": "ask"}, headers={}, on_inbound=inbox)
        progress, push = await inbox.next(), await inbox.next()
        assert progress.message["method"] == "notifications/progress"
        assert push.message["method"] == ELICIT
        assert push.related_request_id == call.upstream_request_id
        await session.respond(
            push.message["id"], result={"action": "accept", "content": {"name": "Ada"}}
        )
        async with asyncio.timeout(5):
            assert await call.result() == text_result("Ada")
        assert unrelated.seen == []
    finally:
        await session.aclose()


async def test_get_stream_push_goes_to_on_unrelated(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A sampling push on the GET stream reaches on_unrelated without a related id."""

    async def sample(call: FakeCall) -> dict[str, Any]:
        answer = await call.push(SAMPLE, {"messages": [], "maxTokens": 5}, on_get=True)
        return text_result(answer["result"]["content"]["text"])

    fake.tools["sample"] = sample
    unrelated, inbox = Inbox(), Inbox()
    session = await open_session(client, url, unrelated)
    try:
        call = session.start("tools/call", {"name": "sample"}, headers={}, on_inbound=inbox)
        push = await unrelated.next()
        assert (push.message["method"], push.related_request_id) == (SAMPLE, None)
        reply = {"role": "assistant", "content": {"type": "text", "text": "poem"}, "model": "m"}
        await session.respond(push.message["id"], result=reply)
        async with asyncio.timeout(5):
            assert await call.result() == text_result("poem")
        assert inbox.seen == []
    finally:
        await session.aclose()


async def test_server_ping_is_answered_and_never_surfaces(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A server ping on the POST stream is answered {} by the transport and not handed to
    on_inbound."""

    async def pinging(call: FakeCall) -> dict[str, Any]:
        answer = await call.push("ping")
        return text_result(json.dumps(answer["result"]))

    fake.tools["pinging"] = pinging
    inbox = Inbox()
    session = await open_session(client, url)
    try:
        assert await call_tool(session, "pinging", inbox) == text_result("{}")
        assert inbox.seen == []
    finally:
        await session.aclose()


async def test_early_close_is_resumed_with_last_event_id(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A POST stream closed before its response is resumed by GET + Last-Event-ID; nothing is lost
    or doubled."""

    async def polling(call: FakeCall) -> dict[str, Any]:
        await call.notify("notifications/message", {"level": "info", "data": "before"})
        await call.drop_connection()
        await call.push(
            ELICIT, {"message": "after the drop", "requestedSchema": {"type": "object"}}
        )
        return text_result("done")

    fake.tools["polling"] = polling
    inbox = Inbox()
    session = await open_session(client, url)
    try:
        call = session.start("tools/call", {"name": "polling"}, headers={}, on_inbound=inbox)
        assert (await inbox.next()).message["method"] == "notifications/message"
        push = await inbox.next()
        assert push.related_request_id == call.upstream_request_id
        await session.respond(push.message["id"], result={"action": "decline"})
        async with asyncio.timeout(5):
            assert await call.result() == text_result("done")
        resumes = [
            h["Last-Event-ID"]
            for verb, _, h in fake.requests
            if verb == "GET" and "Last-Event-ID" in h
        ]
        assert resumes == [f"s{call.upstream_request_id}:1"]  # priming is :0, the log message :1
        assert len(inbox.seen) == 2
    finally:
        await session.aclose()


async def test_early_close_without_event_id_fails_clearly(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A stream closed early with no event id cannot be resumed: UpstreamProtocolError naming the
    upstream."""

    async def dropping(call: FakeCall) -> dict[str, Any]:
        await call.drop_connection()
        await asyncio.Event().wait()
        return {}

    fake.tools["dropping"] = dropping
    fake.event_ids = False
    session = await open_session(client, url)
    try:
        with pytest.raises(UpstreamProtocolError, match=r"no event id to resume from") as info:
            await call_tool(session, "dropping")
        assert url in info.value.message
    finally:
        await session.aclose()


async def test_resumption_refused_with_405_fails_clearly(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A server that closes early but answers the resuming GET with 405 yields
    UpstreamProtocolError."""

    async def dropping(call: FakeCall) -> dict[str, Any]:
        await call.drop_connection()
        return text_result("never delivered")

    fake.tools["dropping"] = dropping
    fake.resume_status = 405
    session = await open_session(client, url)
    try:
        with pytest.raises(UpstreamProtocolError, match="does not support resumption"):
            await call_tool(session, "dropping")
    finally:
        await session.aclose()


async def test_resumption_attempts_are_bounded(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A resuming GET that keeps failing (503) gives up after MAX_RESUME_ATTEMPTS with
    UpstreamSessionLost."""

    async def dropping(call: FakeCall) -> dict[str, Any]:
        await call.drop_connection()
        return text_result("never delivered")

    fake.tools["dropping"] = dropping
    fake.resume_status = 503
    session = await open_session(client, url)
    try:
        with pytest.raises(UpstreamSessionLost, match="could not be resumed"):
            await call_tool(session, "dropping")
        resumes = [h for verb, _, h in fake.requests if verb == "GET" and "Last-Event-ID" in h]
        assert len(resumes) == MAX_RESUME_ATTEMPTS
    finally:
        await session.aclose()


async def test_response_on_the_get_stream_resolves_the_call(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A response that arrives on the GET stream settles the matching call."""

    async def elsewhere(call: FakeCall) -> dict[str, Any]:
        assert call.session.get_stream is not None
        reply = {"jsonrpc": "2.0", "id": call.request_id, "result": text_result("via get")}
        await call.session.get_stream.add(json.dumps(reply))
        await asyncio.Event().wait()
        return {}

    fake.tools["elsewhere"] = elsewhere
    session = await open_session(client, url)
    try:
        assert await call_tool(session, "elsewhere") == text_result("via get")
    finally:
        await session.aclose()


async def test_expired_session_is_reinitialized_and_request_retried(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """After the server forgets the session (404), the request is retried once on a new session."""
    fake.get_status = 405  # no GET stream: the 404 is first seen by the POST itself
    session = await open_session(client, url)
    try:
        await call_tool(session, "echo", text="one")
        await fake.expire()
        results = await asyncio.gather(*(call_tool(session, "echo", text=str(n)) for n in range(3)))
        assert results == [text_result(str(n)) for n in range(3)]
        assert fake.rpc_methods().count("initialize") == 2
        assert session.reinitialized_count == 1
    finally:
        await session.aclose()


async def test_get_stream_404_reinitializes_before_the_next_call(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """When the GET stream learns of expiry (404), the session re-initializes at once; calls
    succeed."""
    session = await open_session(client, url)
    try:
        await fake.expire()
        async with asyncio.timeout(5):
            # the GET stream reconnects, gets 404, re-initializes
            while session.reinitialized_count == 0:
                await asyncio.sleep(0.01)
        assert session.is_alive and session.has_get_stream
        assert await call_tool(session, "echo", text="fresh") == text_result("fresh")
        assert fake.rpc_methods().count("initialize") == 2
        assert "tools/call" not in [
            rpc for v, rpc, h in fake.requests if h.get("Mcp-Session-Id") == "sess-1"
        ]
    finally:
        await session.aclose()


async def test_expiry_after_a_push_fails_the_call(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A call that already delivered a push is not replayed after expiry: UpstreamSessionLost."""

    async def ask_then_vanish(call: FakeCall) -> dict[str, Any]:
        await call.push(ELICIT, {"message": "Name?", "requestedSchema": {"type": "object"}})
        call.server.sessions.clear()
        await call.drop_connection()
        await asyncio.Event().wait()
        return {}

    fake.tools["vanish"] = ask_then_vanish
    inbox = Inbox()
    session = await open_session(client, url)
    try:
        call = session.start("tools/call", {"name": "vanish"}, headers={}, on_inbound=inbox)
        push = await inbox.next()
        await session.respond(push.message["id"], result={"action": "cancel"})
        with pytest.raises(UpstreamSessionLost, match="was not replayed"):
            async with asyncio.timeout(5):
                await call.result()
        assert fake.rpc_methods().count("initialize") == 1
    finally:
        await session.aclose()


async def test_get_405_is_tolerated(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A server that offers no GET stream (405) still serves calls."""
    fake.get_status = 405
    session = await open_session(client, url)
    try:
        assert not session.has_get_stream and session.is_alive
        assert await call_tool(session, "echo", text="x") == text_result("x")
    finally:
        await session.aclose()


async def test_get_stream_reconnects_after_the_server_closes_it(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A GET stream closed by the server is reopened after `retry`, and pushes still arrive
    there."""

    async def sample(call: FakeCall) -> dict[str, Any]:
        answer = await call.push(SAMPLE, {"messages": [], "maxTokens": 5}, on_get=True)
        return text_result(answer["result"]["model"])

    fake.tools["sample"] = sample
    unrelated = Inbox()
    session = await open_session(client, url, unrelated)
    try:
        [server_session] = fake.all_sessions
        assert server_session.get_stream is not None
        await server_session.get_stream.drop()
        await fake.wait_until(lambda: fake.get_connects == 2)
        assert fake.requests[-1][2]["Last-Event-ID"] == "get:0"  # resumed after the priming event
        call = session.start("tools/call", {"name": "sample"}, headers={}, on_inbound=None)
        push = await unrelated.next()
        await session.respond(
            push.message["id"], result={"role": "assistant", "content": {}, "model": "m2"}
        )
        async with asyncio.timeout(5):
            assert await call.result() == text_result("m2")
    finally:
        await session.aclose()


async def test_get_stream_that_cannot_reconnect_marks_the_session_dead(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A GET stream that keeps failing to reconnect (pushes would be lost) makes is_alive false."""
    session = await open_session(client, url)
    try:
        [server_session] = fake.all_sessions
        assert server_session.get_stream is not None
        fake.resume_status = 503
        await server_session.get_stream.drop()
        async with asyncio.timeout(5):
            while session.is_alive:
                await asyncio.sleep(0.01)
        attempts = [h for verb, _, h in fake.requests if verb == "GET" and "Last-Event-ID" in h]
        assert len(attempts) == MAX_GET_FAILURES
        assert not session.has_get_stream
    finally:
        await session.aclose()


async def test_upstream_error_reply_raises_returned_error(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A JSON-RPC error reply surfaces as UpstreamReturnedError carrying the error object."""

    async def failing(call: FakeCall) -> dict[str, Any]:
        raise FakeRpcError(INVALID_PARAMS, "bad arguments")

    fake.tools["failing"] = failing
    session = await open_session(client, url)
    try:
        with pytest.raises(UpstreamReturnedError) as info:
            await call_tool(session, "failing")
        assert info.value.error == {"code": INVALID_PARAMS, "message": "bad arguments"}
    finally:
        await session.aclose()


async def test_garbage_on_the_stream_is_skipped_as_over_http_sse(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """An event that is not JSON, or not a JSON-RPC message, is logged and skipped, the one rule of
    every upstream transport (test_upstream_sse.py has the same case): the call's response after
    it completes the call, and the session keeps serving."""

    async def garbage(call: FakeCall) -> dict[str, Any]:
        await call.send_raw("this is not json")
        await call.send_raw('{"jsonrpc": "1.0", "method": "x"}')
        return text_result("after the garbage")

    fake.tools["garbage"] = garbage
    session = await open_session(client, url)
    try:
        with capture_logs() as logs:
            assert await call_tool(session, "garbage") == text_result("after the garbage")
        assert [entry["reason"] for entry in logs if "reason" in entry] == [
            "sent a message that is not JSON",
            "sent something that is not a JSON-RPC 2.0 message object",
        ]
        assert await call_tool(session, "echo", text="still") == text_result("still")
    finally:
        await session.aclose()


async def test_oversized_json_body_is_refused(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A JSON reply larger than `upstream.max_line_bytes` fails its call with the limit named,
    to the log and to the client."""
    fake.json_mode = True
    session = await open_session(client, url, max_line_bytes=1024)
    try:
        with pytest.raises(UpstreamProtocolError, match=r"larger than 1024 bytes") as raised:
            await call_tool(session, "echo", text="x" * 4096)
        assert raised.value.public == (
            "The upstream server's answer is larger than the limit of 1024 bytes"
        )
        assert raised.value.data["limit"] == "upstream.max_line_bytes"
    finally:
        await session.aclose()


async def test_garbage_initialize_reply_fails_open(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """An initialize reply that is not JSON makes open() raise UpstreamProtocolError."""
    fake.initialize_body = b"{definitely not json"
    with pytest.raises(UpstreamProtocolError, match="not JSON"):
        await open_session(client, url)


async def test_unsupported_version_closes_and_raises(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """An initialize answered with a version outside the supported set is refused, naming the
    version and the set, and the session deleted."""
    fake.protocol_version = "2024-10-07"
    with pytest.raises(UnsupportedUpstreamVersion) as raised:
        await open_session(client, url)
    assert raised.value.message == (
        f"Upstream {url} answered initialize with protocol version '2024-10-07';"
        " the bridge supports 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05 upstream"
    )
    assert raised.value.data["supported"] == [
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
        "2024-11-05",
    ]
    assert fake.deleted == ["sess-1"]


async def test_cancel_notifies_upstream_and_fails_the_result(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """cancel() POSTs notifications/cancelled with the request id and reason; result() raises
    UpstreamFault."""

    async def forever(call: FakeCall) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    fake.tools["forever"] = forever
    session = await open_session(client, url)
    try:
        call = session.start("tools/call", {"name": "forever"}, headers={}, on_inbound=None)
        await fake.wait_until(lambda: "tools/call" in fake.rpc_methods())
        await call.cancel("client went away")
        await call.cancel("again")  # idempotent
        with pytest.raises(UpstreamFault, match="cancelled"):
            await call.result()
        [server_session] = fake.all_sessions
        cancels = [
            n for n in server_session.notifications if n["method"] == "notifications/cancelled"
        ]
        assert [c["params"] for c in cancels] == [
            {"requestId": call.upstream_request_id, "reason": "client went away"}
        ]
        assert await call_tool(session, "echo", text="alive") == text_result("alive")
    finally:
        await session.aclose()


async def test_aclose_deletes_and_fails_calls_in_flight(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """aclose() ends every call with UpstreamSessionLost, stops every task and DELETEs the
    session."""

    async def forever(call: FakeCall) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    fake.tools["forever"] = forever
    session = await open_session(client, url)
    call = session.start("tools/call", {"name": "forever"}, headers={}, on_inbound=None)
    await fake.wait_until(lambda: "tools/call" in fake.rpc_methods())
    await session.aclose()
    with pytest.raises(UpstreamSessionLost):
        await call.result()
    assert fake.deleted == ["sess-1"]
    assert not session.is_alive and not session.has_get_stream
    with pytest.raises(UpstreamSessionLost):
        session.start("tools/call", {"name": "echo"}, headers={}, on_inbound=None)


async def test_delete_405_is_ignored(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A server that refuses DELETE (405) still lets the session close cleanly."""
    fake.delete_status = 405
    session = await open_session(client, url)
    await session.aclose()
    assert fake.requests[-1][0] == "DELETE" and fake.deleted == []


async def test_unreachable_upstream_is_unavailable_quickly(
    client: aiohttp.ClientSession, unused_tcp_port: int
) -> None:
    """Nothing listening: open() raises UpstreamUnavailable naming the URL, well within a second."""
    url = f"http://127.0.0.1:{unused_tcp_port}/mcp"
    async with asyncio.timeout(1):
        with pytest.raises(UpstreamUnavailable, match=f"Cannot connect to upstream {url}"):
            await open_session(client, url)


async def test_hanging_initialize_times_out(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """An upstream that never answers initialize gives UpstreamTimeout after init_timeout_s."""
    fake.hang_initialize = True
    async with asyncio.timeout(2):
        with pytest.raises(UpstreamTimeout, match="did not answer in time"):
            await open_session(client, url, init_timeout_s=0.2)


async def test_hanging_accept_times_out_respond(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """respond() to an upstream that never answers the POST raises UpstreamTimeout (bounded)."""
    session = await open_session(client, url, init_timeout_s=0.2)
    try:
        fake.hang_accept = True
        async with asyncio.timeout(2):
            with pytest.raises(UpstreamTimeout):
                await session.respond(7, result={})
    finally:
        await session.aclose()


async def test_reserved_headers_cannot_be_overridden(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """Per-request headers are forwarded, but never replace the transport's own headers."""
    session = await open_session(client, url)
    try:
        extra = {"traceparent": "00-abc-def-01", "mcp-session-id": "forged", "Accept": "text/html"}
        call = session.start(
            "tools/call", {"name": "echo", "arguments": {}}, headers=extra, on_inbound=None
        )
        async with asyncio.timeout(5):
            await call.result()
        headers = fake.requests[-1][2]
        assert headers["traceparent"] == "00-abc-def-01"
        assert headers["Mcp-Session-Id"] == "sess-1"
        assert headers["Accept"] == "application/json, text/event-stream"
    finally:
        await session.aclose()


async def test_logs_carry_no_session_id_nor_bodies(
    fake: FakeLegacy, url: str, client: aiohttp.ClientSession
) -> None:
    """A full push cycle logs neither the Mcp-Session-Id value, the credential, nor message
    content."""

    async def ask(call: FakeCall) -> dict[str, Any]:
        answer = await call.push(ELICIT, {"message": "secret-question", "requestedSchema": {}})
        return text_result(answer["result"]["content"]["pin"])

    fake.tools["ask"] = ask
    inbox = Inbox()
    with capture_logs() as logs:
        session = await open_session(client, url)
        call = session.start("tools/call", {"name": "ask"}, headers={}, on_inbound=inbox)
        push = await inbox.next()
        await session.respond(
            push.message["id"], result={"action": "accept", "content": {"pin": "4242"}}
        )
        async with asyncio.timeout(5):
            await call.result()
        await session.aclose()
    dumped = json.dumps(logs, default=str)
    assert logs and "upstream_session_opened" in dumped
    for secret in ("sess-1", "s3cret", "secret-question", "4242"):
        assert secret not in dumped
