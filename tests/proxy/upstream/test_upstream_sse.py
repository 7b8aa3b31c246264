"""The HTTP+SSE upstream session and transport detection against a scripted in-process server
(`fake_sse`).

What a real server rarely does on demand: an endpoint on another origin, a stream that ends before
its endpoint or under a call, a POST answered 404, credentials refused during detection, and a
remembered transport that stops working.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from fake_sse import FakeSse, FakeSseSession
from structlog.testing import capture_logs

from config.settings import UpstreamSettings
from proxy.common.faults import reported_error
from proxy.upstream.base import Inbound
from proxy.upstream.http.channel import UpstreamRefused
from proxy.upstream.sse import SseUpstreamSession, resolve_endpoint
from proxy.upstream.transport import NOT_DETECTED, HttpTransport
from translators.auth.oauth import UpstreamAuthChallenge
from translators.wire.errors import UpstreamProtocolError, UpstreamSessionLost
from translators.wire.sse import encode_event

ServerFactory = Callable[..., Awaitable[TestServer]]
T = 10.0


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def fake() -> FakeSse:
    return FakeSse()


@pytest.fixture
async def url(fake: FakeSse, aiohttp_server: ServerFactory) -> str:
    return str((await aiohttp_server(fake.app)).make_url("/sse"))


def settings(url: str, **overrides: Any) -> UpstreamSettings:
    return UpstreamSettings(url=url, init_timeout_s=3.0, connect_timeout_s=1.0, **overrides)


async def open_session(
    client: aiohttp.ClientSession, url: str, seen: list[Inbound] | None = None
) -> SseUpstreamSession:
    sink = seen if seen is not None else []
    return await SseUpstreamSession.open(
        client,
        url,
        {"roots": {}},
        headers={"Authorization": "Bearer t"},
        on_unrelated=sink.append,
        settings=settings(url),
    )


def test_endpoint_resolution_stays_on_the_origin_of_the_stream() -> None:
    """Relative and same-origin endpoints resolve against the SSE URL; another origin or nothing is
    refused."""
    base = "http://127.0.0.1:8931/app/sse"
    assert (
        resolve_endpoint(base, "/messages/?session_id=ab")
        == "http://127.0.0.1:8931/messages/?session_id=ab"
    )
    assert resolve_endpoint(base, "messages?s=1") == "http://127.0.0.1:8931/app/messages?s=1"
    assert resolve_endpoint(base, "http://127.0.0.1:8931/m") == "http://127.0.0.1:8931/m"
    foreign = (
        "http://evil.example/m",
        "https://127.0.0.1:8931/m",
        "http://127.0.0.1:9999/m",
        "//x.example/m",
    )
    for endpoint in (*foreign, ""):
        with pytest.raises(UpstreamProtocolError):
            resolve_endpoint(base, endpoint)


async def test_a_call_its_pushes_and_pings_share_the_one_stream(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    """POSTs go to the endpoint; the response comes on the stream; a push goes to on_unrelated;
    a ping is answered by the transport; the caller's headers reach the endpoint."""

    async def ask(session: FakeSseSession, request_id: Any) -> dict[str, Any]:
        session.send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        session.send({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"})
        await session.answer_arrived.wait()
        return {"content": [{"type": "text", "text": "done"}]}

    fake.tools["ask"] = ask
    seen: list[Inbound] = []
    async with asyncio.timeout(T):
        session = await open_session(client, url, seen)
        call = session.start(
            "tools/call", {"name": "ask", "arguments": {}}, headers={}, on_inbound=None
        )
        result = await call.result()
    (server,) = fake.sessions.values()
    assert result == {"content": [{"type": "text", "text": "done"}]}
    assert [inbound.message["method"] for inbound in seen] == ["roots/list"]
    assert seen[0].related_request_id is None
    assert server.answered["p1"] == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    assert [m.get("method") for m in server.received] == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        None,
    ]
    assert session.revision.version == "2025-11-25" and session.has_get_stream and session.is_alive
    await session.aclose()
    assert not session.is_alive


async def test_a_dropped_stream_fails_the_call_in_flight_at_once(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    """The stream ends under a call: the call fails with UpstreamSessionLost, the session is dead
    for good."""
    started = asyncio.Event()

    async def hang(session: FakeSseSession, request_id: Any) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    fake.tools["hang"] = hang
    async with asyncio.timeout(T):
        session = await open_session(client, url)
        call = session.start(
            "tools/call", {"name": "hang", "arguments": {}}, headers={}, on_inbound=None
        )
        await started.wait()
        fake.sessions[1].drop()
        with pytest.raises(UpstreamSessionLost) as lost:
            await call.result()
    assert (
        "closed the SSE stream of the session (HTTP+SSE transport); the session is lost"
        in lost.value.message
    )
    assert "while tools/call was in flight" in lost.value.message
    assert not session.is_alive
    with pytest.raises(UpstreamSessionLost):
        await session.start("ping", {}, headers={}, on_inbound=None).result()
    await session.aclose()


@pytest.mark.parametrize(
    ("endpoint", "phrase"),
    [
        ("http://evil.example/messages", "endpoint event for another origin"),
        ("", "endpoint event for another origin"),
    ],
)
async def test_a_foreign_endpoint_is_refused(
    fake: FakeSse, url: str, client: aiohttp.ClientSession, endpoint: str, phrase: str
) -> None:
    """The bridge POSTs only to the origin it was configured with."""
    fake.endpoint = endpoint
    with pytest.raises(UpstreamProtocolError) as refused:
        await open_session(client, url)
    assert phrase in refused.value.message
    assert all(not session.received for session in fake.sessions.values())


async def test_a_stream_that_is_not_sse_is_refused(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    fake.get_status = 404
    with pytest.raises(UpstreamRefused) as refused:
        await open_session(client, url)
    assert (
        refused.value.status == 404 and "answered SSE stream with HTTP 404" in refused.value.message
    )


async def test_a_post_answered_404_loses_the_session(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    """404 on the endpoint means the server forgot the session: the call fails and the session is
    dead."""
    async with asyncio.timeout(T):
        session = await open_session(client, url)
        fake.post_status = 404
        with pytest.raises(UpstreamSessionLost) as lost:
            await session.start("tools/list", {}, headers={}, on_inbound=None).result()
    assert (
        lost.value.message
        == f"Upstream {url} no longer knows the session (HTTP 404) while tools/list was in flight"
    )
    assert not session.is_alive
    await session.aclose()


# ---- detection -----------------------------------------------------------------------------------


async def test_auto_falls_back_to_sse_on_a_4xx_and_remembers_it(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    """POST initialize gets 405, the GET finds an endpoint: HTTP+SSE, kept for the next session."""
    transport = HttpTransport(client, settings(url))
    assert (transport.name, transport.streams_per_call) == (NOT_DETECTED, False)
    async with asyncio.timeout(T):
        first = await transport({}, {}, lambda inbound: None)
        second = await transport({}, {}, lambda inbound: None)
    assert isinstance(first, SseUpstreamSession) and isinstance(second, SseUpstreamSession)
    assert (transport.name, transport.streams_per_call) == ("sse", False)
    assert len(fake.sessions) == 2
    for session in (first, second):
        await session.aclose()


async def test_auto_does_not_take_a_credential_refusal_for_another_transport(
    aiohttp_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    """401 to POST initialize is the caller's problem, not a transport hint: it surfaces as the
    challenge that reaches the client."""
    app = web.Application()
    app.router.add_route("*", "/mcp", lambda request: _status(401))
    url = str((await aiohttp_server(app)).make_url("/mcp"))
    transport = HttpTransport(client, settings(url))
    with pytest.raises(UpstreamAuthChallenge) as refused:
        await transport({}, {}, lambda inbound: None)
    assert refused.value.status == 401 and transport.name == NOT_DETECTED


async def test_auto_names_both_attempts_when_neither_transport_answers(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    fake.get_status = 404
    transport = HttpTransport(client, settings(url))
    with pytest.raises(UpstreamProtocolError) as neither:
        await transport({}, {}, lambda inbound: None)
    assert "speaks neither MCP HTTP transport (upstream.transport = auto)" in neither.value.message
    assert "answered initialize with HTTP 405" in neither.value.message
    assert "answered SSE stream with HTTP 404" in neither.value.message


async def test_a_remembered_transport_that_fails_is_detected_again(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    transport = HttpTransport(client, settings(url))
    await (await transport({}, {}, lambda inbound: None)).aclose()
    fake.get_status = 503
    with pytest.raises(UpstreamProtocolError):
        await transport({}, {}, lambda inbound: None)
    assert transport.name == NOT_DETECTED
    fake.get_status = 200
    await (await transport({}, {}, lambda inbound: None)).aclose()
    assert transport.name == "sse"


async def test_an_explicit_transport_is_never_detected(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    """`upstream.transport = "streamable-http"` against an SSE server fails plainly (no
    fallback)."""
    transport = HttpTransport(client, settings(url, transport="streamable-http"))
    assert (transport.name, transport.streams_per_call) == ("streamable-http", True)
    with pytest.raises(UpstreamRefused) as refused:
        await transport({}, {}, lambda inbound: None)
    assert refused.value.status == 405 and not fake.sessions


async def test_an_explicit_transport_refused_otherwise_is_told_as_it_is(
    fake: FakeSse, url: str, client: aiohttp.ClientSession
) -> None:
    """A refusal that says nothing of the path (400) is raised as it came, and what the client is
    told of it is built at once (it is not its own cause: a loop there would hang the reply)."""
    fake.get_status = 400
    transport = HttpTransport(client, settings(url, transport="sse"))
    with pytest.raises(UpstreamRefused) as refused:
        await transport({}, {}, lambda inbound: None)
    assert refused.value.status == 400 and refused.value.likely is None
    assert refused.value.__cause__ is not refused.value
    assert reported_error(refused.value)["data"]["reason"] == "it answered SSE stream with HTTP 400"


async def _status(status: int) -> web.Response:
    return web.Response(status=status)


@pytest.mark.parametrize(("revision", "delivered"), [("2025-03-26", 2), ("2025-11-25", 0)])
async def test_a_batch_on_the_stream_is_split_only_where_the_revision_has_batches(
    aiohttp_server: ServerFactory, client: aiohttp.ClientSession, revision: str, delivered: int
) -> None:
    """At 2025-03-26 each element of an array event is handled in order as if it came alone (an
    element that is not a message is skipped like a lone one); in a revision without batches the
    array is one invalid message, ignored."""
    fake = FakeSse(protocol_version=revision)
    one = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "one"},
    }
    two = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "two"},
    }
    batch: list[Any] = [one, {"not": "a message"}, two]

    async def burst(session: FakeSseSession, request_id: Any) -> dict[str, Any]:
        session.send(batch)
        return {"content": []}

    fake.tools["burst"] = burst
    url = str((await aiohttp_server(fake.app)).make_url("/sse"))
    seen: list[Inbound] = []
    async with asyncio.timeout(T):
        session = await open_session(client, url, seen)
        assert await session.start(
            "tools/call", {"name": "burst"}, headers={}, on_inbound=None
        ).result() == {"content": []}
    assert [inbound.message for inbound in seen] == [one, two][:delivered]
    assert session.revision.version == revision and session.is_alive
    await session.aclose()


async def test_garbage_on_the_stream_is_skipped_as_over_streamable_http(
    aiohttp_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    """The same rule as test_upstream_http.py's: an event that is not JSON, or not a JSON-RPC
    message, is logged and skipped; the call's response after it completes the call."""
    fake = FakeSse()

    async def garbage(session: FakeSseSession, request_id: Any) -> dict[str, Any]:
        session.outbox.put_nowait(encode_event("this is not json", event="message"))
        session.send({"jsonrpc": "1.0", "method": "x"})  # type: ignore[dict-item]
        return {"content": [{"type": "text", "text": "after the garbage"}]}

    fake.tools["garbage"] = garbage
    url = str((await aiohttp_server(fake.app)).make_url("/sse"))
    async with asyncio.timeout(T):
        session = await open_session(client, url, [])
        with capture_logs() as logs:
            result = await session.start(
                "tools/call", {"name": "garbage"}, headers={}, on_inbound=None
            ).result()
    assert result == {"content": [{"type": "text", "text": "after the garbage"}]}
    assert [entry["reason"] for entry in logs if "reason" in entry] == [
        "sent a message that is not JSON",
        "sent something that is not a JSON-RPC 2.0 message object",
    ]
    assert session.is_alive
    await session.aclose()
