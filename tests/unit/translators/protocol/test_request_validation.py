"""The modern validation ladder: body, method, _meta, headers, version, params, x-mcp-header."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from translators.protocol.eras import (
    COMPLETION_COMPLETE,
    LEGACY_ONLY_METHODS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    MODERN_METHODS,
    MODERN_VERSION,
    MODERN_VERSIONS,
    PROMPTS_GET,
    RESOURCES_READ,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
    TOOLS_LIST,
)
from translators.protocol.request_validation import (
    ModernRoute,
    check_param_headers,
    decode_header_value,
    decode_json,
    fold_headers,
    message_id,
    parse_body,
    validate_request,
    x_mcp_header_problem,
)
from translators.wire.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    ClientFault,
    HeaderMismatch,
    InvalidMeta,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    UnsupportedVersion,
)

DEPTH = 64
UNSUPPORTED = "v999.0.0"
NO_RESPONSES = "Invalid request: clients must not send JSON-RPC responses to this server"
BAD_ID = 'Invalid request: "id" must be a string or an integer (never null or boolean)'


def meta(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}, **(extra or {})}


def request(
    method: str = TOOLS_LIST,
    params: dict[str, Any] | None = None,
    meta_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body_params = {"_meta": meta(meta_extra)} if params is None else params
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": body_params}


def call(name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    return request(TOOLS_CALL, {"name": name, "arguments": {}, "_meta": meta(), **extra})


def headers_for(message: dict[str, Any], **overrides: str | None) -> dict[str, str]:
    """The folded headers a conforming client sends for `message`, with some replaced or removed."""
    params = message.get("params") or {}
    version = (params.get("_meta") or {}).get(META_PROTOCOL_VERSION, MODERN_VERSION)
    headers = {"mcp-protocol-version": version, "mcp-method": message["method"]}
    name = params.get("uri") if message["method"] == RESOURCES_READ else params.get("name")
    if isinstance(name, str):
        headers["mcp-name"] = name
    for key, value in overrides.items():
        header = key.replace("_", "-")
        if value is None:
            headers.pop(header, None)
        else:
            headers[header] = value
    return headers


def rejects(
    exc_type: type[ClientFault], message: dict[str, Any], headers: dict[str, str] | None
) -> ClientFault:
    with pytest.raises(exc_type) as caught:
        validate_request(message, headers)
    assert type(caught.value) is exc_type
    return caught.value


# --- the body ----------------------------------------------------------------------------------


def test_parse_body_returns_a_request() -> None:
    """A well-formed request comes back as the decoded object."""
    body = request()
    assert parse_body(json.dumps(body).encode(), DEPTH) == body


def test_parse_body_accepts_a_notification() -> None:
    """A message without an id is a notification and passes the envelope check."""
    assert parse_body(b'{"jsonrpc":"2.0","method":"notifications/cancelled"}', DEPTH)["method"]


@pytest.mark.parametrize(
    "raw",
    [b"{", b"", b"\xff\xfe", b'{"jsonrpc":"2.0","id":NaN}', b'{"a":Infinity}', b"1" * 5000],
)
def test_parse_body_rejects_invalid_json(raw: bytes) -> None:
    """Anything that is not standard JSON is a -32700 naming the problem."""
    with pytest.raises(ParseError) as caught:
        parse_body(raw, DEPTH)
    assert caught.value.code == PARSE_ERROR
    assert caught.value.http_status == 400
    assert caught.value.message.startswith("Parse error: body is not valid JSON (")


@pytest.mark.parametrize("levels", [DEPTH + 1, 100_000])
def test_parse_body_rejects_nesting_beyond_the_limit(levels: int) -> None:
    """Nesting deeper than the limit is refused, however deep it goes."""
    with pytest.raises(ParseError) as caught:
        parse_body(b"[" * levels + b"]" * levels, DEPTH)
    assert caught.value.message == f"Parse error: JSON nesting exceeds the limit of {DEPTH} levels"


def test_parse_body_accepts_nesting_at_the_limit() -> None:
    """A request nested exactly to the limit passes the depth check."""
    nested: Any = {}
    for _ in range(DEPTH - 3):  # the request object, params and _meta take three levels
        nested = {"x": nested}
    body = request(params={"_meta": meta(), "deep": nested})
    assert parse_body(json.dumps(body).encode(), DEPTH) == body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            [request()],
            "Invalid request: batches are not supported; send one JSON-RPC message per POST",
        ),
        ("tools/list", "Invalid request: the body must be a JSON-RPC 2.0 request object"),
        ({"id": 1, "method": "tools/list"}, 'Invalid request: "jsonrpc" must be "2.0"'),
        ({"jsonrpc": "1.0", "id": 1, "method": "m"}, 'Invalid request: "jsonrpc" must be "2.0"'),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, NO_RESPONSES),
        ({"jsonrpc": "2.0", "id": 1, "error": {}}, NO_RESPONSES),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": {}, "method": "m"}, BAD_ID),
        ({"jsonrpc": "2.0", "id": 1}, 'Invalid request: "method" must be a non-empty string'),
        (
            {"jsonrpc": "2.0", "id": 1, "method": 5},
            'Invalid request: "method" must be a non-empty string',
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": ""},
            'Invalid request: "method" must be a non-empty string',
        ),
    ],
)
def test_parse_body_rejects_malformed_envelopes(body: Any, message: str) -> None:
    """Every malformed JSON-RPC envelope is a -32600 that says what is wrong."""
    with pytest.raises(InvalidRequest) as caught:
        parse_body(json.dumps(body).encode(), DEPTH)
    assert (caught.value.code, caught.value.http_status, caught.value.message) == (
        INVALID_REQUEST,
        400,
        message,
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"id": 3}, 3),
        ({"id": "a"}, "a"),
        ({"id": None}, None),
        ({"id": True}, None),
        ({"id": 2.0}, None),
        ({}, None),
        ([{"id": 1}], None),
        ("x", None),
    ],
)
def test_message_id_returns_only_usable_ids(body: Any, expected: Any) -> None:
    """Only string and integer ids are echoed in error replies."""
    assert message_id(body) == expected


# --- header values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [
        ("us-west1", "us-west1"),
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"),
        ("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?="),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),  # no suffix: a literal value
        ("SGVsbG8=?=", "SGVsbG8=?="),  # no prefix: a literal value
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),  # markers are case-sensitive
        ("=?base64??=", ""),
    ],
)
def test_decode_header_value_follows_the_spec_examples(encoded: str, decoded: str) -> None:
    """The spec's encoding table decodes; values without the exact sentinel are literal."""
    assert decode_header_value(encoded) == decoded


