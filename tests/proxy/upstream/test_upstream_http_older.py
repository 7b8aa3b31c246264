"""HttpUpstreamSession against behaviours of older legacy servers (`mcp` 1.8-1.12), on the fake
server: progress sent on the GET stream, and `POST /mcp` redirected to `/mcp/`."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web
from fake_legacy import FakeCall, FakeLegacy, text_result
from structlog.testing import capture_logs
from test_upstream_http import Inbox, ServerFactory, call_tool, open_session

from config.settings import UpstreamSettings
from proxy.upstream.transport import HttpTransport

PROGRESS = "notifications/progress"


async def test_progress_on_the_get_stream_reaches_the_call_with_that_token(
    aiohttp_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    """Progress on the GET stream goes to the in-flight call whose upstream token it names, not
    to on_unrelated; progress naming no call in flight stays unrelated."""
    release = asyncio.Event()

    async def work(call: FakeCall) -> dict[str, Any]:
        token = call.params["_meta"]["progressToken"]
        await call.notify(
            PROGRESS, {"progressToken": token, "progress": 1, "total": 2}, on_get=True
        )
        await call.notify(PROGRESS, {"progressToken": "nobody", "progress": 1}, on_get=True)
        await release.wait()
        return text_result("done")

    fake = FakeLegacy()
    fake.tools["work"] = work
    server = await aiohttp_server(fake.app)
    unrelated, first, second = Inbox(), Inbox(), Inbox()
    session = await open_session(client, str(server.make_url("/mcp")), unrelated)
    try:
        calls = [
            session.start(
                "tools/call",
                {"name": "work", "_meta": {"progressToken": token}},
                headers={},
                on_inbound=inbox,
            )
            for token, inbox in (("mrtr-1", first), ("mrtr-2", second))
        ]
        progress = {"mrtr-1": await first.next(), "mrtr-2": await second.next()}
        for token, call in zip(("mrtr-1", "mrtr-2"), calls, strict=True):
            assert progress[token].message["params"] == {
                "progressToken": token,
                "progress": 1,
                "total": 2,
            }
            assert progress[token].related_request_id == call.upstream_request_id
        strays = [await unrelated.next(), await unrelated.next()]
        assert [stray.message["params"]["progressToken"] for stray in strays] == [
            "nobody",
            "nobody",
        ]
        release.set()
        async with asyncio.timeout(5):
            assert [await call.result() for call in calls] == [text_result("done")] * 2
        assert (len(first.seen), len(second.seen)) == (1, 1)
    finally:
        await session.aclose()


def redirecting(fake: FakeLegacy, redirected: list[str]) -> web.Application:
    """Like FastMCP on mcp 1.8/1.9: `/mcp` answers 307 -> `/mcp/`, where `fake` serves."""

    async def redirect(request: web.Request) -> web.Response:
        redirected.append(request.method)
        raise web.HTTPTemporaryRedirect("/mcp/")

    app = web.Application()
    app.router.add_route("*", "/mcp", redirect)
    app.router.add_route("*", "/mcp/", fake._handle)
    app.on_shutdown.append(fake._shutdown)
    return app


async def test_a_307_to_the_slash_path_is_followed_once_then_remembered(
    aiohttp_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    """The body and method survive the redirect, and later requests go straight to /mcp/."""
    fake, redirected = FakeLegacy(), []

    async def echo(call: FakeCall) -> dict[str, Any]:
        return text_result(str(call.arguments["text"]))

    fake.tools["echo"] = echo
    server = await aiohttp_server(redirecting(fake, redirected))
    with capture_logs() as logs:
        session = await open_session(client, str(server.make_url("/mcp")))
        try:
            echoed = [await call_tool(session, "echo", text=text) for text in ("a", "b")]
        finally:
            await session.aclose()
    assert echoed == [text_result("a"), text_result("b")]
    assert redirected == ["POST"]
    assert fake.rpc_methods() == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "tools/call",
    ]
    assert fake.deleted and [verb for verb, _, _ in fake.requests].count("GET") >= 1
    (moved,) = [entry for entry in logs if entry["event"] == "upstream_url_redirected"]
    assert moved["to"] == str(server.make_url("/mcp/"))


async def test_the_redirect_target_is_kept_for_later_sessions(
    aiohttp_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    """The transport opens later sessions at the redirect target: one redirect per bridge, not per
    session."""
    fake, redirected = FakeLegacy(), []
    server = await aiohttp_server(redirecting(fake, redirected))
    settings = UpstreamSettings(
        url=str(server.make_url("/mcp")),
        transport="streamable-http",
        init_timeout_s=2.0,
        connect_timeout_s=1.0,
    )
    transport = HttpTransport(client, settings)
    sessions = [await transport({}, {}, Inbox()) for _ in range(2)]
    for session in sessions:
        await session.aclose()
    assert redirected == ["POST"]
    assert fake.rpc_methods().count("initialize") == 2 and len(fake.deleted) == 2
