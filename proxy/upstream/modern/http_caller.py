"""A 2026-07-28 HTTP upstream, one request at a time (the reverse direction's client).

`ModernHttpCaller.call` POSTs one request with the modern headers (`MCP-Protocol-Version`,
`Mcp-Method`, `Mcp-Name`), reads the answer (JSON, or an SSE stream whose notifications go to
`on_message` as they arrive) and returns the JSON-RPC response. Cancelling the call closes the
response stream, which is the 2026-07-28 cancellation on HTTP. Failures become JSON-RPC errors
naming no internal address. The answer is read to its end within `upstream.max_line_bytes`, and a
redirect is followed only within the upstream's origin (the one body reader and the one redirect
rule of every upstream client: `proxy.upstream.http.wire`, `proxy.upstream.http.outbound`).
aiohttp is imported only when a caller first sends (the stdio front in front of a stdio upstream
never does, and its client waits for the bridge's imports).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import structlog

from config.settings import UpstreamSettings
from proxy.common.shown import shown_uri
from proxy.upstream.http.wire import read_reply
from proxy.upstream.modern.caller import OnMessage, failure
from translators.protocol.eras import (
    MODERN_VERSION,
    PROMPTS_GET,
    RESOURCES_READ,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
)
from translators.wire.errors import UpstreamFault, UpstreamProtocolError
from translators.wire.fast_json import as_object
from translators.wire.header_values import encode_header_value
from translators.wire.jsonrpc import JsonObject

if TYPE_CHECKING:
    import aiohttp

_log = structlog.get_logger("proxy.upstream.modern")
_NAME_FIELDS: Final = {TOOLS_CALL: "name", PROMPTS_GET: "name", RESOURCES_READ: "uri"}


def request_headers(message: JsonObject, authorization: str | None) -> dict[str, str]:
    """The 2026-07-28 Streamable HTTP headers of `message`."""
    method = str(message.get("method"))
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN_VERSION,
        "Mcp-Method": method,
    }
    name = as_object(message.get("params")).get(_NAME_FIELDS.get(method, ""))
    if isinstance(name, str):
        headers["Mcp-Name"] = encode_header_value(name)
    if authorization is not None:
        headers["Authorization"] = authorization
    return headers


class ModernHttpCaller:
    """POSTs 2026-07-28 requests to `upstream.url`; `aclose()` closes its client."""

    def __init__(self, upstream: UpstreamSettings, timeout_s: float) -> None:
        self._upstream = upstream
        self._timeout_s = timeout_s
        self._client: aiohttp.ClientSession | None = None

    def authorization(self, client_authorization: str | None) -> str | None:
        static = self._upstream.authorization
        if static is not None:
            return static.get_secret_value()
        return client_authorization if self._upstream.forward_authorization else None

    def _http(self) -> aiohttp.ClientSession:
        import aiohttp

        from proxy.upstream.http.outbound import upstream_client

        if self._client is None:
            # one client for every principal: no cookie jar shared between them (a 2026-07-28
            # server is stateless; docs/decisions.md § 33)
            self._client = upstream_client(self._upstream, cookie_jar=aiohttp.DummyCookieJar())
        return self._client

    async def call(
        self,
        message: JsonObject,
        on_message: OnMessage,
        authorization: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> JsonObject:
        import aiohttp

        from proxy.upstream.errors import upstream_fault

        request_id, method = message.get("id"), str(message.get("method"))
        headers = {**request_headers(message, self.authorization(authorization)), **(headers or {})}
        url = shown_uri(self._upstream.url or "")
        try:
            status, reply = await self._post(message, headers, on_message)
        except UpstreamFault as exc:  # a redirect it does not follow, an answer past the cap
            return failure(request_id, exc)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            fault = upstream_fault(exc, url, method)
            assert isinstance(fault, UpstreamFault)  # what the seam makes of each of them
            return failure(request_id, fault)
        if not isinstance(reply, dict) or not ("result" in reply or "error" in reply):
            public = f"The upstream server answered HTTP {status} without a reply"
            fault = UpstreamProtocolError(f"Upstream {url}: {public} ({method})", public=public)
            return failure(request_id, fault)
        return {**reply, "id": request_id}

    async def _post(
        self, message: JsonObject, headers: dict[str, str], on_message: OnMessage
    ) -> tuple[int, Any]:
        """POST `message`; the HTTP status and the reply read from the answer (JSON, or SSE whose
        notifications go to `on_message`), within `upstream.max_line_bytes`."""
        import aiohttp

        url = self._upstream.url
        assert url is not None
        # a subscriptions/listen stream lasts as long as the client's GET stream
        lasting = message.get("method") == SUBSCRIPTIONS_LISTEN
        timeout = aiohttp.ClientTimeout(
            total=None if lasting else self._timeout_s,
            sock_connect=self._upstream.connect_timeout_s,
        )
        async with self._http().post(url, json=message, headers=headers, timeout=timeout) as answer:
            limit = self._upstream.max_line_bytes
            return answer.status, await read_reply(answer, message.get("id"), limit, on_message)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


__all__ = ["ModernHttpCaller", "request_headers"]
