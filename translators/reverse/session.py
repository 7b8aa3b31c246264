"""A legacy client's session in front of a 2026-07-28 upstream (pure; docs/directions.md).

- `initialize` is answered from the upstream's `server/discover`: the version the client asked
  for if the bridge speaks it, else the newest legacy one (as a 2025-11-25 server negotiates);
- every request goes upstream with the per-request `_meta` a modern client sends: the version,
  the capabilities and clientInfo the client declared in `initialize`, and the session's log level;
- modern results lose what only the modern era has (`resultType`, caching hints).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from translators.protocol.eras import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PREFIX,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSION,
)
from translators.protocol.revisions import NEWEST, REVISIONS, Revision
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject

MODERN_ONLY_RESULT_FIELDS: Final = frozenset({"resultType", "ttlMs", "cacheScope"})
# The level a legacy session's logs are asked at until its client sends `logging/setLevel`: a legacy
# server decides what to send and sends it (the mcp Python SDK sends every message, the TypeScript
# SDK filters only once a level is set), while a 2026-07-28 server sends logs only to requests that
# ask (`logLevel` in `_meta`), so the bridge asks for all of them on the client's behalf.
LEGACY_DEFAULT_LOG_LEVEL: Final = "debug"
FALLBACK_SERVER_INFO: Final = {"name": "mcp-server", "version": "unknown"}


@dataclass
class ClientView:
    """What a legacy client declared in `initialize`, and what its session set since."""

    revision: Revision
    capabilities: JsonObject
    client_info: JsonObject
    log_level: str | None = None
    subscribed: set[str] = field(default_factory=set)


def negotiate(requested: Any) -> Revision:
    """The revision a 2025-11-25 server answers `requested` with: the same if known, else the
    newest."""
    if isinstance(requested, str) and requested in REVISIONS:
        return REVISIONS[requested]
    return NEWEST


def open_client(params: JsonObject) -> ClientView:
    """The view of a client from its `initialize` params."""
    capabilities = as_object(params.get("capabilities"))
    return ClientView(
        revision=negotiate(params.get("protocolVersion")),
        capabilities={k: v for k, v in capabilities.items() if isinstance(v, dict)},
        client_info=as_object(params.get("clientInfo")),
    )


def server_capabilities(
    revision: Revision, discovered: JsonObject, *, listen_supported: bool
) -> JsonObject:
    """The upstream's capabilities as a `revision` server declares them. `subscribe` and
    `listChanged` stay only when the bridge can deliver them (a `subscriptions/listen` upstream)."""
    legacy: JsonObject = {}
    for name, value in discovered.items():
        if not isinstance(value, dict) or name == "extensions":
            continue
        if name == "completions" and not revision.completions_flag:
            continue
        kept = dict(value)
        if not listen_supported:
            kept.pop("listChanged", None)
            kept.pop("subscribe", None)
        legacy[name] = kept
    legacy.setdefault("logging", {})  # the bridge keeps the session's level itself
    return legacy


def initialize_result(
    view: ClientView, discover: JsonObject, *, listen_supported: bool
) -> JsonObject:
    """The `InitializeResult` for `view` from the upstream's `DiscoverResult`."""
    info = as_object(as_object(discover.get("_meta")).get(META_SERVER_INFO))
    result: JsonObject = {
        "protocolVersion": view.revision.version,
        "capabilities": server_capabilities(
            view.revision,
            as_object(discover.get("capabilities")),
            listen_supported=listen_supported,
        ),
        "serverInfo": info if isinstance(info.get("name"), str) else FALLBACK_SERVER_INFO,
    }
    instructions = discover.get("instructions")
    if isinstance(instructions, str):
        result["instructions"] = instructions
    return result


def modern_meta(view: ClientView, *, logs: bool = True) -> JsonObject:
    """The per-request `_meta` the upstream needs for one of `view`'s requests; `logs`: whether
    the request asks for log messages (a legacy session's requests do; its `subscriptions/listen`
    stream, which carries no request's logs, does not)."""
    meta: JsonObject = {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        META_CLIENT_CAPABILITIES: {k: v for k, v in view.capabilities.items() if k != "tasks"},
    }
    if isinstance(view.client_info.get("name"), str):
        meta[META_CLIENT_INFO] = view.client_info
    if logs:
        meta[META_LOG_LEVEL] = view.log_level or LEGACY_DEFAULT_LOG_LEVEL
    return meta


def modern_params(view: ClientView, params: Any, extra: JsonObject | None = None) -> JsonObject:
    """A legacy request's params for the upstream: its own `_meta` (progress token, trace
    context) with the modern keys added, and `extra` (`inputResponses`, `requestState`)."""
    kept = dict(as_object(params))
    own = {k: v for k, v in as_object(kept.get("_meta")).items() if not k.startswith(META_PREFIX)}
    kept["_meta"] = {**own, **modern_meta(view)}
    return {**kept, **(extra or {})}


def legacy_result(result: JsonObject) -> JsonObject:
    """A modern (complete) result as a legacy server sends it: without `resultType`, caching
    hints and the `io.modelcontextprotocol/` `_meta` keys (serverInfo)."""
    legacy = {k: v for k, v in result.items() if k not in MODERN_ONLY_RESULT_FIELDS}
    meta = {
        k: v
        for k, v in as_object(legacy.pop("_meta", None)).items()
        if not k.startswith(META_PREFIX)
    }
    return {**legacy, "_meta": meta} if meta else legacy


def is_input_required(result: Any) -> bool:
    return isinstance(result, dict) and result.get("resultType") == "input_required"


__all__ = [
    "ClientView",
    "initialize_result",
    "is_input_required",
    "legacy_result",
    "modern_meta",
    "modern_params",
    "negotiate",
    "open_client",
    "server_capabilities",
]
