"""Helpers for `test_foundation.py`: the real mcp 2.x client over either front (HTTP or stdio), with
a tap that keeps every raw JSON-RPC message the client sent and received, so results the client
parses into models can still be checked, as they came off the wire, against the official 2026-07-28
schema.

`Wire` is the tap; `Combo` is one {front} x {upstream} combination and `Combo.connect()` opens a
client pinned to 2026-07-28 (no probe, no cache) on it. The stdio front is launched by the client
itself (`mrtr-bridge stdio --upstream URL | --upstream-command "CMD"`), as a local modern client
would.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from schema_check import assert_valid

from translators.protocol.eras import META_SERVER_INFO, MODERN_VERSION, RESULT_COMPLETE
from translators.wire.jsonrpc import JsonObject

from .harness import (
    BRIDGE_EXE,
    FIXTURE_SERVER,
    REPO_ROOT,
    PeerProcess,
    Peers,
    legacy_stdio_command,
)
from .raw_http import HTTP_TIMEOUT_S

Side = Literal["http", "stdio"]

FIXTURE_NAME = "mcp-legacy-conformance-fixture"
# absolute: harness paths accept it
PAGED_SERVER = str(Path(__file__).with_name("foundation_paged_server.py"))
PAGED_NAME = "foundation-paged-fixture"
PAGED_INSTRUCTIONS = "Paged fixture: list tools page by page, then call any tool_<n>."
FIXTURE_VERSION = "1.30.0"  # the mcp 1.x SDK version FastMCP reports as the server version
# configured on every bridge of the module, so the stamped hints are visibly the configured ones
TTL_MS = 4321
CACHE_SCOPE = "public"
CACHE_ENV = {"MRTR_BRIDGE_CACHE_TTL_MS": str(TTL_MS), "MRTR_BRIDGE_CACHE_SCOPE": CACHE_SCOPE}


# ---- the wire tap ------------------------------------------------------------------------------


@dataclass
class Wire:
    """Every JSON-RPC request the client sent and every response it received, as plain JSON;
    `server` is the upstream's name, expected in every result's serverInfo."""

    server: str = FIXTURE_NAME
    requests: list[JsonObject] = field(default_factory=list)
    responses: dict[Any, JsonObject] = field(default_factory=dict)

    def sent(self, item: SessionMessage) -> None:
        if isinstance(item.message, types.JSONRPCRequest):
            self.requests.append(_plain(item.message))

    def received(self, item: SessionMessage | Exception) -> None:
        if isinstance(item, SessionMessage) and isinstance(
            item.message, types.JSONRPCResponse | types.JSONRPCError
        ):
            message = _plain(item.message)
            self.responses[message.get("id")] = message

    def last(self, method: str) -> JsonObject:
        """The response to the last `method` request that got one."""
        for request in reversed(self.requests):
            if request["method"] == method and request["id"] in self.responses:
                return self.responses[request["id"]]
        raise AssertionError(
            f"no response to a {method} request on the wire; sent {self.methods()}"
        )

    def result(self, method: str, definition: str) -> JsonObject:
        """The raw result of the last `method`: checked against `<definition>` and
        `<definition>Response` of the modern schema, complete, and carrying the upstream's
        serverInfo."""
        response = self.last(method)
        assert "result" in response, response
        assert_valid(response, f"{definition}Response", "modern")
        result: JsonObject = response["result"]
        assert_valid(result, definition, "modern")
        assert result["resultType"] == RESULT_COMPLETE
        assert result["_meta"][META_SERVER_INFO] == {
            "name": self.server,
            "version": FIXTURE_VERSION,
        }
        return result

    def error(self, method: str) -> JsonObject:
        """The raw error object of the last `method`, its response checked against the modern
        schema."""
        response = self.last(method)
        assert "error" in response, response
        assert_valid(response, "JSONRPCErrorResponse", "modern")
        error: JsonObject = response["error"]
        return error

    def methods(self) -> list[str]:
        return [request["method"] for request in self.requests]


def _plain(message: Any) -> JsonObject:
    plain: JsonObject = message.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return plain


class _TappedRead:
    """A read stream that shows every item to a `Wire` before the client sees it."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._inner.receive()
        self._wire.received(item)
        return item

    def __aiter__(self) -> _TappedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TappedRead:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None

    def __getattr__(
        self, name: str
    ) -> Any:  # e.g. `last_context` of the SDK's context-aware streams
        return getattr(self._inner, name)


