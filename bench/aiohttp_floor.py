#!/usr/bin/env python3
"""Calibration for the held-call memory figure: what aiohttp alone costs for the connections a held
call keeps open, with no bridge.

A held call keeps its POST stream open and being read (aiohttp client; on a session of its own,
`upstream.share_attributed_calls = false`, the session's GET stream too) and the modern client's
idle keep-alive connection (aiohttp server). This starts a bare aiohttp SSE server (one event,
then silence, like a held call's streams), and measures in child processes, by VmRSS after minus
before:

- client: per open SSE response read by a task (`async for line in resp.content`), half GET and
  half POST, with the headers a legacy session sends;
- server: per idle keep-alive connection after one JSON POST.

    .venv/bin/python bench/aiohttp_floor.py          # prints JSON: KB per stream / per connection
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Final

import aiohttp
from aiohttp import web

COUNT: Final = 2000
SESSION: Final = "0123456789abcdef0123456789abcdef"
PUSH: Final = (
    b'event: message\ndata: {"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":'
    b'{"message":"Pick one","requestedSchema":{"type":"object","properties":{"choice":'
    b'{"type":"string"}},"required":["choice"]}}}\n\n'
)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _lift_open_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def _serve(port: int) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        if request.headers.get("Accept") == "application/json":
            return web.json_response({"jsonrpc": "2.0", "id": 1, "result": {}})
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Mcp-Session-Id": SESSION}
        )
        await response.prepare(request)
        await response.write(PUSH)
        await asyncio.sleep(3600)
        return response

    async def rss(_request: web.Request) -> web.Response:
        gc.collect()
        return web.Response(text=str(_rss_kib()))

    app = web.Application()
    app.router.add_route("*", "/mcp", stream)
    app.router.add_get("/rss", rss)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    print("listening", flush=True)
    await asyncio.sleep(3600)


async def _streams(url: str, count: int) -> float:
    """Client KB per open SSE response."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        opened = asyncio.Semaphore(0)

        async def one(index: int) -> None:
            method = "POST" if index % 2 else "GET"
            headers = {"Accept": "text/event-stream", "Mcp-Session-Id": SESSION}
            data = b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}' if index % 2 else None
            async with http.request(method, url, data=data, headers=headers) as resp:
                first = True
                async for line in resp.content:
                    if first and line == b"\n":
                        opened.release()
                        first = False

        tasks = [asyncio.create_task(one(index)) for index in range(20)]
        for _ in range(20):
            await opened.acquire()
        gc.collect()
        before = _rss_kib()
        tasks += [asyncio.create_task(one(index)) for index in range(count)]
        for _ in range(count):
            await opened.acquire()
        gc.collect()
        after = _rss_kib()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return (after - before) * 1024 / 1000 / count


async def _connections(url: str, rss_url: str, count: int) -> float:
    """Server KB per idle keep-alive connection."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def one(_index: int) -> None:
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            async with http.post(url, data=b'{"jsonrpc":"2.0"}', headers=headers) as resp:
                await resp.read()

        async def server_rss() -> int:
            async with aiohttp.ClientSession() as other, other.get(rss_url) as resp:
                return int(await resp.text())

        await asyncio.gather(*(one(index) for index in range(20)))
        before = await server_rss()
        await asyncio.gather(*(one(index) for index in range(count)))
        after = await server_rss()
    return (after - before) * 1024 / 1000 / count


def measure(count: int = COUNT) -> dict[str, float]:
    """Runs the server and each client in child processes; KB per stream and per connection."""
    from peers import free_port  # bench/ on the path when run from bench/

    figures: dict[str, float] = {}
    for key, role in (("client_kb_per_stream", "streams"), ("server_kb_per_idle_connection", "")):
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, __file__, "serve", str(port)], stdout=subprocess.PIPE
        )
        try:
            assert server.stdout is not None
            server.stdout.readline()
            mode = role or "connections"
            out = subprocess.run(
                [sys.executable, __file__, mode, str(port), str(count)],
                capture_output=True,
                check=True,
                text=True,
                timeout=300,
            )
            figures[key] = float(out.stdout.strip())
        finally:
            server.kill()
            server.wait()
    return figures


def main(argv: list[str]) -> int:
    _lift_open_files()
    if len(argv) >= 2:
        role, port = argv[0], int(argv[1])
        url = f"http://127.0.0.1:{port}/mcp"
        if role == "serve":
            asyncio.run(_serve(port))
        elif role == "streams":
            print(round(asyncio.run(_streams(url, int(argv[2]))), 2))
        else:
            rss_url = f"http://127.0.0.1:{port}/rss"
            print(round(asyncio.run(_connections(url, rss_url, int(argv[2]))), 2))
        return 0
    print(json.dumps(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
