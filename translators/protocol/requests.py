"""Modern request -> legacy request (docs/architecture.md, "One request")."""

from __future__ import annotations

from translators.protocol.eras import (
    COMPLETION_COMPLETE,
    META_PREFIX,
    META_PROGRESS_TOKEN,
    METHOD_CAPABILITY,
    NAMED_METHODS,
)
from translators.protocol.revisions import NEWEST, Revision
from translators.wire.errors import MethodNotFound
from translators.wire.jsonrpc import JsonObject

_MODERN_ONLY_PARAMS = ("inputResponses", "requestState")


def request_params(revision: Revision, method: str, params: JsonObject) -> JsonObject:
    """`params` without the fields `revision` does not define for `method`."""
    if method == COMPLETION_COMPLETE and not revision.completion_context and "context" in params:
        return {k: v for k, v in params.items() if k != "context"}
    return params


def modern_params_to_legacy(
    params: JsonObject,
    *,
    upstream_progress_token: str | int | None,
    method: str = "",
    revision: Revision = NEWEST,
) -> JsonObject:
    """Strip the modern-only fields, the fields `revision` lacks for `method`, and reserved
    `_meta` keys; rewrite the progress token.

    Vendor `_meta` keys and trace context (`traceparent`, `tracestate`, `baggage`) pass through."""
    legacy = {k: v for k, v in params.items() if k not in _MODERN_ONLY_PARAMS and k != "_meta"}
    meta = params.get("_meta")
    kept = {
        k: v
        for k, v in (meta.items() if isinstance(meta, dict) else ())
        if not k.startswith(META_PREFIX) and k != META_PROGRESS_TOKEN
    }
    if upstream_progress_token is not None:
        kept[META_PROGRESS_TOKEN] = upstream_progress_token
    if kept:
        legacy["_meta"] = kept
    return request_params(revision, method, legacy)


def require_upstream_capability(
    method: str, server_capabilities: JsonObject, revision: Revision = NEWEST
) -> None:
    """Methods gated by an upstream server capability answer -32601 when it is absent.

    Where the revision has no `completions` flag, completion is forwarded ungated: the server
    answers it or says it has no such method."""
    needed = METHOD_CAPABILITY.get(method)
    if needed == "completions" and not revision.completions_flag:
        return
    if needed is not None and not isinstance(server_capabilities.get(needed), dict):
        raise MethodNotFound(f"Method not found: {method} (the server does not offer {needed})")


def salient_params(method: str, params: JsonObject) -> JsonObject:
    """What identifies a request for requestState binding: its name or uri and its arguments."""
    field = NAMED_METHODS.get(method, "name")
    return {"m": method, "n": params.get(field), "a": params.get("arguments")}


__all__ = ["modern_params_to_legacy", "require_upstream_capability", "salient_params"]
