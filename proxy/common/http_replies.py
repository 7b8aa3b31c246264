"""The HTTP front's JSON replies and what the per-POST summary log line reports (`Exchange`)."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from translators.auth.oauth import ChallengeReply
from translators.wire import fast_json
from translators.wire.errors import BridgeError, http_status_for
from translators.wire.jsonrpc import JsonObject, to_error_response


class Exchange:
    """What the access log line (`front_request_finished`, proxy/observe/access.py) reports about
    one request."""

    __slots__ = (
        "client_era",
        "code",
        "front_request_id",
        "method",
        "mode",
        "name",
        "principal",
        "result_type",
        "started",
    )

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.front_request_id: int | str | None = None
        self.method: str | None = None
        self.name: str | None = None  # tool / prompt name, resource URI without its query
        self.principal: str | None = None  # the caller's digest
        self.client_era = "modern"
        self.code: int | None = None
        self.result_type: str | None = None
        self.mode = "json"

    def answered(self, message: JsonObject) -> None:
        """Note the JSON-RPC answer: its error code, or its result's `resultType`."""
        error = message.get("error")
        self.code = error.get("code") if isinstance(error, dict) else None
        result = message.get("result")
        kind = result.get("resultType") if isinstance(result, dict) else None
        self.result_type = kind if isinstance(kind, str) else None

    def outcome(self, status: int | None, cancelled: bool) -> str:
        """`complete`, `input_required`, `task`, `error` (with `code`), `cancelled`, `accepted`, or
        where the answer came from when the bridge did not read it (`legacy`, `relayed`,
        `forwarded`, with the HTTP status)."""
        if cancelled:
            return "cancelled"
        if self.code is not None or (status is not None and status >= 400):
            return "error"
        if self.mode in ("legacy", "relayed", "forwarded", "accepted"):
            return self.mode
        if self.result_type in ("input_required", "task"):
            return self.result_type
        return "complete"


class SentOnce(web.Response):
    """A reply that lets go of its body once written. aiohttp keeps a keep-alive connection's last
    response until the connection's next request, and a client whose call is held (its
    `InputRequiredResult` answered) idles there until it retries: a few KB per held call."""

    async def write_eof(self, data: bytes = b"") -> None:
        await super().write_eof(data)
        self._body = None


def json_reply(message: JsonObject, status: int, exchange: Exchange) -> web.Response:
    """`message` as compact UTF-8 JSON (`\\u` escapes only where a string holds a lone surrogate,
    an echoed id, say)."""
    exchange.answered(message)
    body = fast_json.dumps(message)
    return SentOnce(body=body, status=status, content_type="application/json")


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
