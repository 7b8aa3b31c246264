"""Raw hand-made requests for integration tests: modern (headers and `_meta` filled in from
`translators.protocol.eras`, any of it overridable) and legacy (initialize, session id, DELETE).

Replies are read whole: `RawReply.messages` holds every JSON-RPC message of a JSON or SSE
reply, `.response` the final one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from translators.protocol.eras import (
    LEGACY_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    NAMED_METHODS,
)
from translators.wire.jsonrpc import JsonObject

HTTP_TIMEOUT_S = 30.0
CLIENT_INFO: dict[str, str] = {"name": "mrtr-bridge-tests", "version": "0.0.0"}


def encode_header_value(value: str) -> str:
    """Header-safe value per the modern transport's Base64 sentinel rule."""
    plain = value.isascii() and value.isprintable() and value == value.strip()
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def parse_sse(text: str) -> list[JsonObject]:
    """The JSON `data` of every event in a complete SSE body (comments and empty events skipped)."""
    messages: list[JsonObject] = []
    for block in text.replace("\r\n", "\n").replace("\r", "\n").split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if data and "".join(data).strip():
            messages.append(json.loads("\n".join(data)))
    return messages


@dataclass(frozen=True)
class RawReply:
    """One HTTP reply: status, headers (lower-case keys) and the JSON-RPC messages in it."""

    status: int
    headers: Mapping[str, str]
    text: str
    messages: list[JsonObject]

    @property
    def response(self) -> JsonObject:
        """The JSON-RPC response (the last message with `result` or `error`)."""
        for message in reversed(self.messages):
            if "result" in message or "error" in message:
                return message
        raise AssertionError(
            f"no JSON-RPC response in HTTP {self.status} reply: {self.text[:500]!r}"
        )

    @property
    def notifications(self) -> list[JsonObject]:
        return [m for m in self.messages if "method" in m and "id" not in m]


async def read_reply(response: aiohttp.ClientResponse) -> RawReply:
    text = await response.text()
    content_type = response.headers.get("Content-Type", "")
    if content_type.startswith("text/event-stream"):
        messages = parse_sse(text)
    elif text.strip() and content_type.startswith("application/json"):
        messages = [json.loads(text)]
    else:
        messages = []
    headers = {key.lower(): value for key, value in response.headers.items()}
    return RawReply(response.status, headers, text, messages)


@dataclass
class ModernPoster:
    """Hand-made modern requests: fills the three headers and `_meta` unless told otherwise."""

    http: aiohttp.ClientSession
    url: str
    capabilities: JsonObject = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    next_id: int = 1

    def body(
        self, method: str, params: JsonObject | None = None, *, request_id: Any = None
    ) -> JsonObject:
        """The request; `params["_meta"]` entries override the defaults (None removes one)."""
        params = dict(params or {})
        meta: JsonObject = {
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_INFO: CLIENT_INFO,
            META_CLIENT_CAPABILITIES: self.capabilities,
            **params.get("_meta", {}),
        }
        params["_meta"] = {key: value for key, value in meta.items() if value is not None}
        if request_id is None:
            request_id, self.next_id = self.next_id, self.next_id + 1
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def request_headers(self, body: JsonObject) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": body["method"],
        }
        name_field = NAMED_METHODS.get(body["method"])
        name = body.get("params", {}).get(name_field) if name_field else None
        if isinstance(name, str):
            headers["Mcp-Name"] = encode_header_value(name)
        return {**headers, **self.headers}

    async def post(
        self,
        method: str,
        params: JsonObject | None = None,
        *,
        request_id: Any = None,
        headers: Mapping[str, str | None] | None = None,
        timeout: float = HTTP_TIMEOUT_S,
    ) -> RawReply:
        """POST one request; `headers` override the defaults (a None value drops that header)."""
        body = self.body(method, params, request_id=request_id)
        return await self.post_body(body, headers=headers, timeout=timeout)

    async def post_body(
        self,
        body: Any,
        *,
        headers: Mapping[str, str | None] | None = None,
        timeout: float = HTTP_TIMEOUT_S,
    ) -> RawReply:
        """POST `body` as is, with default headers derived from it where it is a request."""
        base = self.request_headers(body) if isinstance(body, dict) and "method" in body else {}
        merged = {**base, **(headers or {})}
        sent = {key: value for key, value in merged.items() if value is not None}
        client_timeout = aiohttp.ClientTimeout(total=timeout)
        async with self.http.post(
            self.url, json=body, headers=sent, timeout=client_timeout
        ) as response:
            return await read_reply(response)


@dataclass
class LegacyPoster:
    """Hand-made legacy (2025-11-25) requests: initialize, then the session id on every POST."""

    http: aiohttp.ClientSession
    url: str
    capabilities: JsonObject = field(default_factory=dict)
    session_id: str | None = None
    next_id: int = 1
    headers: dict[str, str] = field(default_factory=dict)  # sent with every request

    async def initialize(self) -> RawReply:
        """`initialize` + `notifications/initialized`; keeps the `Mcp-Session-Id`."""
        params = {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": self.capabilities,
            "clientInfo": CLIENT_INFO,
        }
        reply = await self.post("initialize", params)
        self.session_id = reply.headers.get("mcp-session-id")
        initialized = await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if initialized.status != 202:
            raise AssertionError(
                f"notifications/initialized got HTTP {initialized.status}: {initialized.text}"
            )
        return reply

    async def post(self, method: str, params: JsonObject | None = None) -> RawReply:
        request_id, self.next_id = self.next_id, self.next_id + 1
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.send(message)

    async def send(self, message: JsonObject, timeout: float = HTTP_TIMEOUT_S) -> RawReply:
        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.session_id is not None:
            headers |= {"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": LEGACY_VERSION}
        client_timeout = aiohttp.ClientTimeout(total=timeout)
        async with self.http.post(
            self.url, json=message, headers=headers, timeout=client_timeout
        ) as response:
            return await read_reply(response)

    async def close(self) -> int:
        """DELETE the session; returns the HTTP status."""
        if self.session_id is None:
            return 0
        headers = {
            **self.headers,
            "Mcp-Session-Id": self.session_id,
            "MCP-Protocol-Version": LEGACY_VERSION,
        }
        async with self.http.delete(self.url, headers=headers) as response:
            self.session_id = None
            return response.status
