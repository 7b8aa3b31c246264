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