@pytest.mark.parametrize(
    "encoded",
    [
        "=?base64?SGVsbG8?=",
        "=?base64?SGVs!!!bG8=?=",
        "=?base64?QR==?=",
        "=?base64?/w==?=",
        "=?base64?SGVs bG8=?=",
    ],
)
def test_decode_header_value_rejects_malformed_sentinels(encoded: str) -> None:
    """Bad padding, bad characters, non-canonical Base64 and bad UTF-8 are -32020."""
    with pytest.raises(HeaderMismatch) as caught:
        decode_header_value(encoded, header="Mcp-Name")
    assert (
        caught.value.message
        == "Header mismatch: the Mcp-Name header carries a malformed Base64 sentinel value"
    )


def test_fold_headers_lowers_names_and_trims_values() -> None:
    """Header names compare case-insensitively and surrounding whitespace is dropped."""
    assert fold_headers([("MCP-METHOD", "  tools/list\t"), ("Mcp-Name", "x")]) == {
        "mcp-method": "tools/list",
        "mcp-name": "x",
    }


def test_fold_headers_rejects_a_repeated_routing_header() -> None:
    """Two Mcp-Method lines could be read differently by two hops, so they are refused."""
    with pytest.raises(HeaderMismatch) as caught:
        fold_headers([("Mcp-Method", "tools/list"), ("mcp-method", "tools/list")])
    assert caught.value.message == "Header mismatch: the Mcp-Method header appears more than once"


