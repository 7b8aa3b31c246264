"""A JSON answer written in many chunks, without a length, as a server that streams its body does:
what a reader that takes only the first chunk gets wrong (issue 40, defect 3)."""

from __future__ import annotations

from aiohttp import web

CHUNK_BYTES = 4096


async def chunked_json(request: web.Request, body: bytes) -> web.StreamResponse:
    """`body` as `application/json`, chunked, `CHUNK_BYTES` at a time."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    for start in range(0, len(body), CHUNK_BYTES):
        await response.write(body[start : start + CHUNK_BYTES])
    await response.write_eof()
    return response
