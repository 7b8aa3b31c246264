"""JSON-RPC 2.0 envelopes: the one place a message dict is built (pure).

Every request, notification and response the bridge sends, to the client or upstream, is built
here. An id is echoed as it came; a response whose id could not be read leaves `id` out, since MCP
ids are never null (modern `basic/index.mdx` § Requests, § Error Responses; schema
`JSONRPCErrorResponse`).
"""

from __future__ import annotations

from typing import Any

from translators.wire.errors import BridgeBug, BridgeError

JsonObject = dict[str, Any]  # one JSON object, as `json.loads` gives it


def request(request_id: int | str, method: str, params: JsonObject | None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: JsonObject | None = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result_response(request_id: Any, result: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: JsonObject) -> JsonObject:
    """Wrap an error object in a response echoing the request id (left out when unreadable)."""
    if request_id is None:
        return {"jsonrpc": "2.0", "error": error}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def to_error_response(exc: BridgeError, request_id: Any) -> JsonObject:
    """The one place a bridge exception becomes a JSON-RPC error response."""
    return error_response(request_id, exc.to_error())


def answer(
    push_id: int | str, *, result: JsonObject | None, error: JsonObject | None
) -> JsonObject:
    """The response answering a server's request (a push): exactly one of `result` or `error`."""
    if (result is None) == (error is None):
        raise BridgeBug("a response carries exactly one of result or error")
    return (
        result_response(push_id, result)
        if result is not None
        else error_response(push_id, error or {})
    )


__all__ = [
    "JsonObject",
    "answer",
    "error_response",
    "notification",
    "request",
    "result_response",
    "to_error_response",
]
