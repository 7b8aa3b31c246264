"""A JSON reply lets go of its body once written (proxy/common/http_replies.py): aiohttp keeps a
keep-alive connection's last response until its next request, which for a client whose call is
held is the retry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.common.http_replies import Exchange, json_reply

ServerFactory = Callable[..., Awaitable[TestServer]]
MESSAGE = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "x": "é"}}


async def test_a_sent_reply_keeps_no_body(
    aiohttp_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    sent: list[web.Response] = []

    async def handle(request: web.Request) -> web.Response:
        reply = json_reply(MESSAGE, 200, Exchange())
        sent.append(reply)
        return reply

    app = web.Application()
    app.router.add_post("/mcp", handle)
    server = await aiohttp_server(app)
    async with client.post(server.make_url("/mcp"), json={}) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert await response.json() == MESSAGE
    [reply] = sent
    assert reply.body is None
