#!/usr/bin/env python3
"""A bare aiohttp HTTP relay that streams replies: the floor of one extra hop for a legacy push
round trip (the push arrives on the call's open SSE stream, so a relay that reads whole replies
cannot carry it).

Like bench/servers/relay.py, but each reply's body is forwarded chunk by chunk as it arrives. No
parsing, no logging, no translation: the MRTR row's floor (bench/README.md, "mrtr").

    python bench/servers/stream_relay.py --upstream http://127.0.0.1:8931/mcp --port 8932
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from typing import Final

import aiohttp
from aiohttp import web

FORWARDED: Final = (
    "Content-Type",
    "Accept",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Last-Event-ID",
)
RETURNED: Final = ("Mcp-Session-Id", "Content-Type")
CLIENT_KEY: Final = web.AppKey("client", aiohttp.ClientSession)
UPSTREAM_KEY: Final = web.AppKey("upstream", str)


async def relay(request: web.Request) -> web.StreamResponse:
    headers = {name: request.headers[name] for name in FORWARDED if name in request.headers}
    body = await request.read()
    client = request.app[CLIENT_KEY]
    async with client.request(
        request.method, request.app[UPSTREAM_KEY], data=body, headers=headers
    ) as upstream:
        returned = {name: upstream.headers[name] for name in RETURNED if name in upstream.headers}
        response = web.StreamResponse(status=upstream.status, headers=returned)
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def _client(app: web.Application) -> AsyncIterator[None]:
    app[CLIENT_KEY] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    yield
    await app[CLIENT_KEY].close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    app = web.Application()
    app[UPSTREAM_KEY] = args.upstream
    app.cleanup_ctx.append(_client)
    app.router.add_route("*", "/mcp", relay)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