def test_fold_headers_combines_other_repeated_headers() -> None:
    """Other repeated headers are joined as RFC 9110 allows."""
    assert fold_headers([("Mcp-Param-A", "1"), ("mcp-param-a", "2")]) == {"mcp-param-a": "1, 2"}


# --- the ladder ---------------------------------------------------------------------------------


def test_validate_request_returns_the_route() -> None:
    """A valid call yields every field the front and the engine need."""
    extra = {
        META_LOG_LEVEL: "info",
        META_PROGRESS_TOKEN: "p1",
        META_CLIENT_INFO: {"name": "c", "version": "1"},
    }
    message = request(TOOLS_CALL, {"name": "t", "arguments": {"a": 1}, "_meta": meta(extra)})
    headers = {**headers_for(message), "mcp-param-region": "eu", "accept": "*/*"}
    route = validate_request(message, headers)
    assert route == ModernRoute(
        front_request_id=7,
        method=TOOLS_CALL,
        params=message["params"],
        protocol_version=MODERN_VERSION,
        client_capabilities={},
        client_info={"name": "c", "version": "1"},
        log_level="info",
        progress_token="p1",
        param_headers={"region": "eu"},
    )


@pytest.mark.parametrize("method", sorted(MODERN_METHODS))
def test_validate_request_accepts_every_modern_method(method: str) -> None:
    """Each method the bridge serves passes with its minimal params."""
    minimal: dict[str, dict[str, Any]] = {
        TOOLS_CALL: {"name": "t"},
        PROMPTS_GET: {"name": "p"},
        RESOURCES_READ: {"uri": "file:///a"},
        COMPLETION_COMPLETE: {
            "ref": {"type": "ref/prompt", "name": "p"},
            "argument": {"name": "a", "value": ""},
        },
        SUBSCRIPTIONS_LISTEN: {"notifications": {"toolsListChanged": True}},
    }
    message = request(method, {**minimal.get(method, {}), "_meta": meta()})
    assert validate_request(message, headers_for(message)).method == method


