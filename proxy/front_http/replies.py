"""The HTTP front's JSON replies and what the per-POST summary log line reports (`Exchange`)."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from translators import fast_json
from translators.errors import BridgeError, http_status_for
from translators.jsonrpc import JsonObject, to_error_response
from translators.oauth import ChallengeReply


class Exchange:
    """What the summary log line reports about one POST."""

    __slots__ = ("code", "front_request_id", "method", "mode", "started")

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.front_request_id: int | str | None = None
        self.method: str | None = None
        self.code: int | None = None
        self.mode = "json"


def json_reply(message: JsonObject, status: int, exchange: Exchange) -> web.Response:
    """`message` as compact UTF-8 JSON (`\\u` escapes only where a string holds a lone surrogate,
    an echoed id, say)."""
    error = message.get("error")
    exchange.code = error.get("code") if isinstance(error, dict) else None
    body = fast_json.dumps(message)
    return web.Response(body=body, status=status, content_type="application/json")


def rejection(
    exc: BridgeError, front_request_id: Any, exchange: Exchange, status: int | None = None
) -> web.Response:
    return json_reply(to_error_response(exc, front_request_id), status or exc.http_status, exchange)


def engine_reply(message: JsonObject, exchange: Exchange) -> web.Response:
    if isinstance(message, ChallengeReply):  # an upstream 401 / 403 step-up, passed through
        response = json_reply(message, message.status, exchange)
        response.headers["WWW-Authenticate"] = message.www_authenticate
        return response
    error = message.get("error")
    status = http_status_for(error.get("code", 0)) if isinstance(error, dict) else 200
    return json_reply(message, status, exchange)


__all__ = ["Exchange", "engine_reply", "json_reply", "rejection"]
