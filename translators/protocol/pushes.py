"""Legacy pushes <-> modern input requests and responses (docs/decisions.md §§ 10, 11), as the
upstream session's revision has them (docs/revisions.md): an answer to a push must be valid in
the session's revision (`check_elicit_answer`, `sampling_answer`), and what an older server sends
is put in the modern form (`modern_requested_schema`). An answer that cannot be expressed is
refused with the reason as a string; the caller turns it into the client's error, so nothing
invalid reaches the server."""

from __future__ import annotations

import json
from collections.abc import Container
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, NotRequired

from pydantic import Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this TypedDict on Python < 3.12

from translators.protocol.capabilities import elicitation_modes
from translators.protocol.eras import ELICIT, META_INPUT_KEY_HINT, PUSH_KINDS, ROOTS, SAMPLE
from translators.protocol.revisions import NEWEST, Revision
from translators.wire.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_SAMPLING_REJECTED,
    METHOD_NOT_FOUND,
    BridgeError,
    InvalidParams,
)
from translators.wire.fast_json import as_object, digest
from translators.wire.jsonrpc import JsonObject

MAX_KEY_LENGTH = 64
_MEDIA_BLOCKS: Final = frozenset({"text", "image", "audio"})
_VALUE_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int, float),
    "number": (int, float),
}


@dataclass(frozen=True)
class PushAnswer:
    """A JSON-RPC response body for a push: exactly one of `result` / `error`."""

    result: JsonObject | None = None
    error: JsonObject | None = None


@dataclass(frozen=True)
class PendingPush:
    """A legacy push the bridge holds, under the input key the client sees."""

    key: str
    push_id: int | str | None  # None for URL elicitations lifted from a -32042 error
    method: str
    input_request: JsonObject
    elicitation_id: str | None = None
    revision: Revision = NEWEST  # of the session the push came on: its answer must be valid there
    requested_schema: JsonObject | None = None  # an elicitation's schema as the server sent it


def pending_push(
    push: JsonObject, key: str, input_request: JsonObject, revision: Revision
) -> PendingPush:
    """The push held under `key`, asked of the client as `input_request`."""
    params = as_object(push.get("params"))
    elicitation_id = params.get("elicitationId")
    schema = params.get("requestedSchema")
    return PendingPush(
        key,
        push["id"],
        str(push["method"]),
        input_request,
        elicitation_id if isinstance(elicitation_id, str) else None,
        revision,
        schema if isinstance(schema, dict) else None,
    )


def is_push(message: JsonObject) -> bool:
    return "id" in message and isinstance(message.get("method"), str)


def input_key(push: JsonObject, taken: Container[str], hints: dict[str, int] | None = None) -> str:
    """`<kind>-<digest>` of the push's content, or the server's own hint; unique within `taken`
    (the smallest free `-n` suffix). `hints` (base -> a suffix no smaller than the smallest free
    one, valid while nothing left `taken`) makes a flood of identical pushes linear; the caller
    clears it whenever a key leaves `taken`."""
    method = push.get("method", "")
    params = as_object(push.get("params"))
    meta = as_object(params.get("_meta"))
    hint = meta.get(META_INPUT_KEY_HINT)
    if isinstance(hint, str) and 0 < len(hint) <= MAX_KEY_LENGTH:
        base = hint
    else:
        content = {k: v for k, v in params.items() if k != "_meta"}
        base = f"{PUSH_KINDS.get(method, 'input')}-{digest([method, content], 3).hex()}"
    n = hints.get(base, 1) if hints is not None else 1
    key = base if n == 1 else f"{base}-{n}"
    while key in taken:
        n += 1
        key = f"{base}-{n}"
    if hints is not None:
        hints[base] = n
    return key


def legacy_push_to_input_request(
    push: JsonObject, client_capabilities: JsonObject, revision: Revision = NEWEST
) -> JsonObject | PushAnswer:
    """The modern `InputRequest` for a push, or the refusal to send upstream when this request's
    client did not declare what the push needs (the bridge MUST NOT forward it) or the session's
    revision has no such push."""
    method = push.get("method")
    params = as_object(push.get("params"))
    if method == ELICIT:
        if not revision.elicitation:
            return _error(
                METHOD_NOT_FOUND,
                f"Method not found: {ELICIT} does not exist in MCP {revision.version}",
            )
        return _elicitation(params, client_capabilities, revision)
    if method == SAMPLE:
        return _sampling(params, client_capabilities)
    if method == ROOTS:
        if not isinstance(client_capabilities.get("roots"), dict):
            return _error(METHOD_NOT_FOUND, "Client does not support roots")
        return {"method": ROOTS, "params": {}}
    return _error(METHOD_NOT_FOUND, f"Method not found: {method}")


