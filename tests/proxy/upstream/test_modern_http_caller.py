"""The reverse direction's HTTP upstream client (`proxy/upstream/modern/http_caller.py`) against
a scripted (and hostile) 2026-07-28 server: the headers it sends, SSE notifications as they come,
JSON answers read whole however they are cut, and a precise -32603 for an answer without a reply,
one past `upstream.max_line_bytes` (in bounded memory), a redirect to another origin (which gets
nothing), or no server at all; each as every path tells a client of an upstream failure
(proxy/common/faults.py: a correlation id into the log, and the reason where there is one)."""

from __future__ import annotations

import json
import socket
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from chunked import chunked_json

from config.settings import UpstreamSettings
from proxy.upstream.modern.http_caller import ModernHttpCaller
from translators.wire.errors import BRIDGE_MARKER

Serve = Callable[[web.Request], Awaitable[web.StreamResponse]]
CALL = {
    "jsonrpc": "2.0",
    "id": "c-1",
    "method": "tools/call",
    "params": {"name": "wëather", "arguments": {}, "_meta": {"progressToken": 1}},
}


async def call_through(
    aiohttp_server: Callable[..., Awaitable[TestServer]], serve: Serve, **settings: Any
) -> tuple[Any, list[Any], list[Any]]:
    """The reply of one call to a server answering with `serve` (the client's `settings` added),
    the notifications seen and the headers the server received."""
    seen_headers: list[Any] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen_headers.append(dict(request.headers))
        return await serve(request)

    app = web.Application()
    app.router.add_post("/mcp", handler)
    server = await aiohttp_server(app)
    caller = ModernHttpCaller(UpstreamSettings(url=str(server.make_url("/mcp")), **settings), 5.0)
    notes: list[Any] = []
    try:
        reply = await caller.call(CALL, notes.append, None, {"Mcp-Param-Region": "eu"})
    finally:
        await caller.aclose()
    return reply, notes, seen_headers


def reported(error: dict[str, Any], message: str, **data: Any) -> bool:
    """Whether `error` is the -32603 `message` with `data` besides the marker and a correlation
    id."""
    shown = {"source": BRIDGE_MARKER, "correlationId": error["data"]["correlationId"], **data}
    return error == {"code": -32603, "message": message, "data": shown}


async def sse(request: web.Request, *events: Any) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        await response.write(f"event: message\ndata: {data}\n\n".encode())
    return response


async def test_headers_and_streamed_notifications(aiohttp_server: Any) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}

    async def serve(request: web.Request) -> web.StreamResponse:
        sent = await request.json()
        result = {"jsonrpc": "2.0", "id": sent["id"], "result": {"resultType": "complete"}}
        return await sse(request, progress, result)

    reply, notes, headers = await call_through(aiohttp_server, serve)
    assert reply == {"jsonrpc": "2.0", "id": "c-1", "result": {"resultType": "complete"}}
    assert notes == [progress]
    assert {k: headers[0][k] for k in ("MCP-Protocol-Version", "Mcp-Method", "Mcp-Name")} == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "=?base64?d8OrYXRoZXI=?=",
    }
    assert headers[0]["Mcp-Param-Region"] == "eu"


async def test_an_answer_without_a_reply(aiohttp_server: Any) -> None:
    async def serve(request: web.Request) -> web.StreamResponse:
        return web.Response(text="<html>not json</html>", content_type="text/html")

    reply, _, _ = await call_through(aiohttp_server, serve)
    assert reported(reply["error"], "The upstream server answered HTTP 200 without a reply")


async def test_an_oversized_event_is_refused(aiohttp_server: Any) -> None:
    async def serve(request: web.Request) -> web.StreamResponse:
        return await sse(request, json.dumps({"padding": "x" * 4096}))

    reply, notes, _ = await call_through(aiohttp_server, serve, max_line_bytes=1024)
    assert notes == []
    assert reported(
        reply["error"],
        "The upstream server's answer is larger than the limit of 1024 bytes",
        limit="upstream.max_line_bytes",
    )


async def test_a_large_json_answer_is_read_whole(aiohttp_server: Any) -> None:
    """Issue 40, defect 3: a 1 MB JSON result in many chunks arrives whole (only the first chunk
    was read: "-32603 The upstream server answered HTTP 200 without a reply")."""
    text = "x" * 1_048_576
    result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}

    async def serve(request: web.Request) -> web.StreamResponse:
        sent = await request.json()
        body = json.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": result}).encode()
        return await chunked_json(request, body)

    reply, _, _ = await call_through(aiohttp_server, serve)
    assert reply == {"jsonrpc": "2.0", "id": "c-1", "result": result}


