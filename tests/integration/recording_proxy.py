"""An in-process HTTP proxy that records every POST body it forwards (for "unchanged"
assertions)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from .harness import free_port

FORWARDED_REQUEST_HEADERS = (
    "Accept",
    "Content-Type",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Authorization",
    "Last-Event-ID",
    "Mcp-Session-Id",
)
FORWARDED_RESPONSE_HEADERS = ("Content-Type", "Mcp-Session-Id", "Cache-Control", "WWW-Authenticate")


@dataclass
class Recorded:
    method: str
    body: bytes
    headers: dict[str, str]


@dataclass
class RecordingProxy:
    """Forwards to `target` and records each request (method, body bytes, MCP headers)."""

    target: str
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {
            name: request.headers[name]
            for name in FORWARDED_REQUEST_HEADERS
            if name in request.headers
        }
        headers.update(
            {k: v for k, v in request.headers.items() if k.lower().startswith("mcp-param-")}
        )
        self.requests.append(Recorded(request.method, body, headers))
        async with (
            aiohttp.ClientSession() as http,
            http.request(
                request.method, self.target, data=body or None, headers=headers
            ) as upstream,
        ):
            out = {
                k: upstream.headers[k] for k in FORWARDED_RESPONSE_HEADERS if k in upstream.headers
            }
            response = web.StreamResponse(status=upstream.status, headers=out)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


@asynccontextmanager
async def recording_proxy(target: str) -> AsyncIterator[RecordingProxy]:
    proxy = RecordingProxy(target, port=free_port())
    app = web.Application()
    app.router.add_route("*", "/mcp", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", proxy.port).start()
    try:
        yield proxy
    finally:
        await runner.cleanup()