class _TappedWrite:
    """A write stream that shows every item to a `Wire` before sending it."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    async def send(self, item: SessionMessage, /) -> None:
        self._wire.sent(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TappedWrite:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.asynccontextmanager
async def tapped(
    transport: contextlib.AbstractAsyncContextManager[TransportStreams], wire: Wire
) -> AsyncIterator[Any]:
    """`transport` (an SDK client transport) with both of its streams tapped into `wire`."""
    async with transport as (read_stream, write_stream):
        yield _TappedRead(read_stream, wire), _TappedWrite(write_stream, wire)


# ---- the four combinations ---------------------------------------------------------------------


@dataclass(frozen=True)
class Combo:
    """One front x upstream combination for one legacy `script`. An HTTP front is `bridge`
    (started once per module); a stdio front is launched by each client, fronting `upstream_url` or
    `script` over stdio."""

    front: Side
    upstream: Side
    script: str
    server: str
    bridge: PeerProcess | None = None
    upstream_url: str | None = None

    @contextlib.asynccontextmanager
    async def connect(self, **client_kwargs: Any) -> AsyncIterator[tuple[Client, Wire]]:
        """A modern client on this combination and the tap on its wire."""
        client_kwargs.setdefault("mode", MODERN_VERSION)
        client_kwargs.setdefault("cache", None)
        wire = Wire(server=self.server)
        async with contextlib.AsyncExitStack() as stack:
            if self.front == "http":
                assert self.bridge is not None
                timeout = httpx2.Timeout(HTTP_TIMEOUT_S, read=60.0)
                http = await stack.enter_async_context(httpx2.AsyncClient(timeout=timeout))
                transport: Any = streamable_http_client(self.bridge.url, http_client=http)
            else:
                transport = stdio_client(self.stdio_front())
            client = await stack.enter_async_context(
                Client(tapped(transport, wire), **client_kwargs)
            )
            yield client, wire

    def stdio_front(self) -> StdioServerParameters:
        """`mrtr-bridge stdio` in front of this combination's upstream, with the module's cache
        settings."""
        if self.upstream == "http":
            assert self.upstream_url is not None
            upstream = ["--upstream", self.upstream_url]
        else:
            upstream = ["--upstream-command", legacy_stdio_command(self.script)]
        return StdioServerParameters(
            command=str(BRIDGE_EXE),
            args=["stdio", *upstream, "--log-level", "warning"],
            env={"PATH": os.environ.get("PATH", ""), **CACHE_ENV},
            cwd=str(REPO_ROOT),
        )


@dataclass
class Combos:
    """Starts, on first use and once per module, the legacy HTTP servers and HTTP-front bridges
    combos need."""

    peers: Peers
    legacy: dict[str, PeerProcess] = field(default_factory=dict)
    bridges: dict[tuple[Side, str], PeerProcess] = field(default_factory=dict)

    def get(self, front: Side, upstream: Side, script: str = FIXTURE_SERVER) -> Combo:
        server = PAGED_NAME if script == PAGED_SERVER else FIXTURE_NAME
        url = self.legacy_url(script) if upstream == "http" else None
        bridge = self.http_bridge(upstream, script) if front == "http" else None
        return Combo(front, upstream, script, server, bridge, url)

    def legacy_url(self, script: str) -> str:
        if script not in self.legacy:
            self.legacy[script] = self.peers.legacy(script)
        return self.legacy[script].url

    def http_bridge(self, upstream: Side, script: str) -> PeerProcess:
        if (upstream, script) not in self.bridges:
            if upstream == "http":
                bridge = self.peers.bridge(self.legacy_url(script), env=CACHE_ENV)
            else:
                bridge = self.peers.bridge_stdio(script, env=CACHE_ENV)
            self.bridges[upstream, script] = bridge
        return self.bridges[upstream, script]


# ---- peers that come and go --------------------------------------------------------------------


def restart(peers: Peers, process: PeerProcess) -> PeerProcess:
    """Start `process`'s command again, on the same port (after it was stopped)."""
    assert process.popen.poll() is not None, f"{process.name} is still running"
    return peers.start(process.name, process.argv, process.port)


def log_events(bridge: PeerProcess) -> list[str]:
    """The `event` of every JSON log line `bridge` wrote so far, in order."""
    text = bridge.log_path.read_text(encoding="utf-8", errors="replace")
    entries = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [str(entry.get("event")) for entry in entries]


def tool_text(result: types.CallToolResult) -> str:
    """The single text block of a successful tool result."""
    assert not result.is_error, result
    (block,) = result.content
    assert isinstance(block, types.TextContent), block
    return block.text


__all__ = [
    "CACHE_ENV",
    "CACHE_SCOPE",
    "FIXTURE_NAME",
    "FIXTURE_VERSION",
    "PAGED_INSTRUCTIONS",
    "PAGED_NAME",
    "PAGED_SERVER",
    "TTL_MS",
    "Combo",
    "Combos",
    "Wire",
    "log_events",
    "restart",
    "tapped",
    "tool_text",
]
