"""The lean pieces a held call keeps for its whole life: `OutcomeCall`'s waiters and the HTTP
`Exchange` (proxy/upstream/call.py, proxy/upstream/http/channel.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from config.settings import UpstreamSettings
from proxy.upstream.call import OutcomeCall
from proxy.upstream.http import channel as channel_module
from proxy.upstream.http.channel import HttpChannel
from translators.wire.errors import UpstreamProtocolError, UpstreamUnavailable


async def _no_cancel(_call: Any, _reason: str) -> None:
    return None


async def test_a_cancelled_waiter_leaves_the_outcome_to_the_others() -> None:
    call = OutcomeCall(1, "tools/call", _no_cancel)
    first = asyncio.create_task(call.result())
    second = asyncio.create_task(call.result())
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    assert not call.is_done
    call.resolve({"jsonrpc": "2.0", "id": 1, "result": {"ok": True}})
    call.fail(UpstreamUnavailable("too late"))  # the first outcome stays
    assert await second == {"ok": True}
    assert await call.result() == {"ok": True}
    assert first.cancelled() and call.is_done


async def test_a_failed_outcome_reaches_every_waiter() -> None:
    call = OutcomeCall(1, "tools/call", _no_cancel)
    waiters = [asyncio.create_task(call.result()) for _ in range(3)]
    await asyncio.sleep(0)
    call.fail(UpstreamUnavailable("gone"))
    for outcome in await asyncio.gather(*waiters, return_exceptions=True):
        assert isinstance(outcome, UpstreamUnavailable)


@pytest.fixture
async def channel() -> Any:
    async def cut_short(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b"data: {}\n\n")
        assert request.transport is not None
        request.transport.close()  # the body ends mid-stream
        return response

    app = web.Application()
    app.router.add_post("/mcp", cut_short)
    async with TestServer(app) as server, aiohttp.ClientSession() as client:
        url = str(server.make_url("/mcp"))
        yield HttpChannel(client, url, headers={}, settings=UpstreamSettings(url=url))


async def test_an_exchange_maps_errors_raised_in_its_block(channel: HttpChannel) -> None:
    with pytest.raises(UpstreamUnavailable, match="closed the connection"):
        async with channel.exchange("POST", "tools/call", body={"jsonrpc": "2.0"}) as resp:
            await resp.read()
    with pytest.raises(UpstreamProtocolError, match=r"Upstream .*: bad stream \(tools/call\)"):
        async with channel.exchange("POST", "tools/call", body={"jsonrpc": "2.0"}) as resp:
            assert resp.status == 200
            raise UpstreamProtocolError("bad stream")


async def test_a_watched_future_is_resolved_by_the_outcome_or_at_once_when_done() -> None:
    """`watch` (the plain path's one future per call): resolved when the outcome is set, at once
    for a finished call, and a future already resolved by someone else is left alone."""
    loop = asyncio.get_running_loop()
    call = OutcomeCall(1, "tools/call", _no_cancel)
    watched, woken_first = loop.create_future(), loop.create_future()
    call.watch(watched)
    call.watch(woken_first)
    woken_first.set_result(None)  # the plain path's first push woke it before the outcome
    assert not watched.done()
    call.fail(UpstreamUnavailable("gone"))
    assert watched.done() and watched.result() is None
    late = loop.create_future()
    call.watch(late)
    assert late.done()
    with pytest.raises(UpstreamUnavailable):
        await call.result()


@pytest.fixture
async def sse_server() -> Any:
    """POST /mcp/end answers one event and ends the stream a moment later; POST /mcp/open answers
    one event and keeps the stream open until the test ends. Yields a channel to each and the
    server side of every connection a request came on."""
    hold = asyncio.Event()
    transports: list[object] = []

    async def answer(request: web.Request) -> web.StreamResponse:
        transports.append(request.transport)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')
        if request.path.endswith("/open"):
            await hold.wait()
        else:
            await asyncio.sleep(0.02)  # the end comes after the event, as from a busy server
        return response

    app = web.Application()
    app.router.add_post("/mcp/end", answer)
    app.router.add_post("/mcp/open", answer)
    async with TestServer(app) as server, aiohttp.ClientSession() as client:
        channels = {
            path: HttpChannel(client, url, headers={}, settings=UpstreamSettings(url=url))
            for path in ("end", "open")
            for url in (str(server.make_url(f"/mcp/{path}")),)
        }
        yield channels, transports
    hold.set()


async def test_a_let_go_answer_gives_its_connection_back_at_the_stream_end(
    sse_server: Any,
) -> None:
    """An SSE answer let go after its response event, before its stream ended: nothing waits for
    the end, and the connection goes back to the pool when it arrives (the next request reuses
    it)."""
    channels, transports = sse_server
    for _ in range(2):
        exchange = channels["end"].exchange("POST", "tools/call", body={"jsonrpc": "2.0"})
        async with exchange as resp:
            await resp.content.readuntil(b"\n\n")
            assert not resp.content.is_eof()  # the end is 20 ms away
            exchange.let_go()
        assert not resp.closed  # let go, not released: closing now would drop the connection
        async with asyncio.timeout(5):
            while not resp.closed:  # aiohttp releases it at the stream's end
                await asyncio.sleep(0.01)
    assert len(transports) == 2 and transports[0] is transports[1]  # one kept-alive connection


async def test_a_let_go_answer_whose_stream_stays_open_is_closed_after_the_timeout(
    sse_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers and keeps the stream open: the let-go response is closed after
    `LET_GO_TIMEOUT_S` (its connection is not reused); the caller never waited for it."""
    monkeypatch.setattr(channel_module, "LET_GO_TIMEOUT_S", 0.05)
    channels, transports = sse_server
    exchange = channels["open"].exchange("POST", "tools/call", body={"jsonrpc": "2.0"})
    async with exchange as resp:
        await resp.content.readuntil(b"\n\n")
        exchange.let_go()
    assert not resp.closed
    async with asyncio.timeout(5):  # a bound that cannot flake: the let-go's is 0.05 s
        while not resp.closed:
            await asyncio.sleep(0.01)
    assert resp.connection is None
    async with channels["open"].exchange("POST", "tools/call", body={"jsonrpc": "2.0"}) as again:
        await again.content.readuntil(b"\n\n")
    assert len(transports) == 2 and transports[0] is not transports[1]
