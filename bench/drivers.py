"""Raw, light MCP drivers used on both sides of every comparison (same style, same costs).

- `ModernHttp`: a modern (2026-07-28) POST to the bridge: the three headers and `_meta`, one JSON
  reply; the MRTR round trip (tools/call -> InputRequiredResult -> retry -> complete).
- `LegacyHttp`: a legacy (2025-11-25) session straight to the server: initialize once, then POSTs
  with `Mcp-Session-Id`; the push round trip (tools/call -> push on the call's SSE stream -> POST
  the answer -> the result on the same stream).
- `StdioPeer`: newline-delimited JSON-RPC to a child process (a legacy server, or the bridge's
  modern stdio front), with an id -> future table so calls may overlap.

Every wait is bounded by `TIMEOUT_S`; a failed call raises `CallFailed`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import suppress
from typing import Any, Final

import aiohttp

JsonObject = dict[str, Any]
TIMEOUT_S: Final = 60.0
MODERN_VERSION: Final = "2026-07-28"
LEGACY_VERSION: Final = "2025-11-25"
CLIENT_INFO: Final = {"name": "mrtr-bench", "version": "0"}
ELICIT_FORM: Final[JsonObject] = {"elicitation": {"form": {}}}
ANSWER: Final[JsonObject] = {"action": "accept", "content": {"choice": "blue"}}
_JSON_HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


class CallFailed(RuntimeError):
    """A call ended in a JSON-RPC error, an HTTP error or an unexpected shape."""


def _dumps(message: JsonObject) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def result_of(message: JsonObject) -> JsonObject:
    """The `result` of a JSON-RPC response, or `CallFailed`."""
    result = message.get("result")
    if not isinstance(result, dict):
        raise CallFailed(f"JSON-RPC error: {json.dumps(message.get('error', message))[:300]}")
    return result


def tool_text(result: JsonObject) -> str:
    """The first text content of a CallToolResult (the tools here return one text item)."""
    content = result.get("content")
    if result.get("isError") or not isinstance(content, list) or not content:
        raise CallFailed(f"tool error or empty result: {json.dumps(result)[:300]}")
    return str(content[0].get("text"))


async def sse_messages(response: aiohttp.ClientResponse) -> AsyncIterator[JsonObject]:
    """JSON-RPC messages of an SSE body as they arrive (events without data are skipped)."""
    data: list[str] = []
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            text = "\n".join(data)
            data = []
            if text.strip():
                yield json.loads(text)


async def read_response(response: aiohttp.ClientResponse) -> JsonObject:
    """The JSON-RPC response in a JSON or SSE reply (the last message with a result or error)."""
    if response.status >= 400 and not response.content_type.startswith("application/json"):
        raise CallFailed(f"HTTP {response.status}: {(await response.text())[:300]}")
    if response.content_type == "text/event-stream":
        async for message in sse_messages(response):
            if "result" in message or "error" in message:
                await response.read()  # to the end of the stream, so the connection is kept alive
                return message
        raise CallFailed("SSE reply ended without a response")
    message = json.loads(await response.read())
    if not isinstance(message, dict):
        raise CallFailed("reply is not a JSON object")
    return message


def modern_request(
    request_id: int,
    name: str,
    arguments: JsonObject,
    capabilities: JsonObject,
    extra: JsonObject | None = None,
) -> JsonObject:
    """A modern tools/call with the three `_meta` entries every 2026-07-28 request carries."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    params: JsonObject = {"name": name, "arguments": arguments, "_meta": meta, **(extra or {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class ModernHttp:
    """Modern POSTs to the bridge's endpoint on one shared `aiohttp.ClientSession`."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        url: str,
        capabilities: JsonObject | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._http = http
        self._url = url
        self._capabilities = capabilities or {}
        self._extra_headers = headers or {}
        self._ids = itertools.count(1)

    async def _post(self, message: JsonObject) -> JsonObject:
        headers = {
            **_JSON_HEADERS,
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": message["params"]["name"],
            **self._extra_headers,
        }
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        async with self._http.post(
            self._url, data=_dumps(message), headers=headers, timeout=timeout
        ) as response:
            return await read_response(response)

    async def call(
        self, name: str, arguments: JsonObject, extra: JsonObject | None = None
    ) -> JsonObject:
        """One tools/call; returns the modern result (any resultType)."""
        request = modern_request(next(self._ids), name, arguments, self._capabilities, extra)
        return result_of(await self._post(request))

    async def echo(self, text: str) -> str:
        result = await self.call("echo", {"text": text})
        if result.get("resultType", "complete") != "complete":
            raise CallFailed(f"echo was not complete: {json.dumps(result)[:300]}")
        return tool_text(result)

    async def open_held(self, topic: str) -> JsonObject:
        """tools/call `ask`: the InputRequiredResult that holds the call in the bridge."""
        result = await self.call("ask", {"topic": topic})
        if result.get("resultType") != "input_required" or not result.get("inputRequests"):
            raise CallFailed(f"expected input_required: {json.dumps(result)[:300]}")
        return result

    async def finish_held(self, topic: str, held: JsonObject) -> str:
        """The retry: answer every input request; returns the completed tool text."""
        answers = {key: ANSWER for key in held["inputRequests"]}
        extra = {"inputResponses": answers, "requestState": held["requestState"]}
        result = await self.call("ask", {"topic": topic}, extra)
        if result.get("resultType") != "complete":
            raise CallFailed(f"retry was not complete: {json.dumps(result)[:300]}")
        return tool_text(result)

    async def mrtr_round_trip(self, topic: str) -> str:
        return await self.finish_held(topic, await self.open_held(topic))


class LegacyHttp:
    """One legacy session straight to the server (raw POSTs; no GET stream, as it needs none)."""

    def __init__(
        self, http: aiohttp.ClientSession, url: str, capabilities: JsonObject | None = None
    ) -> None:
        self._http = http
        self._url = url
        self._capabilities = capabilities or {}
        self._ids = itertools.count(1)
        self._session_id: str | None = None

    def _headers(self) -> dict[str, str]:
        if self._session_id is None:
            return dict(_JSON_HEADERS)
        return {
            **_JSON_HEADERS,
            "Mcp-Session-Id": self._session_id,
            "MCP-Protocol-Version": LEGACY_VERSION,
        }

    async def initialize(self) -> None:
        params = {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": self._capabilities,
            "clientInfo": CLIENT_INFO,
        }
        message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "initialize",
            "params": params,
        }
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        async with self._http.post(
            self._url, data=_dumps(message), headers=self._headers(), timeout=timeout
        ) as response:
            result_of(await read_response(response))
            self._session_id = response.headers.get("Mcp-Session-Id")
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def _send(self, message: JsonObject) -> None:
        """POST a notification or a response (202 expected)."""
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        async with self._http.post(
            self._url, data=_dumps(message), headers=self._headers(), timeout=timeout
        ) as response:
            await response.read()
            if response.status != 202:
                raise CallFailed(f"expected 202, got HTTP {response.status}")

    def _call_message(self, name: str, arguments: JsonObject) -> JsonObject:
        return {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }

    async def echo(self, text: str) -> str:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        message = self._call_message("echo", {"text": text})
        async with self._http.post(
            self._url, data=_dumps(message), headers=self._headers(), timeout=timeout
        ) as response:
            return tool_text(result_of(await read_response(response)))

    async def push_round_trip(self, topic: str) -> str:
        """tools/call `ask`; answer its elicitation push; return the result from the same stream."""
        message = self._call_message("ask", {"topic": topic})
        async with asyncio.timeout(TIMEOUT_S):
            async with self._http.post(
                self._url, data=_dumps(message), headers=self._headers()
            ) as response:
                if response.content_type != "text/event-stream":
                    raise CallFailed(f"expected an SSE reply, got {response.content_type}")
                async for inbound in sse_messages(response):
                    if inbound.get("method") == "elicitation/create":
                        await self._send({"jsonrpc": "2.0", "id": inbound["id"], "result": ANSWER})
                    elif inbound.get("id") == message["id"]:
                        # to the end of the stream, so the connection is kept alive
                        await response.read()
                        return tool_text(result_of(inbound))
        raise CallFailed("the call's stream ended without a result")


class StdioPeer:
    """A child process speaking newline-delimited JSON-RPC; requests may overlap."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self._argv = list(argv)
        self._env = env
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[JsonObject]] = {}
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=self._env,
            limit=1 << 24,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        while line := await self._process.stdout.readline():
            message = json.loads(line)
            waiter = self._waiting.pop(message.get("id"), None) if "method" not in message else None
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(CallFailed("the process closed its stdout"))

    def _write(self, message: JsonObject) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(_dumps(message) + b"\n")

    async def request(self, message: JsonObject) -> JsonObject:
        """Send `message` (its id is replaced) and wait for its response; returns the result."""
        request_id = next(self._ids)
        waiter: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        self._write({**message, "id": request_id})
        async with asyncio.timeout(TIMEOUT_S):
            return result_of(await waiter)

    def notify(self, message: JsonObject) -> None:
        self._write(message)

    async def aclose(self) -> None:
        """Close stdin, then terminate after a bounded wait."""
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            async with asyncio.timeout(5):
                await process.wait()
        except TimeoutError:
            with suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if self._reader is not None:
            self._reader.cancel()
            with suppress(asyncio.CancelledError):
                await self._reader


class LegacyStdio:
    """A legacy stdio server used directly: initialize, then tools/call."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.peer = StdioPeer(argv)

    async def start(self) -> None:
        await self.peer.start()
        params = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
        await self.peer.request({"jsonrpc": "2.0", "method": "initialize", "params": params})
        self.peer.notify({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call_text(self, name: str, arguments: JsonObject) -> str:
        message = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        return tool_text(await self.peer.request(message))

    async def echo(self, text: str) -> str:
        return await self.call_text("echo", {"text": text})


class ModernStdio:
    """The bridge's modern stdio front (`mrtr-bridge stdio ...`): stateless tools/call lines."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.peer = StdioPeer(argv, env)

    async def start(self) -> None:
        await self.peer.start()

    async def echo(self, text: str) -> str:
        result = await self.peer.request(modern_request(0, "echo", {"text": text}, {}))
        return tool_text(result)