def _elicitation(
    params: JsonObject, client_capabilities: JsonObject, revision: Revision
) -> JsonObject | PushAnswer:
    mode = params.get("mode", "form")
    if mode != "form" and not revision.elicitation_modes:
        return _error(
            INVALID_PARAMS, f"Elicitation mode {mode!r} does not exist in MCP {revision.version}"
        )
    if not isinstance(mode, str) or mode not in elicitation_modes(client_capabilities):
        return _error(INVALID_PARAMS, f"Client does not support elicitation mode {mode!r}")
    if mode == "url":
        kept = {"mode": "url", "message": params.get("message"), "url": params.get("url")}
    else:
        schema = modern_requested_schema(revision, params.get("requestedSchema"))
        kept = {"mode": "form", "message": params.get("message"), "requestedSchema": schema}
    return {"method": ELICIT, "params": kept}


def _sampling(params: JsonObject, client_capabilities: JsonObject) -> JsonObject | PushAnswer:
    sampling = client_capabilities.get("sampling")
    if not isinstance(sampling, dict):
        return _error(LEGACY_SAMPLING_REJECTED, "Client does not support sampling")
    if ("tools" in params or "toolChoice" in params) and not isinstance(
        sampling.get("tools"), dict
    ):
        return _error(LEGACY_SAMPLING_REJECTED, "Client does not support tools in sampling")
    kept = {k: v for k, v in params.items() if k not in ("_meta", "task")}
    if kept.get("includeContext") in ("thisServer", "allServers") and not isinstance(
        sampling.get("context"), dict
    ):
        kept["includeContext"] = "none"
    return {"method": SAMPLE, "params": kept}


def _error(code: int, message: str) -> PushAnswer:
    return PushAnswer(error={"code": code, "message": message})


def over_limit(fault: BridgeError) -> PushAnswer:
    """How a push past one of the bridge's push caps is refused upstream: the limit named."""
    return _error(INTERNAL_ERROR, f"{fault.message} ({fault.data['limit']})")


def duplicate_id(push_id: int | str) -> PushAnswer:
    """How a push reusing the id of a push still pending is refused upstream (the first stays)."""
    return _error(
        INVALID_REQUEST,
        f"Invalid request: id {json.dumps(push_id)} is already used by a pending request",
    )


def refusal(method: str) -> PushAnswer:
    """How a held push is refused when its call is abandoned or cancelled (docs/decisions.md
    § 10)."""
    if method == ELICIT:
        return PushAnswer(result={"action": "cancel"})
    if method == SAMPLE:
        return _error(LEGACY_SAMPLING_REJECTED, "User rejected sampling request")
    return _error(INTERNAL_ERROR, "The request was abandoned")


def unowned_push_answer(
    push: JsonObject, roots: tuple[str, ...], revision: Revision = NEWEST
) -> PushAnswer:
    """Policy for a push no call owns (docs/decisions.md § 10): configured roots, decline, or an
    error."""
    method = push.get("method")
    if method == ROOTS:
        return PushAnswer(result={"roots": [{"uri": uri} for uri in roots]})
    if method == ELICIT and revision.elicitation:
        return PushAnswer(result={"action": "decline"})
    if method == SAMPLE:
        return _error(
            LEGACY_SAMPLING_REJECTED, "No client request is waiting for this sampling request"
        )
    return _error(METHOD_NOT_FOUND, f"Method not found: {method}")


# The client's answers, checked against the legacy result shapes before they go upstream.
# TypedDicts: optional fields may be absent but not null; unknown extra fields are ignored.
class _Text(TypedDict):
    type: Literal["text"]
    text: str


class _Media(TypedDict):
    type: Literal["image", "audio"]
    data: str
    mimeType: str


class _ToolUse(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class _ToolResult(TypedDict):
    type: Literal["tool_result"]
    toolUseId: str
    content: list[dict[str, Any]]
    isError: NotRequired[bool]
    structuredContent: NotRequired[dict[str, Any]]


_Block = Annotated[_Text | _Media | _ToolUse | _ToolResult, Field(discriminator="type")]


class _ElicitResult(TypedDict):
    action: Literal["accept", "decline", "cancel"]
    content: NotRequired[dict[str, str | bool | int | float | list[str]]]


class _CreateMessageResult(TypedDict):
    role: Literal["user", "assistant"]
    content: _Block | list[_Block]
    model: str
    stopReason: NotRequired[str]


class _Root(TypedDict):
    uri: Annotated[str, Field(min_length=1)]
    name: NotRequired[str]


class _ListRootsResult(TypedDict):
    roots: list[_Root]


_RESULT_SHAPES: dict[str, TypeAdapter[Any]] = {
    ELICIT: TypeAdapter(_ElicitResult),
    SAMPLE: TypeAdapter(_CreateMessageResult),
    ROOTS: TypeAdapter(_ListRootsResult),
}


def input_response_to_legacy(key: str, push: PendingPush, value: Any) -> PushAnswer:
    """Validate `inputResponses[key]` for the kind of push it answers and build the legacy
    response."""
    try:
        _RESULT_SHAPES[push.method].validate_python(value, strict=True)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"
            for err in exc.errors()[:3]
        )
        raise InvalidParams(
            f"inputResponses[{key!r}] is not a valid {push.method} result: {problems}",
            {"inputKey": key},
        ) from None
    return PushAnswer(result=_for_revision(key, push, dict(value)))


