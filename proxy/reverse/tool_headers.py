"""`Mcp-Param-*` headers for a legacy client's `tools/call` (docs/directions.md): a legacy client
knows nothing of `x-mcp-header`, so the bridge mirrors the annotated arguments into headers, as a
2026-07-28 client must. The schemas come from the `tools/list` results the session saw; on a
-32020 header mismatch the bridge lists the tools again (at most `MAX_PAGES` pages) and retries
once, as the spec tells a client to."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from translators.protocol.eras import TOOLS_CALL
from translators.wire.errors import HEADER_MISMATCH
from translators.wire.fast_json import as_object
from translators.wire.header_values import param_headers_for
from translators.wire.jsonrpc import JsonObject

MAX_TOOLS: Final = 4096
MAX_PAGES: Final = 20


class ToolSchemas:
    """The input schemas of the upstream's tools, as one session listed them."""

    def __init__(self) -> None:
        self._schemas: dict[str, JsonObject] = {}

    def learn(self, result: JsonObject) -> None:
        for tool in result.get("tools") or []:
            tool = as_object(tool)
            name, schema = tool.get("name"), tool.get("inputSchema")
            if isinstance(name, str) and isinstance(schema, dict):
                if name not in self._schemas and len(self._schemas) >= MAX_TOOLS:
                    continue
                self._schemas[name] = schema

    def headers_for(self, message: JsonObject) -> dict[str, str]:
        if message.get("method") != TOOLS_CALL:
            return {}
        params = as_object(message.get("params"))
        schema = self._schemas.get(str(params.get("name")))
        return param_headers_for(schema, as_object(params.get("arguments"))) if schema else {}

    async def relist(self, list_page: Callable[[str | None], Awaitable[JsonObject]]) -> None:
        """List the tools again; `list_page(cursor)` returns one `tools/list` reply."""
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            result = as_object((await list_page(cursor)).get("result"))
            self.learn(result)
            next_cursor = result.get("nextCursor")
            if not isinstance(next_cursor, str):
                return
            cursor = next_cursor


def header_mismatch(message: JsonObject, reply: JsonObject) -> bool:
    """Whether a `tools/call` failed for its `Mcp-Param-*` headers."""
    error = as_object(reply.get("error"))
    return message.get("method") == TOOLS_CALL and error.get("code") == HEADER_MISMATCH


__all__ = ["ToolSchemas", "header_mismatch"]
