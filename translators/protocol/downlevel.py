"""What changes when the upstream session speaks an older revision than the newest legacy one.

Both directions are driven by the `Revision` feature table (docs/revisions.md):
* up: an answer to a push must be valid in the session's revision (`check_elicit_answer`,
  `sampling_answer`); request params a revision lacks are left out (`request_params`);
* down: what an older server sends is put in the modern form (`modern_requested_schema`).
An answer that cannot be expressed is refused with the reason as a string; the caller turns it into
the client's error, so nothing invalid reaches the server.
"""

from __future__ import annotations

from typing import Any, Final

from translators.protocol.eras import COMPLETION_COMPLETE
from translators.protocol.revisions import Revision
from translators.wire.jsonrpc import JsonObject

_MEDIA_BLOCKS: Final = frozenset({"text", "image", "audio"})
_VALUE_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int, float),
    "number": (int, float),
}


def request_params(revision: Revision, method: str, params: JsonObject) -> JsonObject:
    """`params` without the fields `revision` does not define for `method`."""
    if method == COMPLETION_COMPLETE and not revision.completion_context and "context" in params:
        return {k: v for k, v in params.items() if k != "context"}
    return params


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


__all__ = ["check_elicit_answer", "modern_requested_schema", "request_params", "sampling_answer"]
