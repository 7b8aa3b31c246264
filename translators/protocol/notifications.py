"""Upstream notifications -> the front request they belong to (docs/decisions.md § 12)."""

from __future__ import annotations

from typing import Any

from translators.protocol.eras import LOG_LEVELS, LOG_MESSAGE, PROGRESS
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject, notification


def log_level_admits(requested: str | None, level: Any) -> bool:
    """A log message reaches a modern request only if it asked (`logLevel`) and the level is at or
    above."""
    if requested not in LOG_LEVELS or level not in LOG_LEVELS:
        return False
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(requested)


def route_notification(
    message: JsonObject,
    upstream_token: str | int | None,
    front_token: str | int | None,
    log_level: str | None,
) -> JsonObject | None:
    """The notification to send on the current front attempt's stream, or None to drop it.

    Progress is remapped from the bridge's upstream token to the attempt's own token; logs are
    filtered by the attempt's requested level. Everything else is not request-scoped."""
    method = message.get("method")
    params = as_object(message.get("params"))
    if method == PROGRESS:
        if (
            front_token is None
            or upstream_token is None
            or params.get("progressToken") != upstream_token
        ):
            return None
        return notification(PROGRESS, {**params, "progressToken": front_token})
    if method == LOG_MESSAGE and log_level_admits(log_level, params.get("level")):
        return notification(LOG_MESSAGE, params)
    return None


__all__ = ["log_level_admits", "route_notification"]