def test_initialize_names_the_supported_versions() -> None:
    """A legacy client's initialize is -32601 (404) telling it which versions this server speaks."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25"},
    }
    fault = rejects(MethodNotFound, message, {})
    assert (fault.code, fault.http_status) == (METHOD_NOT_FOUND, 404)
    assert fault.data == {"supported": list(MODERN_VERSIONS)}
    assert fault.message == (
        f"Method not found: initialize does not exist in MCP {MODERN_VERSION}; this server is "
        "stateless "
        f"and supports protocol versions {MODERN_VERSION} (send them in params._meta on every "
        "request)"
    )


@pytest.mark.parametrize("method", sorted(LEGACY_ONLY_METHODS - {"initialize"}))
def test_removed_methods_are_method_not_found(method: str) -> None:
    """ping, logging/setLevel, resources/(un)subscribe and tasks/* are -32601 even with
    valid _meta."""
    message = request(method)
    fault = rejects(MethodNotFound, message, headers_for(message))
    assert fault.message == f"Method not found: {method} was removed in MCP {MODERN_VERSION}"


def test_unknown_methods_are_method_not_found() -> None:
    """A method nobody defines is -32601 with HTTP 404."""
    message = request("unknown/method")
    fault = rejects(MethodNotFound, message, headers_for(message))
    assert (fault.message, fault.http_status) == ("Method not found: unknown/method", 404)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (None, "Invalid params: params must be an object carrying _meta"),
        ([], "Invalid params: params must be an object carrying _meta"),
        (
            {},
            f"Invalid params: params._meta is required and must carry {META_PROTOCOL_VERSION} "
            f"and {META_CLIENT_CAPABILITIES}",
        ),
        (
            {"_meta": {META_CLIENT_CAPABILITIES: {}}},
            f"Invalid params: params._meta is missing the required key(s) {META_PROTOCOL_VERSION}",
        ),
        (
            {"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}},
            "Invalid params: params._meta is missing the required key(s) "
            f"{META_CLIENT_CAPABILITIES}",
        ),
        (
            {"_meta": {}},
            f"Invalid params: params._meta is missing the required key(s) {META_PROTOCOL_VERSION}, "
            f"{META_CLIENT_CAPABILITIES}",
        ),
        (
            {"_meta": {META_PROTOCOL_VERSION: 20260728, META_CLIENT_CAPABILITIES: {}}},
            f"Invalid params: params._meta.{META_PROTOCOL_VERSION} must be a string",
        ),
        (
            {"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: []}},
            f"Invalid params: params._meta.{META_CLIENT_CAPABILITIES} must be an object",
        ),
    ],
)
def test_missing_meta_is_invalid_params_with_400(params: Any, message: str) -> None:
    """A missing or malformed required _meta field is -32602 with HTTP 400, before any
    header check."""
    body = {"jsonrpc": "2.0", "id": 1, "method": TOOLS_LIST, "params": params}
    fault = rejects(
        InvalidMeta, body, {"mcp-protocol-version": MODERN_VERSION, "mcp-method": TOOLS_LIST}
    )
    assert (fault.code, fault.http_status, fault.message) == (INVALID_PARAMS, 400, message)


def test_client_info_is_optional() -> None:
    """clientInfo is a SHOULD: a request without it is served."""
    message = request()
    assert validate_request(message, headers_for(message)).client_info is None


def test_unsupported_version_lists_the_supported_ones() -> None:
    """A version the bridge does not serve is -32022 (400) with data.supported and
    data.requested."""
    message = request(meta_extra={META_PROTOCOL_VERSION: UNSUPPORTED})
    fault = rejects(UnsupportedVersion, message, headers_for(message))
    assert (fault.code, fault.http_status) == (UNSUPPORTED_VERSION, 400)
    assert fault.data == {"supported": list(MODERN_VERSIONS), "requested": UNSUPPORTED}


def test_header_and_body_disagreeing_on_version_is_a_header_mismatch() -> None:
    """A client whose header and body disagree is told so, not told its body version is
    unsupported."""
    message = request(meta_extra={META_PROTOCOL_VERSION: UNSUPPORTED})
    fault = rejects(
        HeaderMismatch, message, headers_for(message, mcp_protocol_version=MODERN_VERSION)
    )
    assert (fault.code, fault.http_status) == (HEADER_MISMATCH, 400)
    assert fault.message == (
        f"Header mismatch: MCP-Protocol-Version header value {MODERN_VERSION!r} does not match "
        "body value "
        f"{UNSUPPORTED!r} (params._meta[{META_PROTOCOL_VERSION!r}])"
    )


def test_stdio_skips_the_header_rung() -> None:
    """Without headers (stdio) a request is validated on its body alone."""
    assert validate_request(call(), None).method == TOOLS_CALL
    fault = rejects(
        UnsupportedVersion, request(meta_extra={META_PROTOCOL_VERSION: UNSUPPORTED}), None
    )
    assert fault.data["requested"] == UNSUPPORTED


@pytest.mark.parametrize(
    ("message", "overrides", "expected"),
    [
        (
            request(),
            {"mcp_protocol_version": None},
            "Header mismatch: the required MCP-Protocol-Version header is missing",
        ),
        (
            request(),
            {"mcp_method": None},
            "Header mismatch: the required Mcp-Method header is missing",
        ),
        (
            request(),
            {"mcp_method": "prompts/list"},
            "Header mismatch: Mcp-Method header value 'prompts/list' does not match body value "
            "'tools/list' (method)",
        ),
        (
            request(),
            {"mcp_method": "TOOLS/LIST"},
            "Header mismatch: Mcp-Method header value 'TOOLS/LIST' does not match body value "
            "'tools/list' (method)",
        ),
        (
            request(),
            {"mcp_method": "tools/listé"},
            "Header mismatch: the Mcp-Method header contains invalid characters",
        ),
        (call(), {"mcp_name": None}, "Header mismatch: the required Mcp-Name header is missing"),
        (
            call("bar"),
            {"mcp_name": "foo"},
            "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar' "
            "(params.name)",
        ),
        (
            call(),
            {"mcp_name": "=?base64?Z2V0?=?="},
            "Header mismatch: the Mcp-Name header carries a malformed Base64 sentinel value",
        ),
        (
            call(),
            {"mcp_name": "get\x00weather"},
            "Header mismatch: the Mcp-Name header contains invalid characters",
        ),
        (
            request(RESOURCES_READ, {"uri": "file:///a", "_meta": meta()}),
            {"mcp_name": "file:///b"},
            "Header mismatch: Mcp-Name header value 'file:///b' does not match body value "
            "'file:///a' (params.uri)",
        ),
    ],
)
def test_header_mismatches_say_what_differs(
    message: dict[str, Any], overrides: dict[str, Any], expected: str
) -> None:
    """A missing, mismatched or malformed routing header is -32020 (400) with a precise message."""
    fault = rejects(HeaderMismatch, message, headers_for(message, **overrides))
    assert (fault.code, fault.http_status, fault.message) == (HEADER_MISMATCH, 400, expected)


def test_mcp_name_is_decoded_and_trimmed_before_comparing() -> None:
    """A Base64-encoded name and a name with surrounding whitespace both match."""
    name = "météo tool"
    encoded = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    assert (
        validate_request(call(name), headers_for(call(name), mcp_name=encoded)).method == TOOLS_CALL
    )
    folded = fold_headers(
        [
            ("MCP-Protocol-Version", MODERN_VERSION),
            ("mcp-method", TOOLS_CALL),
            ("MCP-NAME", "  t  "),
        ]
    )
    assert validate_request(call("t"), folded).method == TOOLS_CALL


def test_mcp_name_is_not_required_for_unnamed_methods() -> None:
    """tools/list carries no name, so no Mcp-Name header is expected."""
    message = request()
    assert "mcp-name" not in headers_for(message)
    assert validate_request(message, headers_for(message)).method == TOOLS_LIST


@pytest.mark.parametrize("level", LOG_LEVELS)
def test_every_syslog_level_is_accepted(level: str) -> None:
    """The eight syslog levels are valid per-request log levels."""
    message = request(meta_extra={META_LOG_LEVEL: level})
    assert validate_request(message, headers_for(message)).log_level == level


@pytest.mark.parametrize("level", ["verbose", "INFO", 3, None])
def test_an_unknown_log_level_is_invalid_meta(level: Any) -> None:
    """Any other log level is -32602 with HTTP 400."""
    message = request(meta_extra={META_LOG_LEVEL: level})
    fault = rejects(InvalidMeta, message, headers_for(message))
    assert (
        fault.message
        == f"Invalid params: params._meta.{META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}"
    )


@pytest.mark.parametrize("token", [True, 1.5, None, {}])
def test_a_malformed_progress_token_is_invalid_params(token: Any) -> None:
    """A progress token must be a string or an integer."""
    message = request(meta_extra={META_PROGRESS_TOKEN: token})
    fault = rejects(InvalidParams, message, headers_for(message))
    assert (
        fault.message == "Invalid params: params._meta.progressToken must be a string or an integer"
    )


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        (TOOLS_CALL, {}, "Invalid params: tools/call requires params.name (a string)"),
        (TOOLS_CALL, {"name": 3}, "Invalid params: params.name must be a string"),
        (
            TOOLS_CALL,
            {"name": "t", "arguments": []},
            "Invalid params: params.arguments must be an object",
        ),
        (
            TOOLS_CALL,
            {"name": "t", "inputResponses": []},
            "Invalid params: params.inputResponses must be an object",
        ),
        (
            TOOLS_CALL,
            {"name": "t", "requestState": 1},
            "Invalid params: params.requestState must be a string",
        ),
        (PROMPTS_GET, {}, "Invalid params: prompts/get requires params.name (a string)"),
        (RESOURCES_READ, {}, "Invalid params: resources/read requires params.uri (a string)"),
        (
            RESOURCES_READ,
            {"uri": "u", "requestState": {}},
            "Invalid params: params.requestState must be a string",
        ),
        (
            COMPLETION_COMPLETE,
            {"argument": {}},
            "Invalid params: completion/complete requires params.ref (an object)",
        ),
        (
            SUBSCRIPTIONS_LISTEN,
            {},
            "Invalid params: subscriptions/listen requires params.notifications (an object)",
        ),
        (TOOLS_LIST, {"cursor": 5}, "Invalid params: params.cursor must be a string"),
    ],
)
def test_malformed_params_are_invalid_params(
    method: str, params: dict[str, Any], expected: str
) -> None:
    """The params shape the bridge relies on is checked per method."""
    message = request(method, {**params, "_meta": meta()})
    fault = rejects(InvalidParams, message, headers_for(message))
    assert (fault.code, fault.message) == (INVALID_PARAMS, expected)


# --- x-mcp-header -------------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        "query": {"type": "string"},
        "where": {
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
        },
    },
}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        ({"region": "us-west1", "query": "q"}, {"region": "us-west1"}),
        ({}, {}),
        ({"region": None}, {}),
        ({"region": "Hello"}, {"region": b64("Hello")}),
        ({"region": "SGVsbG8="}, {"region": "SGVsbG8="}),
        ({"region": "=?base64?SGVsbG8="}, {"region": "=?base64?SGVsbG8="}),
        ({"region": "Hello, 世界"}, {"region": b64("Hello, 世界")}),
        ({"count": 42}, {"count": "42"}),
        ({"count": 42}, {"count": "42.0"}),
        ({"count": 42.0}, {"count": "42"}),
        ({"count": -7}, {"count": "-7"}),
        ({"dry": True}, {"dry-run": "true"}),
        ({"dry": False}, {"dry-run": "false"}),
        ({"where": {"zone": "z1"}}, {"zone": "z1"}),
        ({"where": "not an object"}, {}),
        ({"region": "eu"}, {"region": "eu", "unknown": "ignored"}),
    ],
)
def test_param_headers_that_mirror_the_arguments_pass(
    arguments: dict[str, Any], headers: dict[str, str]
) -> None:
    """Headers that mirror their annotated arguments (or are absent with them) are accepted."""
    check_param_headers(SCHEMA, arguments, headers)


@pytest.mark.parametrize(
    ("arguments", "headers", "expected"),
    [
        (
            {"region": "eu"},
            {},
            "Header mismatch: Mcp-Param-Region header is missing for argument 'region'",
        ),
        (
            {},
            {"region": "eu"},
            "Header mismatch: Mcp-Param-Region header is present without argument 'region'",
        ),
        (
            {"region": None},
            {"region": "eu"},
            "Header mismatch: Mcp-Param-Region header is present without argument 'region'",
        ),
        (
            {"region": "eu"},
            {"region": "us"},
            "Header mismatch: Mcp-Param-Region header value 'us' does not match argument 'region'",
        ),
        (
            {"region": "Hello"},
            {"region": "=?base64?SGVsbG8?="},
            "Header mismatch: the Mcp-Param-Region header carries a malformed Base64 sentinel "
            "value",
        ),
        (
            {"region": "Hello"},
            {"region": "=?base64?SGVs!!!bG8=?="},
            "Header mismatch: the Mcp-Param-Region header carries a malformed Base64 sentinel "
            "value",
        ),
        (
            {"region": "é"},
            {"region": "é"},
            "Header mismatch: the Mcp-Param-Region header contains invalid characters",
        ),
        (
            {"region": "eu"},
            {"region": "eu, eu"},
            "Header mismatch: Mcp-Param-Region header value 'eu, eu' does not match argument "
            "'region'",
        ),
        (
            {"count": 42},
            {"count": "42.5"},
            "Header mismatch: Mcp-Param-Count header value '42.5' does not match argument 'count'",
        ),
        (
            {"count": 42},
            {"count": "4.2e1"},
            "Header mismatch: Mcp-Param-Count header value '4.2e1' does not match argument 'count'",
        ),
        (
            {"dry": True},
            {"dry-run": "True"},
            "Header mismatch: Mcp-Param-Dry-Run header value 'True' does not match argument 'dry'",
        ),
        (
            {"where": {"zone": "z1"}},
            {},
            "Header mismatch: Mcp-Param-Zone header is missing for argument 'where.zone'",
        ),
    ],
)
def test_param_headers_that_disagree_are_header_mismatch(
    arguments: dict[str, Any], headers: dict[str, str], expected: str
) -> None:
    """A missing, extra, malformed or different Mcp-Param header is -32020 naming header and
    argument."""
    with pytest.raises(HeaderMismatch) as caught:
        check_param_headers(SCHEMA, arguments, headers)
    assert (caught.value.code, caught.value.http_status, caught.value.message) == (
        HEADER_MISMATCH,
        400,
        expected,
    )


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (
            {"type": "object", "x-mcp-header": "Root"},
            "x-mcp-header is only allowed on a property reached through a chain of properties",
        ),
        (
            {
                "properties": {
                    "a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}
                }
            },
            "x-mcp-header is only allowed on a property reached through a chain of properties",
        ),
        (
            {"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}},
            "x-mcp-header is only allowed on a property reached through a chain of properties",
        ),
        (
            {"properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
            "property 'n': x-mcp-header is only allowed on string, integer or boolean types",
        ),
        (
            {"properties": {"s": {"type": "string", "x-mcp-header": "Bad Name"}}},
            "property 's': x-mcp-header must be a non-empty header-name token",
        ),
        (
            {"properties": {"s": {"type": "string", "x-mcp-header": ""}}},
            "property 's': x-mcp-header must be a non-empty header-name token",
        ),
        (
            {
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "X"},
                    "b": {"type": "string", "x-mcp-header": "x"},
                }
            },
            "property 'a': x-mcp-header 'X' duplicates property 'b'",
        ),
    ],
)
def test_invalid_annotations_are_reported_and_validate_nothing(
    schema: dict[str, Any], problem: str
) -> None:
    """Annotations clients must reject are named, and such a schema enforces no header."""
    assert x_mcp_header_problem(schema) == problem
    check_param_headers(schema, {"a": "1", "n": 1.5, "s": "v"}, {"a": "other"})


def test_annotations_inside_data_keywords_are_ignored() -> None:
    """An x-mcp-header key inside default/enum/const data is not an annotation."""
    schema = {
        "properties": {
            "a": {"type": "string", "default": {"x-mcp-header": "A"}, "enum": [{"x-mcp-header": 1}]}
        }
    }
    assert x_mcp_header_problem(schema) is None
    check_param_headers(schema, {"a": "v"}, {})
    assert x_mcp_header_problem(SCHEMA) is None


@pytest.mark.parametrize("literal", ["1e999", "-1e999", "1.5e400"])
def test_numbers_that_overflow_to_infinity_are_a_parse_error(literal: str) -> None:
    """A float literal beyond double range cannot be sent on as JSON, so it is refused up front."""
    raw = f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"n":{literal}}}}}'.encode()
    with pytest.raises(ParseError) as caught:
        decode_json(raw, 64)
    assert caught.value.code == PARSE_ERROR
    assert "out of range" in caught.value.message
