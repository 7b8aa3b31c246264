"""What the legacy relay does with answer bodies, in process: content coding is negotiated between
the client and the upstream (the bridge relays the bytes and their `Content-Encoding` as they
come)."""

from __future__ import annotations

import json

from aiohttp import web
from aiohttp.test_utils import TestServer
from integration.harness import LegacyPoster
from safety_harness import inprocess_bridge

from config.settings import Settings

INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}


async def test_content_coding_is_the_clients_and_the_upstreams_to_agree() -> None:
    """The upstream compresses only for a client that accepts it; either way the client reads the
    same answer. Before, the bridge asked for gzip itself and relayed compressed bytes without
    their `Content-Encoding`."""
    seen: list[str | None] = []

    async def upstream(request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)
        message = await request.json()
        if message.get("method") != "initialize":
            error = {"code": -32601, "message": "Method not found"}
            return web.json_response({"jsonrpc": "2.0", "id": message.get("id"), "error": error})
        seen.append(request.headers.get("Accept-Encoding"))
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "serverInfo": {"name": "zipped", "version": "1" * 4096},
        }
        response = web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})
        response.headers["Mcp-Session-Id"] = f"s{len(seen)}"
        response.enable_compression()
        return response

    app = web.Application()
    app.router.add_route("*", "/mcp", upstream)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        settings = Settings.model_validate({"upstream": {"url": str(server.make_url("/mcp"))}})
        async with inprocess_bridge(settings) as bridge:
            replies = []
            for coding in ("gzip", "identity"):
                poster = LegacyPoster(bridge.http, bridge.url, headers={"Accept-Encoding": coding})
                replies.append(await poster.post("initialize", INITIALIZE))
    finally:
        await server.close()
    assert seen == ["gzip", "identity"]
    assert [reply.headers.get("content-encoding") for reply in replies] == ["gzip", None]
    for reply in replies:
        assert reply.status == 200
        assert json.loads(reply.text)["result"]["serverInfo"]["name"] == "zipped"
