"""An upstream's `inputRequests` as pushes to a legacy client, and the client's answers as
`inputResponses` (pure; docs/directions.md).

Each input request becomes the server-to-client request a legacy server would send:
`elicitation/create` (form, or URL with an `elicitationId`, minted by the bridge when the upstream
sent none, since a legacy client needs one), `sampling/createMessage` or `roots/list`. A request
the client did not declare (or its revision does not have) is never pushed: the legacy request
fails with the error a legacy server's SDK gives in that case. An answer is the push's `result`;
an error answer ends the legacy request with the client's own error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from translators.protocol.capabilities import elicitation_modes
from translators.protocol.eras import ELICIT, ROOTS, SAMPLE
from translators.reverse.session import ClientView
from translators.wire.errors import INTERNAL_ERROR, INVALID_PARAMS
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject

MAX_INPUT_REQUESTS = 32


@dataclass(frozen=True)
class Push:
    """One input request, as the legacy request the bridge sends the client."""

    key: str
    method: str
    params: JsonObject


@dataclass(frozen=True)
class Refused:
    """Why the input requests cannot be pushed: the JSON-RPC error of the legacy request."""

    error: JsonObject


def _refused(code: int, message: str, key: str) -> Refused:
    return Refused({"code": code, "message": message, "data": {"inputKey": key[:64]}})


def pushes_for(
    input_requests: Any, view: ClientView, mint_id: Callable[[], str]
) -> list[Push] | Refused:
    """The pushes for an `InputRequiredResult`'s `inputRequests`, in the upstream's order."""
    requests = as_object(input_requests)
    if len(requests) > MAX_INPUT_REQUESTS:
        return Refused(
            {
                "code": INTERNAL_ERROR,
                "message": f"The server asked for more than {MAX_INPUT_REQUESTS} inputs at once",
            }
        )
    pushes: list[Push] = []
    for key, request in requests.items():
        push = _push(str(key), as_object(request), view, mint_id)
        if isinstance(push, Refused):
            return push
        pushes.append(push)
    return pushes


def _push(
    key: str, request: JsonObject, view: ClientView, mint_id: Callable[[], str]
) -> Push | Refused:
    method = request.get("method")
    params = {k: v for k, v in as_object(request.get("params")).items() if k != "_meta"}
    if method == ELICIT:
        return _elicitation(key, params, view, mint_id)
    if method == SAMPLE:
        if not isinstance(view.capabilities.get("sampling"), dict):
            return _refused(INVALID_PARAMS, "Client does not support sampling", key)
        if not view.revision.sampling_tools:
            params = {k: v for k, v in params.items() if k not in ("tools", "toolChoice")}
        return Push(key, SAMPLE, params)
    if method == ROOTS:
        if not isinstance(view.capabilities.get("roots"), dict):
            return _refused(INVALID_PARAMS, "Client does not support roots", key)
        return Push(key, ROOTS, {})
    return _refused(INTERNAL_ERROR, f"The server asked for an unknown input: {method!r}", key)


def _elicitation(
    key: str, params: JsonObject, view: ClientView, mint_id: Callable[[], str]
) -> Push | Refused:
    mode = params.get("mode", "form")
    if not view.revision.elicitation or not isinstance(view.capabilities.get("elicitation"), dict):
        return _refused(INVALID_PARAMS, "Client does not support elicitation", key)
    if mode not in elicitation_modes(view.capabilities) or (
        mode != "form" and not view.revision.elicitation_modes
    ):
        return _refused(INVALID_PARAMS, f"Client does not support elicitation mode {mode!r}", key)
    if mode == "url":
        minted = params.get("elicitationId")
        return Push(
            key,
            ELICIT,
            {**params, "elicitationId": minted if isinstance(minted, str) else mint_id()},
        )
    if not view.revision.elicitation_modes:
        params = {k: v for k, v in params.items() if k != "mode"}
    return Push(key, ELICIT, params)


def input_response(push: Push, answer: JsonObject) -> JsonObject | Refused:
    """The `inputResponses` value for the client's JSON-RPC response to `push`, or the error the
    legacy request fails with (the client answered with an error, or with no result)."""
    result = answer.get("result")
    if isinstance(result, dict):
        return {k: v for k, v in result.items() if k != "_meta"}
    error = as_object(answer.get("error"))
    code = error.get("code")
    message = error.get("message")
    return Refused(
        {
            "code": code if isinstance(code, int) else INTERNAL_ERROR,
            "message": str(message)[:500] if message is not None else f"{push.method} failed",
            "data": {"inputKey": push.key[:64]},
        }
    )


__all__ = ["MAX_INPUT_REQUESTS", "Push", "Refused", "input_response", "pushes_for"]
