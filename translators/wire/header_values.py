"""HTTP header values of the modern transport (2026-07-28/basic/transports/streamable-http.mdx).

The Base64 sentinel codec (`=?base64?...?=`) shared by `Mcp-Name` and `Mcp-Param-*`, and the
`x-mcp-header` rules: which tool arguments a client mirrors into `Mcp-Param-<Name>` headers, and
the check that a `tools/call` carries exactly those headers with exactly those values. Pure: the
engine calls `check_param_headers` with the tool's cached `inputSchema`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from translators.wire.errors import HeaderMismatch

X_MCP_HEADER: Final = "x-mcp-header"
# RFC 9110 field values: visible ASCII, space and horizontal tab.
HEADER_SAFE: Final = re.compile(r"[\t\x20-\x7e]*")

_SENTINEL: Final = re.compile(r"=\?base64\?(?P<payload>.*)\?=", re.DOTALL)
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DECIMAL: Final = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_X_MCP_TYPES: Final = frozenset({"string", "integer", "boolean"})
_MAX_SAFE_INTEGER: Final = 2**53 - 1
_ECHO_LIMIT: Final = 80


def echo(value: Any) -> str:
    """A short repr of a client-supplied value for an error message."""
    text = repr(value)
    return text if len(text) <= _ECHO_LIMIT else text[: _ECHO_LIMIT - 3] + "..."


def decode_header_value(value: str, *, header: str = "header") -> str:
    """Decode a Base64 sentinel value `=?base64?...?=`; any other value is returned as is.

    A sentinel with non-canonical Base64 or bad UTF-8 raises HeaderMismatch naming `header`."""
    match = _SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            raise ValueError("non-canonical Base64")
        return decoded.decode("utf-8")
    except (binascii.Error, ValueError):
        raise HeaderMismatch(
            f"Header mismatch: the {header} header carries a malformed Base64 sentinel value"
        ) from None


_SUBSCHEMA: Final = frozenset(
    {
        "items",
        "additionalItems",
        "contains",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMA_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SUBSCHEMA_MAPS: Final = frozenset(
    {"patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
)


def _subschemas(keyword: str, value: Any) -> list[Any]:
    """The schemas inside one applicator keyword (JSON Schema 2020-12 and draft-07); data is
    skipped."""
    if keyword in _SUBSCHEMA and isinstance(value, dict):
        return [value]
    if keyword in _SUBSCHEMA_LISTS and isinstance(value, list):
        return value
    if keyword in _SUBSCHEMA_MAPS and isinstance(value, dict):
        return list(value.values())
    return []


def _annotations(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, Mapping[str, Any]]]:
    """Every schema position with an `x-mcp-header` key, with its pure `properties` path (or
    None)."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        if X_MCP_HEADER in node:
            yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(
                    ((*path, key) if path is not None else None, sub) for key, sub in value.items()
                )
            else:
                stack.extend((None, sub) for sub in _subschemas(keyword, value))


def x_mcp_header_problem(input_schema: Any) -> str | None:
    """Why a tool's `x-mcp-header` annotations are invalid (clients drop such tools), or None."""
    seen: dict[str, str] = {}
    for path, node in _annotations(input_schema):
        if not path:
            return (
                f"{X_MCP_HEADER} is only allowed on a property reached through a chain of "
                "properties"
            )
        where = ".".join(path)
        token = node[X_MCP_HEADER]
        if not isinstance(token, str) or _TOKEN.fullmatch(token) is None:
            return f"property {where!r}: {X_MCP_HEADER} must be a non-empty header-name token"
        if node.get("type") not in _X_MCP_TYPES:
            return (
                f"property {where!r}: {X_MCP_HEADER} is only allowed on string, integer or "
                "boolean types"
            )
        if token.lower() in seen:
            return (
                f"property {where!r}: {X_MCP_HEADER} {token!r} duplicates property "
                f"{seen[token.lower()]!r}"
            )
        seen[token.lower()] = where
    return None


def _value_at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _rendered(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int) and abs(value) <= _MAX_SAFE_INTEGER:
        return str(value)
    return None


def _is_integral(value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()
    )


def _matches(declared_type: Any, value: Any, decoded: str) -> bool:
    if declared_type == "integer" and _is_integral(value) and _DECIMAL.fullmatch(decoded):
        whole, _, fraction = decoded.partition(".")
        return set(fraction) <= {"0"} and int(whole) == int(value)
    return decoded == _rendered(value)


def _check_one_param(
    title: str, argument: str, schema: Mapping[str, Any], value: Any, raw: str | None
) -> None:
    """One annotated argument against its header; a value with no header form needs no header."""
    mirrored = value is not None and (_rendered(value) is not None or _is_integral(value))
    if not mirrored:
        if raw is not None:
            raise HeaderMismatch(
                f"Header mismatch: {title} header is present without argument {argument!r}"
            )
        return
    if raw is None:
        raise HeaderMismatch(
            f"Header mismatch: {title} header is missing for argument {argument!r}"
        )
    if HEADER_SAFE.fullmatch(raw) is None:
        raise HeaderMismatch(f"Header mismatch: the {title} header contains invalid characters")
    decoded = decode_header_value(raw, header=title)
    if not _matches(schema.get("type"), value, decoded):
        raise HeaderMismatch(
            f"Header mismatch: {title} header value {echo(decoded)} does not match argument "
            f"{argument!r}"
        )


def check_param_headers(
    input_schema: Mapping[str, Any], arguments: Mapping[str, Any], param_headers: Mapping[str, str]
) -> None:
    """Every `x-mcp-header` argument of a `tools/call` must be mirrored exactly in its header.

    `param_headers` is `ModernRoute.param_headers` (lower-cased names, values still encoded).
    A schema with invalid annotations validates nothing: conforming clients drop such tools."""
    if x_mcp_header_problem(input_schema) is not None:
        return
    for path, node in _annotations(input_schema):
        assert path is not None  # guaranteed by x_mcp_header_problem
        token: str = node[X_MCP_HEADER]
        title = f"Mcp-Param-{token}"
        raw = param_headers.get(token.lower())
        _check_one_param(title, ".".join(path), node, _value_at(arguments, path), raw)


def encode_header_value(value: str) -> str:
    """`value` for an `Mcp-Name` or `Mcp-Param-*` header: as is when it is plain printable ASCII,
    else the Base64 sentinel form (2026-07-28 Streamable HTTP, "Value Encoding")."""
    plain = (
        value.isascii()
        and all(" " <= ch <= "~" or ch == "\t" for ch in value)
        and value == value.strip()
        and not (value.startswith("=?base64?") and value.endswith("?="))
    )
    if plain:
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def param_headers_for(
    input_schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> dict[str, str]:
    """The `Mcp-Param-*` headers a client sends with a `tools/call` of a tool with this schema
    (the inverse of `check_param_headers`); none when the annotations are invalid."""
    if x_mcp_header_problem(input_schema) is not None:
        return {}
    headers: dict[str, str] = {}
    for path, node in _annotations(input_schema):
        assert path is not None  # guaranteed by x_mcp_header_problem
        rendered = _rendered(_value_at(arguments, path))
        if rendered is not None:
            headers[f"Mcp-Param-{node[X_MCP_HEADER]}"] = encode_header_value(rendered)
    return headers


__all__ = [
    "HEADER_SAFE",
    "X_MCP_HEADER",
    "check_param_headers",
    "decode_header_value",
    "echo",
    "encode_header_value",
    "param_headers_for",
    "x_mcp_header_problem",
]