async def test_an_answer_past_the_cap_is_refused_in_bounded_memory(aiohttp_server: Any) -> None:
    """A JSON answer that never ends is read up to `upstream.max_line_bytes` and no further: a
    precise error, and the reader's memory stays within about twice the cap."""
    cap = 4 * 1_048_576
    block = b"x" * 65_536
    written = 0

    async def serve(request: web.Request) -> web.StreamResponse:
        nonlocal written
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"jsonrpc": "2.0", "id": "c-1", "result": {"text": "')
        while written < 64 * cap:  # 256 MiB, unless the client stops reading first
            await response.write(block)
            written += len(block)
        return response

    tracemalloc.start()
    try:
        reply, _, _ = await call_through(aiohttp_server, serve, max_line_bytes=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reported(
        reply["error"],
        f"The upstream server's answer is larger than the limit of {cap} bytes",
        limit="upstream.max_line_bytes",
    )
    assert peak < 3 * cap, peak
    assert written < 8 * cap  # the client stopped reading: the rest was never sent


async def test_a_redirect_to_another_origin_gets_nothing_there(aiohttp_server: Any) -> None:
    """Issue 40, defect 2: a 307 to another origin is not followed, so the other origin never sees
    the call nor `upstream.headers`; the reply names the reason, not the URL."""
    seen_elsewhere: list[Any] = []

    async def elsewhere(request: web.Request) -> web.StreamResponse:
        seen_elsewhere.append(dict(request.headers))
        return web.json_response({"jsonrpc": "2.0", "id": "c-1", "result": {}})

    other_app = web.Application()
    other_app.router.add_route("*", "/{path:.*}", elsewhere)
    other = await aiohttp_server(other_app)

    async def serve(request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect(str(other.make_url("/mcp")))

    reply, _, headers = await call_through(aiohttp_server, serve, headers={"X-API-Key": "k-secret"})
    assert headers[0]["X-API-Key"] == "k-secret"  # the configured upstream gets it
    assert seen_elsewhere == []
    assert reported(
        reply["error"],
        "The upstream server redirected the request to another origin, which the bridge does not"
        " follow",
    )


async def test_a_redirect_within_the_origin_is_followed(aiohttp_server: Any) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/mcp":
            raise web.HTTPPermanentRedirect("/mcp/")
        sent = await request.json()  # the body came again with the 308
        return web.json_response({"jsonrpc": "2.0", "id": sent["id"], "result": {"at": "/mcp/"}})

    app = web.Application()
    app.router.add_post("/mcp", handler)
    app.router.add_post("/mcp/", handler)
    server = await aiohttp_server(app)
    caller = ModernHttpCaller(UpstreamSettings(url=str(server.make_url("/mcp"))), 5.0)
    try:
        reply = await caller.call(CALL, lambda _: None, None)
    finally:
        await caller.aclose()
    assert reply == {"jsonrpc": "2.0", "id": "c-1", "result": {"at": "/mcp/"}}


async def test_no_server_at_all() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    caller = ModernHttpCaller(UpstreamSettings(url=f"http://127.0.0.1:{port}/mcp"), 5.0)
    try:
        reply = await caller.call(CALL, lambda _: None, None)
    finally:
        await caller.aclose()
    assert (reply["jsonrpc"], reply["id"]) == ("2.0", "c-1")
    assert reported(
        reply["error"],
        "The upstream server is unavailable",
        reason="cannot connect: connection refused",
    )
    assert str(port) not in json.dumps(reply)


async def test_one_principals_cookie_never_goes_with_anothers_request(aiohttp_server: Any) -> None:
    """The client is shared by every principal: a cookie the server set while answering Alice is
    not sent with Bob's request (aiohttp's default jar would send it to the same host name)."""
    cookies_seen: list[str | None] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        cookies_seen.append(request.headers.get("Cookie"))
        sent = await request.json()
        result = {"jsonrpc": "2.0", "id": sent["id"], "result": {"resultType": "complete"}}
        response = web.json_response(result)
        response.set_cookie("who", request.headers["Authorization"].split()[-1])
        return response

    app = web.Application()
    app.router.add_post("/mcp", handler)
    server = await aiohttp_server(app, host="localhost")  # a jar keeps no cookies for an address
    caller = ModernHttpCaller(UpstreamSettings(url=f"http://localhost:{server.port}/mcp"), 5.0)
    try:
        for who in ("alice", "bob"):
            reply = await caller.call(CALL, lambda note: None, f"Bearer {who}")
            assert reply["result"] == {"resultType": "complete"}
    finally:
        await caller.aclose()
    assert cookies_seen == [None, None]
