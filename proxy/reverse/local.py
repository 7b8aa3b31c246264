"""The requests of a legacy session the bridge answers itself in front of a 2026-07-28 upstream:
`ping`, `logging/setLevel` (kept for the session, sent as `logLevel` on later requests) and
`resources/subscribe` / `resources/unsubscribe` (the session's set, delivered by
`proxy.reverse.listen`)."""

from __future__ import annotations

from collections.abc import Callable

from proxy.reverse.sessions import ReverseSession
from translators.protocol.eras import (
    LEGACY_PING,
    LOG_LEVELS,
    LOGGING_SET_LEVEL,
    RESOURCES_SUBSCRIBE,
    RESOURCES_UNSUBSCRIBE,
)
from translators.wire.errors import INVALID_PARAMS
from translators.wire.jsonrpc import JsonObject, error_response, result_response


def answer_locally(
    session: ReverseSession, message: JsonObject, subscriptions_changed: Callable[[], None]
) -> JsonObject | None:
    """The response to `message` when the session answers it itself, or None."""
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if method == LEGACY_PING:
        return result_response(request_id, {})
    if method == LOGGING_SET_LEVEL:
        level = params.get("level")
        if level not in LOG_LEVELS:
            problem = {"code": INVALID_PARAMS, "message": f"Invalid log level: {str(level)[:40]}"}
            return error_response(request_id, problem)
        session.view.log_level = str(level)
        return result_response(request_id, {})
    if method in (RESOURCES_SUBSCRIBE, RESOURCES_UNSUBSCRIBE):
        uri = params.get("uri")
        if not isinstance(uri, str):
            problem = {"code": INVALID_PARAMS, "message": "Invalid params: uri is required"}
            return error_response(request_id, problem)
        if method == RESOURCES_SUBSCRIBE:
            session.view.subscribed.add(uri)
        else:
            session.view.subscribed.discard(uri)
        subscriptions_changed()
        return result_response(request_id, {})
    return None


__all__ = ["answer_locally"]
