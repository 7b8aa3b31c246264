"""The validation ladder for one modern request (2026-07-28/basic/index.mdx and
basic/transports/streamable-http.mdx; docs/decisions.md § 1).

Pure: bytes and dictionaries in, a `ModernRoute` out or a `ClientFault` raised. The rungs run in
this order, first failure wins:

1. body: valid JSON within the depth limit, one JSON-RPC 2.0 object (`parse_body`);
2. method: one the bridge serves; legacy-only and unknown methods are -32601;
3. `_meta`: protocol version (string) and client capabilities (object) present;
4. HTTP only (`check_headers`): `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` present and
   equal to the body. It runs before the version rung so a client that disagrees with itself is
   told so rather than told the body's version is unsupported (the conformance suite checks this);
5. version: one of `eras.MODERN_VERSIONS`;
6. `logLevel` one of the eight syslog levels; progress token a string or an integer;
7. the basic shape of each method's params.

`check_param_headers` (x-mcp-header, § 8.4, in `translators.wire.header_values`, re-exported here)
needs the tool's `inputSchema`, which only the engine has, so the engine calls it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from translators.protocol import eras
from translators.wire import fast_json
from translators.wire.errors import (
    HeaderMismatch,
    InvalidMeta,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    UnsupportedVersion,
)
from translators.wire.header_values import (
    HEADER_SAFE,
    X_MCP_HEADER,
    check_param_headers,
    decode_header_value,
    echo,
    x_mcp_header_problem,
)
from translators.wire.jsonrpc import JsonObject

RequestId = int | str

PROTOCOL_VERSION_HEADER: Final = "mcp-protocol-version"
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
PARAM_HEADER_PREFIX: Final = "mcp-param-"
ROUTING_HEADERS: Final[frozenset[str]] = frozenset(
    {PROTOCOL_VERSION_HEADER, METHOD_HEADER, NAME_HEADER}
)
# Spelling used in messages, as the spec writes them.
HEADER_TITLES: Final[dict[str, str]] = {
    PROTOCOL_VERSION_HEADER: "MCP-Protocol-Version",
    METHOD_HEADER: "Mcp-Method",
    NAME_HEADER: "Mcp-Name",
}
_OWS: Final = " \t"


class ModernRoute(NamedTuple):
    """A modern request that passed every rung: what the front needs to hand it to the engine.

    A named tuple, not a frozen dataclass: every request builds one, and a frozen dataclass sets
    each field through `object.__setattr__` (about three times the construction cost)."""

    front_request_id: RequestId
    method: str
    params: JsonObject
    protocol_version: str
    client_capabilities: JsonObject
    client_info: Any = None
    log_level: str | None = None
    progress_token: RequestId | None = None
    param_headers: Mapping[str, str] = MappingProxyType({})


# --- rung 1: the body -------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:32]} is out of range")
    return value


def _strict_loads(raw: bytes) -> Any:
    return json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)


def decode_json(raw: bytes, max_depth: int) -> Any:
    """Decode a POST body as JSON, refusing non-standard constants, numbers that overflow to
    infinity (they could not be sent on) and nesting beyond `max_depth`."""
    try:
        value = fast_json.loads(raw, _strict_loads)
    except RecursionError:
        raise ParseError(
            f"Parse error: JSON nesting exceeds the limit of {max_depth} levels"
        ) from None
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, oversized integer literals
        raise ParseError(f"Parse error: body is not valid JSON ({exc})") from None
    if raw.count(b"{") + raw.count(b"[") > max_depth and _depth_exceeds(value, max_depth):
        raise ParseError(f"Parse error: JSON nesting exceeds the limit of {max_depth} levels")
    return value


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > max_depth:
                return True
            stack.extend(
                (child, depth + 1) for child in (node.values() if isinstance(node, dict) else node)
            )
    return False


def message_id(message: Any) -> RequestId | None:
    """The request id to echo in an error reply: a string or integer id, else None."""
    if not isinstance(message, dict):
        return None
    value = message.get("id")
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return value


def check_envelope(message: Any) -> JsonObject:
    """Check the JSON-RPC 2.0 shape of one request or notification; return it as a dict."""
    if isinstance(message, list):
        raise InvalidRequest(
            "Invalid request: batches are not supported; send one JSON-RPC message per POST"
        )
    if not isinstance(message, dict):
        raise InvalidRequest("Invalid request: the body must be a JSON-RPC 2.0 request object")
    if message.get("jsonrpc") != "2.0":
        raise InvalidRequest('Invalid request: "jsonrpc" must be "2.0"')
    if "method" not in message and ("result" in message or "error" in message):
        raise InvalidRequest(
            "Invalid request: clients must not send JSON-RPC responses to this server"
        )
    if "id" in message and message_id(message) is None:
        raise InvalidRequest(
            'Invalid request: "id" must be a string or an integer (never null or boolean)'
        )
    if not isinstance(message.get("method"), str) or not message["method"]:
        raise InvalidRequest('Invalid request: "method" must be a non-empty string')
    return message


def parse_body(raw: bytes, max_depth: int) -> JsonObject:
    """Decode and shape-check one POSTed JSON-RPC message (ParseError / InvalidRequest)."""
    return check_envelope(decode_json(raw, max_depth))


# --- header values ----------------------------------------------------------------------------


def fold_headers(pairs: Collection[tuple[str, str]]) -> dict[str, str]:
    """Lower-case names, trim values; a repeated routing header is a HeaderMismatch.

    Other repeated headers are combined with ", " (RFC 9110 § 5.3), so a repeated `Mcp-Param-*`
    header can never match a body value."""
    folded = {name.lower(): raw.strip(_OWS) for name, raw in pairs}
    if len(folded) == len(pairs):
        return folded  # no name repeated (the usual request): nothing to combine or refuse
    folded = {}
    for name, raw in pairs:
        key, value = name.lower(), raw.strip(_OWS)
        if key in folded and key in ROUTING_HEADERS:
            raise HeaderMismatch(
                f"Header mismatch: the {HEADER_TITLES[key]} header appears more than once"
            )
        folded[key] = f"{folded[key]}, {value}" if key in folded else value
    return folded


def _header(headers: Mapping[str, str], key: str) -> str:
    title = HEADER_TITLES[key]
    value = headers.get(key)
    if value is None:
        raise HeaderMismatch(f"Header mismatch: the required {title} header is missing")
    if HEADER_SAFE.fullmatch(value) is None:
        raise HeaderMismatch(f"Header mismatch: the {title} header contains invalid characters")
    return value


def _require_equal(title: str, header_value: str, body_value: Any, where: str) -> None:
    if header_value != body_value:
        raise HeaderMismatch(
            f"Header mismatch: {title} header value {echo(header_value)} does not match "
            f"body value {echo(body_value)} ({where})"
        )


def check_headers(message: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """HTTP only: the routing headers must be present and equal the body (`headers` folded)."""
    meta = _meta_of(message)
    version = _header(headers, PROTOCOL_VERSION_HEADER)
    _require_equal(
        "MCP-Protocol-Version", version, meta.get(eras.META_PROTOCOL_VERSION), _VERSION_WHERE
    )
    method = message["method"]
    _require_equal("Mcp-Method", _header(headers, METHOD_HEADER), method, "method")
    name_key = eras.NAMED_METHODS.get(method)
    params = message.get("params")
    body_name = params.get(name_key) if name_key is not None and isinstance(params, dict) else None
    if isinstance(body_name, str):
        name = decode_header_value(_header(headers, NAME_HEADER), header="Mcp-Name")
        if name != body_name:
            _require_equal("Mcp-Name", name, body_name, f"params.{name_key}")


def param_headers_of(headers: Mapping[str, str]) -> dict[str, str]:
    """The `Mcp-Param-*` headers by lower-cased name without the prefix, values still encoded."""
    size = len(PARAM_HEADER_PREFIX)
    return {
        key[size:]: value for key, value in headers.items() if key.startswith(PARAM_HEADER_PREFIX)
    }


# --- rungs 2-7 ----------------------------------------------------------------------------------


def _check_method(method: str) -> None:
    supported = ", ".join(eras.MODERN_VERSIONS)
    if method == eras.INITIALIZE:
        raise MethodNotFound(
            f"Method not found: initialize does not exist in MCP {supported}; this server is "
            "stateless "
            f"and supports protocol versions {supported} (send them in params._meta on every "
            "request)",
            {"supported": list(eras.MODERN_VERSIONS)},
        )
    if method in eras.LEGACY_ONLY_METHODS:
        raise MethodNotFound(f"Method not found: {method} was removed in MCP {supported}")
    if method not in eras.MODERN_METHODS:
        raise MethodNotFound(f"Method not found: {method}")


_REQUIRED_META: Final = (eras.META_PROTOCOL_VERSION, eras.META_CLIENT_CAPABILITIES)
_VERSION_WHERE: Final = f"params._meta[{eras.META_PROTOCOL_VERSION!r}]"


def _meta_of(message: Mapping[str, Any]) -> JsonObject:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def _check_meta(message: Mapping[str, Any]) -> JsonObject:
    params = message.get("params")
    if not isinstance(params, dict):
        raise InvalidMeta("Invalid params: params must be an object carrying _meta")
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidMeta(
            f"Invalid params: params._meta is required and must carry {eras.META_PROTOCOL_VERSION} "
            f"and {eras.META_CLIENT_CAPABILITIES}"
        )
    if eras.META_PROTOCOL_VERSION not in meta or eras.META_CLIENT_CAPABILITIES not in meta:
        missing = [key for key in _REQUIRED_META if key not in meta]
        raise InvalidMeta(
            f"Invalid params: params._meta is missing the required key(s) {', '.join(missing)}"
        )
    if not isinstance(meta[eras.META_PROTOCOL_VERSION], str):
        raise InvalidMeta(
            f"Invalid params: params._meta.{eras.META_PROTOCOL_VERSION} must be a string"
        )
    if not isinstance(meta[eras.META_CLIENT_CAPABILITIES], dict):
        raise InvalidMeta(
            f"Invalid params: params._meta.{eras.META_CLIENT_CAPABILITIES} must be an object"
        )
    return meta


def _check_optional_meta(meta: Mapping[str, Any]) -> None:
    level = meta.get(eras.META_LOG_LEVEL)
    if eras.META_LOG_LEVEL in meta and level not in eras.LOG_LEVELS:
        raise InvalidMeta(
            f"Invalid params: params._meta.{eras.META_LOG_LEVEL} must be one of "
            f"{', '.join(eras.LOG_LEVELS)}"
        )
    token = meta.get(eras.META_PROGRESS_TOKEN)
    if eras.META_PROGRESS_TOKEN in meta and (
        isinstance(token, bool) or not isinstance(token, int | str)
    ):
        raise InvalidParams(
            "Invalid params: params._meta.progressToken must be a string or an integer"
        )


_MRTR_FIELDS: Final = (("inputResponses", dict, "an object"), ("requestState", str, "a string"))
# (field, type, phrase, required) per method: only the shape the bridge itself relies on.
_PARAM_SHAPES: Final[dict[str, tuple[tuple[str, type, str, bool], ...]]] = {
    eras.TOOLS_CALL: (("name", str, "a string", True), ("arguments", dict, "an object", False)),
    eras.PROMPTS_GET: (("name", str, "a string", True), ("arguments", dict, "an object", False)),
    eras.RESOURCES_READ: (("uri", str, "a string", True),),
    eras.COMPLETION_COMPLETE: (
        ("ref", dict, "an object", True),
        ("argument", dict, "an object", True),
    ),
    eras.SUBSCRIPTIONS_LISTEN: (("notifications", dict, "an object", True),),
    **{method: (("cursor", str, "a string", False),) for method in eras.LIST_METHODS},
}


# with the MRTR fields of the methods that take them, once
_FULL_SHAPES: Final = {
    method: _PARAM_SHAPES.get(method, ())
    + tuple((name, kind, phrase, False) for name, kind, phrase in _MRTR_FIELDS)
    for method in eras.MRTR_METHODS
}


def _check_params(method: str, params: Mapping[str, Any]) -> None:
    shape = _FULL_SHAPES.get(method) or _PARAM_SHAPES.get(method, ())
    for name, kind, phrase, required in shape:
        if name not in params:
            if required:
                raise InvalidParams(f"Invalid params: {method} requires params.{name} ({phrase})")
            continue
        if not isinstance(params[name], kind):
            raise InvalidParams(f"Invalid params: params.{name} must be {phrase}")


def validate_request(message: Mapping[str, Any], headers: Mapping[str, str] | None) -> ModernRoute:
    """Run the ladder over one request (already through `parse_body`, with an id).

    `headers` are the folded HTTP headers (`fold_headers`), or None on transports without them."""
    method: str = message["method"]
    _check_method(method)
    meta = _check_meta(message)
    if headers is not None:
        check_headers(message, headers)
    version = meta[eras.META_PROTOCOL_VERSION]
    if version not in eras.MODERN_VERSIONS:
        raise UnsupportedVersion(version, eras.MODERN_VERSIONS)
    _check_optional_meta(meta)
    params: JsonObject = message["params"]
    _check_params(method, params)
    front_request_id = message_id(message)
    if front_request_id is None:
        raise InvalidRequest('Invalid request: "id" must be a string or an integer')
    return ModernRoute(
        front_request_id=front_request_id,
        method=method,
        params=params,
        protocol_version=version,
        client_capabilities=meta[eras.META_CLIENT_CAPABILITIES],
        client_info=meta.get(eras.META_CLIENT_INFO),
        log_level=meta.get(eras.META_LOG_LEVEL),
        progress_token=meta.get(eras.META_PROGRESS_TOKEN),
        param_headers=param_headers_of(headers) if headers is not None else {},
    )


__all__ = [
    "HEADER_TITLES",
    "METHOD_HEADER",
    "NAME_HEADER",
    "PARAM_HEADER_PREFIX",
    "PROTOCOL_VERSION_HEADER",
    "ROUTING_HEADERS",
    "X_MCP_HEADER",
    "ModernRoute",
    "check_envelope",
    "check_headers",
    "check_param_headers",
    "decode_header_value",
    "decode_json",
    "fold_headers",
    "message_id",
    "param_headers_of",
    "parse_body",
    "validate_request",
    "x_mcp_header_problem",
]