def _for_revision(key: str, push: PendingPush, result: JsonObject) -> JsonObject:
    """The answer as the push's revision takes it; refused (nothing goes upstream) when it cannot
    be."""
    problem: str | None = None
    if push.method == ELICIT:
        problem = check_elicit_answer(push.revision, push.requested_schema, result)
    elif push.method == SAMPLE:
        shaped = sampling_answer(push.revision, result)
        if isinstance(shaped, dict):
            return shaped
        problem = shaped
    if problem is not None:
        raise InvalidParams(
            f"inputResponses[{key!r}] cannot be sent to the server: {problem}", {"inputKey": key}
        )
    return result


# ---- older revisions ----------------------------------------------------------------------------


def modern_requested_schema(revision: Revision, schema: Any) -> Any:
    """An elicitation schema from a `revision` server, with its `enum` + `enumNames` properties
    in the titled single-select form (`oneOf` of `const` / `title`). Other properties are kept as
    sent."""
    if (
        revision.rich_enums
        or not isinstance(schema, dict)
        or not isinstance(schema.get("properties"), dict)
    ):
        return schema
    properties = {name: _titled_enum(prop) for name, prop in schema["properties"].items()}
    return {**schema, "properties": properties}


def _titled_enum(prop: Any) -> Any:
    if not isinstance(prop, dict) or "enumNames" not in prop:
        return prop
    values, names = prop.get("enum"), prop.get("enumNames")
    if not (
        isinstance(values, list) and isinstance(names, list) and len(values) == len(names)
    ) or not all(isinstance(x, str) for x in [*values, *names]):
        # titles that do not line up: untitled
        return {k: v for k, v in prop.items() if k != "enumNames"}
    rest = {k: v for k, v in prop.items() if k not in ("enum", "enumNames")}
    return {
        **rest,
        "oneOf": [
            {"const": value, "title": name} for value, name in zip(values, names, strict=True)
        ],
    }


def check_elicit_answer(
    revision: Revision, requested_schema: Any, result: JsonObject
) -> str | None:
    """Why an accepted `ElicitResult` cannot go to a `revision` server, or None when it can.

    Below the revision with rich enums, every value must be a single primitive of its property's
    type, in its `enum` when it has one, under a property the server asked for; the revision's
    result schema has no place for fractional numbers."""
    content = result.get("content")
    if revision.rich_enums or result.get("action") != "accept" or not isinstance(content, dict):
        return None
    properties = requested_schema.get("properties") if isinstance(requested_schema, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    for name, value in content.items():
        problem = _value_problem(properties.get(name), value)
        if problem is not None:
            return f"content[{name!r}] {problem} (the server speaks MCP {revision.version})"
    required = requested_schema.get("required") if isinstance(requested_schema, dict) else None
    missing = [n for n in (required if isinstance(required, list) else []) if n not in content]
    if missing:
        return (
            f"content lacks required {', '.join(map(repr, missing))} (the server speaks MCP "
            f"{revision.version})"
        )
    return None


def _value_problem(prop: Any, value: Any) -> str | None:
    if not isinstance(prop, dict):
        return "was not asked for"
    if isinstance(value, list):
        return "is a list; this revision takes single values only"
    kind = prop.get("type")
    allowed = _VALUE_TYPES.get(kind) if isinstance(kind, str) else None
    if (
        allowed is None
        or not isinstance(value, allowed)
        or (kind != "boolean" and isinstance(value, bool))
    ):
        return f"is not of type {kind}"
    if isinstance(value, float) and not value.is_integer():
        return "is a fractional number; this revision takes integers only"
    enum = prop.get("enum")
    if isinstance(enum, list) and value not in enum:
        return f"is not one of {', '.join(map(repr, enum))}"
    return None


def sampling_answer(revision: Revision, result: JsonObject) -> JsonObject | str:
    """A `CreateMessageResult` as a `revision` server takes it, or why it cannot be.

    Below the revision with tool use in sampling, `content` is one text, image or (where the
    revision has it) audio block; a list of exactly one such block is sent as that block."""
    if revision.sampling_tools:
        return result
    content = result.get("content")
    if isinstance(content, list):
        if len(content) != 1:
            return f"content holds {len(content)} blocks; MCP {revision.version} takes exactly one"
        content = content[0]
    kind = content.get("type") if isinstance(content, dict) else None
    allowed = _MEDIA_BLOCKS if revision.audio else _MEDIA_BLOCKS - {"audio"}
    if kind not in allowed:
        return f"content of type {kind!r} does not exist in MCP {revision.version} sampling results"
    return {**result, "content": content}


__all__ = [
    "PendingPush",
    "PushAnswer",
    "check_elicit_answer",
    "duplicate_id",
    "input_key",
    "input_response_to_legacy",
    "is_push",
    "legacy_push_to_input_request",
    "modern_requested_schema",
    "over_limit",
    "pending_push",
    "refusal",
    "sampling_answer",
    "unowned_push_answer",
]
