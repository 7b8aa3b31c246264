"""Roots-affine upstream sessions: the pure parts (see docs/architecture.md, "Roots").

A legacy server that asks for `roots/list` outside any call (after `initialized`, after
`notifications/roots/list_changed`) keeps the answer for its session. Such a session may only serve
calls whose client gave that very answer, so the bridge keys it by a digest of the answer. The
bridge asks the client for its roots under `ROOTS_INPUT_KEY`, a stable key derived from the content
of a plain `roots/list` request: the same key a server's `roots/list` push gets inside a call, so a
client that pre-answers it in its first attempt pays no extra round either way.
"""

from __future__ import annotations

from translators.protocol.eras import ROOTS
from translators.protocol.pushes import PendingPush, input_key, input_response_to_legacy
from translators.wire.fast_json import as_object, canonical_json, digest
from translators.wire.jsonrpc import JsonObject

ROOTS_REQUEST: JsonObject = {"method": ROOTS, "params": {}}
ROOTS_INPUT_KEY = input_key(ROOTS_REQUEST, set())
PROBE = "probe"  # the roots component of the one-time probe session's pool key


def declares_roots(client_capabilities: JsonObject) -> bool:
    return isinstance(client_capabilities.get("roots"), dict)


def is_roots_ask(message: JsonObject) -> bool:
    """A server-to-client `roots/list` request (has an id)."""
    return "id" in message and message.get("method") == ROOTS


def client_roots(input_responses: JsonObject) -> JsonObject | None:
    """The client's `roots/list` answer pre-answered under `ROOTS_INPUT_KEY`, checked and normalized
    (only `uri` and `name` are kept); None when absent. Raises `InvalidParams` when malformed."""
    if ROOTS_INPUT_KEY not in input_responses:
        return None
    push = PendingPush(ROOTS_INPUT_KEY, None, ROOTS, ROOTS_REQUEST)
    answer = input_response_to_legacy(ROOTS_INPUT_KEY, push, input_responses[ROOTS_INPUT_KEY])
    roots = as_object(answer.result).get("roots", [])
    kept = [{k: root[k] for k in ("uri", "name") if k in root} for root in roots]
    return {"roots": kept}


def roots_digest(answer: JsonObject) -> str:
    """A short name for a roots answer: sessions are roots-affine per digest. Order-insensitive, as
    a set of roots means the same whatever order the client lists them in."""
    roots = sorted(as_object(answer).get("roots", []), key=canonical_json)
    return digest(roots, 12).hex()


def roots_input_requests() -> dict[str, JsonObject]:
    """The `inputRequests` that ask the client for its roots before any session is chosen. Their
    `InputRequiredResult` carries no `requestState`: the retry is a new first attempt, pre-answered.
    """
    return {ROOTS_INPUT_KEY: {"method": ROOTS, "params": {}}}


def legacy_capabilities_without_roots(legacy_capabilities: JsonObject) -> JsonObject:
    """What a request that cannot be asked for its roots (lists, discover, completion, listen)
    declares upstream to a server that keeps roots per session: everything but `roots`, so the
    server never holds roots on a session that no client vouched for."""
    return {name: value for name, value in legacy_capabilities.items() if name != "roots"}


__all__ = [
    "PROBE",
    "ROOTS_INPUT_KEY",
    "ROOTS_REQUEST",
    "client_roots",
    "declares_roots",
    "is_roots_ask",
    "legacy_capabilities_without_roots",
    "roots_digest",
    "roots_input_requests",
]
