"""What every upstream session says of outliving its bridge process (proxy/upstream/base.py:
`session_id`, `sealable_cookies`, `forget_on_close`, `resume`, `UpstreamCall.first_event_id`), the
seam a legacy task's `UpstreamHandle` is built from (proxy/engine/legacy_tasks/restart.py): a
Streamable HTTP session hands a new process what reopens it and resumes a call's stream; stdio and
HTTP+SSE sessions, which end with their process or connection, hand over nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web
from fake_legacy import FakeCall, FakeLegacy, text_result
from fake_sse import FakeSse, FakeSseSession
from test_upstream_http import Inbox, ServerFactory, open_session
from test_upstream_sse import open_session as open_sse_session
from test_upstream_stdio import fixture_command, opened

from config.settings import UpstreamSettings
from proxy.upstream.base import UpstreamSession
from proxy.upstream.http.cookies import SessionCookies
from proxy.upstream.http.session import HttpUpstreamSession
from translators.protocol.eras import ELICIT

T = 10.0


async def test_an_http_session_hands_over_its_id_and_a_stream_another_session_resumes(
    aiohttp_server: ServerFactory,
) -> None:
    """The session's id, its cookies and a call's first event id are what a legacy task's id
    seals; a session that forgot its close sends no DELETE, and another session object adopting
    that id (with those cookies) reads the call's stream on from that event: the push asked before
    is asked again, and its answer there brings the call's result. Every request after
    `initialize`, in both, carries the cookie the server set."""
    fake = FakeLegacy()

    async def ask(call: FakeCall) -> dict[str, Any]:
        answer = await call.push(ELICIT, {"message": "Name?", "requestedSchema": {}})
        return text_result(answer["result"]["content"]["name"])

    async def pin(request: web.Request, response: web.StreamResponse) -> None:
        if "Mcp-Session-Id" not in request.headers:  # initialize: a load balancer's pin
            response.headers["Set-Cookie"] = "SRV=replica-b; Path=/"

    fake.tools["ask"] = ask
    fake.app.on_response_prepare.append(pin)
    url = str((await aiohttp_server(fake.app)).make_url("/mcp"))
    first_inbox, replayed = Inbox(), Inbox()
    async with asyncio.timeout(T), aiohttp.ClientSession() as client:
        session = await open_session(client, url)
        call = session.start("tools/call", {"name": "ask"}, headers={}, on_inbound=first_inbox)
        asked = await first_inbox.next()
        first_event = await call.first_event_id(T)
        (server_session,) = fake.all_sessions
        assert session.session_id == server_session.session_id
        assert first_event == f"s{call.upstream_request_id}:0"  # the stream's priming event
        sealed = session.sealable_cookies()
        assert sealed == [("SRV", "replica-b", "/", None)]
        session.forget_on_close()
        await session.aclose()
        assert fake.deleted == []

        adopted = HttpUpstreamSession.adopt(
            client,
            url,
            {},
            session_id=server_session.session_id,
            init_result=session.init_result,
            first_request_id=1000,
            headers={},
            on_unrelated=Inbox(),
            settings=UpstreamSettings(url=url, init_timeout_s=2.0),
            cookies=SessionCookies.restored(sealed),
        )
        resumed = adopted.resume(
            "tools/call",
            call.upstream_request_id,
            first_event,
            headers={},
            on_inbound=replayed,
        )
        assert resumed is not None
        again = await replayed.next()
        assert again.message == asked.message
        await adopted.respond(
            again.message["id"], result={"action": "accept", "content": {"name": "Ada"}}
        )
        assert await resumed.result() == text_result("Ada")
        await adopted.aclose()
        assert fake.deleted == [server_session.session_id]
    after_initialize = [headers.get("Cookie") for _, _, headers in fake.requests[1:]]
    assert after_initialize and set(after_initialize) == {"SRV=replica-b"}  # both processes'
    assert fake.requests[0][2].get("Cookie") is None


async def _hands_over_nothing(session: UpstreamSession, call_params: dict[str, Any]) -> None:
    assert session.session_id is None
    assert session.sealable_cookies() == []
    assert session.resume("tools/call", 1, "e-1", headers={}, on_inbound=None) is None
    session.forget_on_close()  # nothing to forget: closing ends the session anyway
    call = session.start("tools/call", call_params, headers={}, on_inbound=None)
    assert await call.first_event_id(T) is None  # at once: no stream of its own
    await call.result()


async def test_a_stdio_session_hands_over_nothing() -> None:
    async with asyncio.timeout(T * 3), opened(fixture_command()) as session:
        await _hands_over_nothing(session, {"name": "test_simple_text", "arguments": {}})
        assert session.is_alive


async def test_an_http_sse_session_hands_over_nothing(aiohttp_server: ServerFactory) -> None:
    fake = FakeSse()

    async def done(_session: FakeSseSession, _request_id: Any) -> dict[str, Any]:
        return text_result("done")

    fake.tools["done"] = done
    url = str((await aiohttp_server(fake.app)).make_url("/sse"))
    async with asyncio.timeout(T), aiohttp.ClientSession() as client:
        session = await open_sse_session(client, url)
        try:
            await _hands_over_nothing(session, {"name": "done", "arguments": {}})
        finally:
            await session.aclose()
