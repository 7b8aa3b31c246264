#!/usr/bin/env python3
"""A recording HTTP relay for the integration tests: `127.0.0.1:<port>` forwards every request to
`--upstream` (same path and query, same headers, `Host` kept so redirects point back here) and
streams the answer back unchanged, while it appends every JSON-RPC message that passes to `--record`
(JSON lines; run it with `.venv`, it needs aiohttp).

A record is `{"seq", "dir", "xid", "session", "version", "http", "path", "status", "message"}`:
`xid` numbers the HTTP exchange (a request and its answer share it), `version` is the request's
`MCP-Protocol-Version` header (or null); `dir` is `"sent"` for a message in a request body (client
to server) and `"received"` for one in the answer (a JSON body, or each `data:` of an SSE stream, as
it streams); `session` is the `Mcp-Session-Id` of the exchange, or the `session_id` (Python SDK) /
`sessionId` (TypeScript SDK) query parameter of the HTTP+SSE transport (its `endpoint` event names
it); `message` is the parsed JSON (an object, or a list for a batch), or `{"raw": text}` when a body
or `data:` is not JSON (the HTTP+SSE `endpoint` event).

Put between the bridge and a legacy server it shows what the bridge sends upstream; put between a
client and the bridge it shows what the bridge answers.

Usage:
    python tests/peers/recording_relay.py --port 9000 --upstream http://127.0.0.1:8931 --record FILE
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "upgrade",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-authenticate",
    }
)
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


class Recorder:
    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._seq = itertools.count(1)

    def write(self, direction: str, exchange: dict[str, Any], payload: bytes | str) -> None:
        text = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else payload
        if not text.strip():
            return
        try:
            message: Any = json.loads(text)
        except ValueError:
            message = {"raw": text}
        record = {"seq": next(self._seq), "dir": direction, **exchange, "message": message}
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()


class SseTap:
    """Splits an SSE byte stream into events and records each event's data."""

    def __init__(self, recorder: Recorder, exchange: dict[str, Any]) -> None:
        self._recorder = recorder
        self._exchange = exchange
        self._buffer = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if not line:
                self._flush()
            elif line.startswith("data:"):
                self._data.append(line[5:].removeprefix(" "))

    def _flush(self) -> None:
        if not self._data:
            return
        data = "\n".join(self._data)
        self._data = []
        query = parse_qs(urlsplit(data).query) if data.startswith("/") else {}
        session = query.get("session_id") or query.get("sessionId")
        if session:
            self._exchange["session"] = session[0]
        self._recorder.write("received", self._exchange, data)


def _session_of(request: web.BaseRequest) -> str | None:
    return (
        request.headers.get(SESSION_HEADER)
        or request.query.get("session_id")
        or request.query.get("sessionId")
    )


def make_app(upstream: str, recorder: Recorder) -> web.Application:
    exchanges = itertools.count(1)

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        exchange: dict[str, Any] = {
            "xid": next(exchanges),
            "session": _session_of(request),
            "version": request.headers.get(VERSION_HEADER),
            "http": request.method,
            "path": request.path_qs,
        }
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        client: aiohttp.ClientSession = request.app["client"]
        async with client.request(
            request.method,
            upstream + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as upstream_resp:
            exchange = {**exchange, "status": upstream_resp.status}
            exchange["session"] = upstream_resp.headers.get(SESSION_HEADER) or exchange["session"]
            # once the answer names the session an initialize opened
            recorder.write("sent", exchange, body)
            response = web.StreamResponse(status=upstream_resp.status)
            for name, value in upstream_resp.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    response.headers.add(name, value)
            await response.prepare(request)
            if upstream_resp.content_type == "text/event-stream":
                tap = SseTap(recorder, exchange)
                async for chunk in upstream_resp.content.iter_any():
                    tap.feed(chunk)
                    await response.write(chunk)
            else:
                payload = await upstream_resp.read()
                recorder.write("received", exchange, payload)
                await response.write(payload)
            await response.write_eof()
            return response

    async def open_client(app: web.Application) -> Any:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        app["client"] = aiohttp.ClientSession(
            timeout=timeout, auto_decompress=False, skip_auto_headers=["User-Agent"]
        )
        yield
        await app["client"].close()

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.cleanup_ctx.append(open_client)
    app.router.add_route("*", "/{tail:.*}", relay)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True, help="listen on 127.0.0.1:PORT")
    parser.add_argument("--upstream", required=True, help="scheme://host:port to forward to")
    parser.add_argument("--record", type=Path, required=True, help="append JSON lines here")
    args = parser.parse_args(argv)
    with args.record.open("a", encoding="utf-8") as out:
        app = make_app(args.upstream.rstrip("/"), Recorder(out))
        web.run_app(
            app,
            host="127.0.0.1",
            port=args.port,
            print=None,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=1,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
