"""An in-process HTTP proxy that records every request it forwards (for "unchanged" assertions),
and may answer some of them with a redirect instead (`redirect_to`, `redirects`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
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
    "X-API-Key",  # an `upstream.headers` secret, where a test sets one
)
FORWARDED_RESPONSE_HEADERS = ("Content-Type", "Mcp-Session-Id", "Cache-Control", "WWW-Authenticate")


@dataclass
class Recorded:
    method: str
    body: bytes
    headers: dict[str, str]


# Whether a request (HTTP method, path, body) is answered with a redirect instead of forwarded.
Redirects = Callable[[str, str, bytes], bool]


@dataclass
class RecordingProxy:
    """Forwards every request, whatever its path, to `target` and records it (method, body bytes,
    MCP headers); a request `redirects` names is answered `redirect_status` to `redirect_to` instead
    (and recorded in `redirected`)."""

    target: str
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0
    redirect_to: str | None = None
    redirects: Redirects = lambda method, path, body: False
    redirect_status: int = 307
    redirected: list[Recorded] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if self.redirect_to is not None and self.redirects(request.method, request.path, body):
            self.redirected.append(Recorded(request.method, body, dict(request.headers)))
            return web.Response(status=self.redirect_status, headers={"Location": self.redirect_to})
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
async def recording_proxy(
    target: str,
    redirect_to: str | None = None,
    redirects: Redirects = lambda method, path, body: True,
    redirect_status: int = 307,
) -> AsyncIterator[RecordingProxy]:
    """A `RecordingProxy` listening on a free port for as long as the block runs."""
    proxy = RecordingProxy(
        target,
        port=free_port(),
        redirect_to=redirect_to,
        redirects=redirects,
        redirect_status=redirect_status,
    )
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", proxy.handle)
    # a stream still relayed when the block ends (a legacy session's GET stream) is cut at once
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", proxy.port).start()
    try:
        yield proxy
    finally:
        await runner.cleanup()
