"""The front's header views (proxy/http_front/endpoint.py): what aiohttp's parser hands over, and
why the folded view of a request without a repeated name is its lower-cased view."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.http_front.endpoint import folded_headers, lower_headers
from translators.protocol.request_validation import fold_headers


async def _views(raw_head: bytes) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(lower_headers, folded_headers, fold_headers) of one request sent as raw bytes."""
    seen: list[tuple[dict[str, str], dict[str, str], dict[str, str]]] = []

    async def handle(request: web.Request) -> web.Response:
        lowered = lower_headers(request)
        seen.append(
            (lowered, folded_headers(request, lowered), fold_headers(request.headers.items()))
        )
        return web.Response()

    app = web.Application()
    app.router.add_get("/", handle)
    async with TestServer(app) as server:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(raw_head)
        await reader.read()
        writer.close()
    return seen[0]


async def test_aiohttp_trims_values_so_the_folded_view_is_the_lowered_one() -> None:
    lowered, folded, reference = await _views(
        b"GET / HTTP/1.1\r\nHost: x\r\nMcp-Method:  \t tools/call \t \r\n"
        b"MCP-Protocol-Version:\t2026-07-28\r\nConnection: close\r\n\r\n"
    )
    assert lowered["mcp-method"] == "tools/call"
    assert lowered["mcp-protocol-version"] == "2026-07-28"
    assert folded is lowered
    assert folded == reference


async def test_a_repeated_name_is_folded_apart_from_the_first_line_view() -> None:
    lowered, folded, reference = await _views(
        b"GET / HTTP/1.1\r\nHost: x\r\nMcp-Param-A: 1\r\nmcp-param-a: 2\r\n"
        b"Connection: close\r\n\r\n"
    )
    assert lowered["mcp-param-a"] == "1"
    assert folded["mcp-param-a"] == "1, 2"
    assert folded == reference
