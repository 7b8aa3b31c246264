"""One HTTP reply that may stream: what a request sends while it runs (pushes, progress, logs)
commits the reply to SSE; a request that sends nothing is answered as JSON (`SseSink`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from proxy.common.sse_replies import SSE_QUEUE_LIMIT, SseSink
from translators.wire.jsonrpc import JsonObject

Send = Callable[[JsonObject], None]


async def streamed(
    request: web.Request, keepalive_s: float, work: Callable[[Send], Awaitable[JsonObject]]
) -> tuple[web.StreamResponse | None, JsonObject]:
    """Run `work` with a `send` onto the reply's stream; the finished stream (None when nothing
    was sent: answer the response as JSON) and the JSON-RPC response. Closing the stream cancels
    the handler's task, and with it `work`."""
    owner = asyncio.current_task()
    assert owner is not None  # aiohttp runs every handler in a task
    sink = SseSink(request, owner, keepalive_s, SSE_QUEUE_LIMIT)
    writer = asyncio.create_task(sink.run())
    try:
        response = await work(sink.send)
    except BaseException:
        sink.close()
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        raise
    sink.finish(response)
    return await writer, response


__all__ = ["Send", "streamed"]
