"""Legacy result/error -> modern result (docs/decisions.md §§ 3, 11, 15)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from translators.protocol.capabilities import legacy_server_capabilities_to_modern
from translators.protocol.eras import (
    CACHEABLE_METHODS,
    META_RELATED_TASK,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
    TOOLS_LIST,
)
from translators.protocol.tool_repair import repair_tools
from translators.wire.errors import (
    BRIDGE_MARKER,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LEGACY_RESOURCE_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    RESERVED_RANGE,
)
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject


@dataclass(frozen=True)
class CacheHints:
    ttl_ms: int
    scope: Literal["private", "public"]


def _with_meta(result: JsonObject, server_info: JsonObject | None) -> JsonObject:
    meta = result.get("_meta")
    meta = (
        {k: v for k, v in meta.items() if k != META_RELATED_TASK} if isinstance(meta, dict) else {}
    )
    if server_info is not None:
        meta[META_SERVER_INFO] = server_info
    if meta:
        result["_meta"] = meta
    else:
        result.pop("_meta", None)
    return result


def legacy_result_to_modern(
    method: str,
    result: JsonObject,
    *,
    server_info: JsonObject | None,
    cache: CacheHints,
    task_tools: bool = False,
) -> JsonObject:
    """Stamp `resultType`, cache hints and `serverInfo`; drop what the modern era removed.
    `task_tools`: the client declared the Tasks extension, so tools that run only as tasks are
    listed too (docs/tasks.md)."""
    modern = dict(result)
    modern.pop("resultType", None)
    if method == TOOLS_LIST and isinstance(modern.get("tools"), list):
        modern["tools"] = repair_tools(
            [_modern_tool(tool) for tool in modern["tools"] if task_tools or not _needs_tasks(tool)]
        )
    modern["resultType"] = RESULT_COMPLETE
    # Cache hints are the bridge's alone: a legacy server's `ttlMs` or `cacheScope` means nothing
    # in its era, and on a method that is not cacheable it would tell the client to cache.
    modern.pop("ttlMs", None)
    modern.pop("cacheScope", None)
    if method in CACHEABLE_METHODS:
        modern["ttlMs"] = cache.ttl_ms
        modern["cacheScope"] = cache.scope
    return _with_meta(modern, server_info)


def _needs_tasks(tool: Any) -> bool:
    """A legacy tool that runs only as a task cannot be called without the Tasks extension: hidden
    from clients that did not declare it (docs/tasks.md)."""
    return (
        isinstance(tool, dict) and as_object(tool.get("execution")).get("taskSupport") == "required"
    )


def _modern_tool(tool: Any) -> Any:
    if isinstance(tool, dict) and "execution" in tool:
        return {k: v for k, v in tool.items() if k != "execution"}
    return tool


def input_required_result(
    input_requests: dict[str, JsonObject],
    request_state: str | None,
    *,
    server_info: JsonObject | None,
) -> JsonObject:
    """An `InputRequiredResult` (no cache hints: interim results are never cached); without
    `requestState` the client's retry is a new first attempt carrying its `inputResponses`."""
    result: JsonObject = {"resultType": RESULT_INPUT_REQUIRED}
    if request_state is not None:
        result["requestState"] = request_state
    if input_requests:
        result["inputRequests"] = input_requests
    return _with_meta(result, server_info)


def discover_result(
    init_result: JsonObject,
    *,
    server_info: JsonObject | None,
    cache: CacheHints,
    listen_supported: bool,
) -> JsonObject:
    """`server/discover` synthesized from the upstream `InitializeResult` (docs/decisions.md
    § 15)."""
    capabilities = init_result.get("capabilities")
    result: JsonObject = {
        "resultType": RESULT_COMPLETE,
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": legacy_server_capabilities_to_modern(
            capabilities if isinstance(capabilities, dict) else {},
            listen_supported=listen_supported,
        ),
        "ttlMs": cache.ttl_ms,
        "cacheScope": cache.scope,
    }
    if isinstance(init_result.get("instructions"), str):
        result["instructions"] = init_result["instructions"]
    return _with_meta(result, server_info)


def legacy_error_to_modern(error: JsonObject, *, request_uri: str | None = None) -> JsonObject:
    """Map an upstream JSON-RPC error object to one a modern server may send (docs/decisions.md §
    3)."""
    code = error.get("code")
    message = error.get("message") if isinstance(error.get("message"), str) else "Upstream error"
    data = error.get("data")
    if not isinstance(code, int) or isinstance(code, bool):
        return {
            "code": INTERNAL_ERROR,
            "message": "Upstream sent a malformed error",
            "data": {"source": BRIDGE_MARKER},
        }
    if code == LEGACY_RESOURCE_NOT_FOUND:
        return {
            "code": INVALID_PARAMS,
            "message": message,
            "data": _resource_data(data, request_uri),
        }
    if code in RESERVED_RANGE and code != MISSING_CLIENT_CAPABILITY:
        return {
            "code": INTERNAL_ERROR,
            "message": message,
            "data": {"source": BRIDGE_MARKER, "upstreamCode": code, "upstreamData": data},
        }
    mapped: JsonObject = {"code": code, "message": message}
    if data is not None:
        mapped["data"] = data
    return mapped


def _resource_data(data: Any, request_uri: str | None) -> JsonObject:
    if isinstance(data, dict) and isinstance(data.get("uri"), str):
        return data
    return (data if isinstance(data, dict) else {}) | {"uri": request_uri or ""}


__all__ = [
    "CacheHints",
    "discover_result",
    "input_required_result",
    "legacy_error_to_modern",
    "legacy_result_to_modern",
]
