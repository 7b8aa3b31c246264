"""Stand-ins that take one stage out of a bridge process, for `bench/stages.py` (never imported by
the bridge itself). Each keeps the echo call's answer the same and removes only its stage's work;
the instructions a stubbed bridge saves per call are what that stage costs.

- `no_access_line`: the access line (`front_request_finished`) is not written.
- `no_engine`: the engine answers the echo call at once: what is left is the front (aiohttp's
  server, the checks, validation, the reply) and the access line.
- `raw_upstream`: the engine sends the call on one legacy session with a bare `aiohttp` POST and
  reads the whole reply: the engine's routes, the pool, the plain forward and the upstream session
  are gone, one upstream exchange is left.
- `whole_reply`: the upstream session reads a call's reply whole (`await resp.read()`) instead of
  streaming it through the SSE decoder, the router and the drain.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import orjson

ACCEPT = "application/json, text/event-stream"


def _data_message(body: bytes) -> Any:
    line = next(line for line in body.split(b"\n") if line.startswith(b"data:"))
    return orjson.loads(line[5:])


def _no_access_line() -> None:
    from proxy.http_front import endpoint

    endpoint.HttpFront._log_finished = lambda self, *args, **kwargs: None


def _no_engine() -> None:
    from proxy.engine import engine

    async def handle(self: Any, request: Any, sink: Any) -> dict[str, Any]:
        text = request.params["arguments"]["text"]
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        return {"jsonrpc": "2.0", "id": request.front_request_id, "result": result}

    engine.Engine.handle = handle


def _raw_upstream() -> None:
    import aiohttp

    from proxy.engine import engine

    url = sys.argv[sys.argv.index("--upstream") + 1]
    ids = itertools.count(2)
    state: dict[str, Any] = {}

    async def session() -> tuple[aiohttp.ClientSession, dict[str, str]]:
        if "http" not in state:
            http = state["http"] = aiohttp.ClientSession()
            headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "stage", "version": "0"},
                },
            }
            async with http.post(url, data=orjson.dumps(init), headers=headers) as resp:
                await resp.read()
                headers = {**headers, "Mcp-Session-Id": resp.headers["Mcp-Session-Id"]}
            headers["MCP-Protocol-Version"] = "2025-11-25"
            done = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            async with http.post(url, data=done, headers=headers) as resp:
                await resp.read()
            state["headers"] = headers
        return state["http"], state["headers"]

    async def handle(self: Any, request: Any, sink: Any) -> dict[str, Any]:
        http, headers = await session()
        params = {key: value for key, value in request.params.items() if key != "_meta"}
        message = {"jsonrpc": "2.0", "id": next(ids), "method": request.method, "params": params}
        async with http.post(url, data=orjson.dumps(message), headers=headers) as resp:
            reply = _data_message(await resp.read())
        result = {**reply["result"], "resultType": "complete"}
        return {"jsonrpc": "2.0", "id": request.front_request_id, "result": result}

    engine.Engine.handle = handle


def _whole_reply() -> None:
    from proxy.upstream.http.call import CallSender
    from proxy.upstream.http.wire import build_headers

    async def send_call(self: Any, call: Any, generation: int) -> Any:
        channel = self._channel
        headers = build_headers(
            channel._base_headers,
            call.headers,
            accept=ACCEPT,
            session_id=channel.session_id,
            protocol_version=channel.protocol_version,
        )
        headers["Content-Type"] = "application/json"
        body = orjson.dumps(call.request_message())
        async with channel._client.request("POST", channel.url, headers=headers, data=body) as r:
            return _data_message(await r.read())

    CallSender._send = send_call


STAGES = {
    "no_access_line": _no_access_line,
    "no_engine": _no_engine,
    "raw_upstream": _raw_upstream,
    "whole_reply": _whole_reply,
}


def apply(stage: str) -> None:
    STAGES[stage]()
