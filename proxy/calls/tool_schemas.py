"""Tool input schemas the engine remembers for `x-mcp-header` checks
(2026-07-28/basic/transports/streamable-http.mdx), and tool annotations for the recovery policy.

Keyed like upstream sessions, by (principal, capability fingerprint), because a legacy server's
list may differ per session; bounded (least recently used goes first) and forgotten for a principal
when its upstream announces `notifications/tools/list_changed`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from proxy.upstream.pool import SessionKey
from translators.wire import fast_json
from translators.wire.canonical import as_object
from translators.wire.header_values import X_MCP_HEADER
from translators.wire.jsonrpc import JsonObject

MAX_KEYS: Final = 1024


Ident = tuple[str, str, str]  # `SessionKey.ident`: hashed and compared in C, on every call


class ToolSchemas:
    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self._by_key: OrderedDict[Ident, dict[str, JsonObject]] = OrderedDict()
        self._annotations: dict[Ident, dict[str, JsonObject]] = {}
        self._with_headers: dict[Ident, frozenset[str]] = {}
        self._max_keys = max_keys

    def get(self, key: SessionKey) -> dict[str, JsonObject] | None:
        ident = key.ident
        schemas = self._by_key.get(ident)
        if schemas is not None:
            self._by_key.move_to_end(ident)
        return schemas

    def annotations(self, key: SessionKey) -> dict[str, JsonObject] | None:
        """name -> annotations (empty when the tool has none) of the remembered first page."""
        return self._annotations.get(key.ident) if self.get(key) is not None else None

    def mentions_headers(self, key: SessionKey, name: str) -> bool:
        """Whether tool `name`'s schema may hold `x-mcp-header` annotations (False: a call needs
        no header check; decided once per listing, not per call)."""
        return name in self._with_headers.get(key.ident, ())

    def remember(self, key: SessionKey, tools_result: JsonObject) -> dict[str, JsonObject]:
        """Record the tools of a first `tools/list` page; returns name -> inputSchema."""
        tools = tools_result.get("tools")
        named = [
            tool
            for tool in (tools if isinstance(tools, list) else [])
            if isinstance(tool, dict) and isinstance(tool.get("name"), str)
        ]
        schemas = {tool["name"]: as_object(tool.get("inputSchema")) for tool in named}
        ident = key.ident
        self._by_key[ident] = schemas
        self._annotations[ident] = {
            tool["name"]: as_object(tool.get("annotations")) for tool in named
        }
        marker = X_MCP_HEADER.encode()
        self._with_headers[ident] = frozenset(
            name for name, schema in schemas.items() if marker in fast_json.dumps(schema)
        )
        self._by_key.move_to_end(ident)
        while len(self._by_key) > self._max_keys:
            oldest = self._by_key.popitem(last=False)[0]
            self._annotations.pop(oldest, None)
            self._with_headers.pop(oldest, None)
        return schemas

    def forget_principal(self, principal: str) -> None:
        for ident in [ident for ident in self._by_key if ident[0] == principal]:
            del self._by_key[ident]
            self._annotations.pop(ident, None)
            self._with_headers.pop(ident, None)

    def __len__(self) -> int:
        return len(self._by_key)
