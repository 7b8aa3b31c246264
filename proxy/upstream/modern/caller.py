"""The seam of the 2026-07-28 upstream clients: `ModernCaller` sends one request and returns its
JSON-RPC response, whatever the transport (docs/directions.md). Failures are answers, never
exceptions: `failure` builds the JSON-RPC error a caller returns from an `UpstreamFault`, as every
path tells a client of one (proxy/common/faults.py, `reported_error`: no internal address, a
correlation id into the log, and why as `data.reason`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from proxy.common.faults import reported_error
from translators.wire.errors import UpstreamFault
from translators.wire.jsonrpc import JsonObject

OnMessage = Callable[[JsonObject], None]


class ModernCaller(Protocol):
    """Sends one 2026-07-28 request upstream and returns its JSON-RPC response."""

    async def call(
        self,
        message: JsonObject,
        on_message: OnMessage,
        authorization: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> JsonObject:
        """`headers`: extra HTTP headers (`Mcp-Param-*`), if the transport has headers."""
        ...

    async def aclose(self) -> None: ...


def failure(request_id: Any, fault: UpstreamFault) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "error": reported_error(fault)}


__all__ = ["ModernCaller", "OnMessage", "failure"]
