"""Hypothesis fuzzing of the translators the front and the upstream feed raw input to (issue 6).

`test_properties.py` covers capabilities, requests, results, errors, notifications, pushes, input
responses, claims checks, character-level requestState tampering and held-call scripts. This file
covers the rest of the public surface a hostile peer reaches: the front's validation ladder
(`inbound`, `header_values`), raw bytes into the SSE and stdio decoders, listen filters, unowned
push answers, and requestState at the byte level: every single-byte change of the sealed blob,
key rotation, and both AEADs. Anything raised must be one of the bridge's own errors.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from translators.held.request_state import (
    KEY_SIZE,
    NONCE_SIZE,
    PREFIX,
    KeyRing,
    StateClaims,
    open_state,
    seal,
)
from translators.protocol.eras import (
    ELICIT,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_METHODS,
    MODERN_VERSION,
    MRTR_METHODS,
    ROOTS,
    SAMPLE,
)
from translators.protocol.pushes import PushAnswer, refusal, unowned_push_answer
from translators.protocol.request_validation import (
    check_envelope,
    decode_json,
    fold_headers,
    message_id,
    param_headers_of,
    validate_request,
)
from translators.protocol.subscriptions import (
    ListenFilter,
    honoured_filter,
    listen_notification,
    parse_listen_filter,
)
from translators.wire.errors import BridgeError, InvalidRequestState
from translators.wire.header_values import (
    check_param_headers,
    decode_header_value,
    x_mcp_header_problem,
)
from translators.wire.jsonrpc import JsonObject
from translators.wire.sse import SSEDecoder
from translators.wire.stdio_framing import FramingError, LineDecoder, decode_line, frame

FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

# ---- arbitrary JSON shaped like what the front and the upstream send ----------------------------

_NAMES = [
    "jsonrpc",
    "id",
    "method",
    "params",
    "_meta",
    "name",
    "uri",
    "arguments",
    "cursor",
    "inputResponses",
    "requestState",
    "notifications",
    "resourceSubscriptions",
    "toolsListChanged",
    "type",
    "properties",
    "x-mcp-header",
    "items",
    "anyOf",
    "enum",
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    "progressToken",
    "traceparent",
    *sorted(MODERN_METHODS),
]
keys = st.sampled_from(_NAMES) | st.text(max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["2.0", MODERN_VERSION, "", "=?base64?aGk=?=", "=?base64?!!?=", *_NAMES])
    | st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
objects = st.dictionaries(keys, values, max_size=6)
requests = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.integers(-5, 5) | st.text(max_size=3),
        "method": st.sampled_from(sorted(MODERN_METHODS)) | st.text(max_size=8),
        "params": st.fixed_dictionaries(
            {
                "_meta": st.fixed_dictionaries(
                    {},
                    optional={
                        META_PROTOCOL_VERSION: st.just(MODERN_VERSION) | scalars,
                        META_CLIENT_CAPABILITIES: objects | scalars,
                        META_CLIENT_INFO: values,
                        META_LOG_LEVEL: scalars,
                    },
                )
            },
            optional={
                "name": scalars,
                "uri": scalars,
                "arguments": values,
                "cursor": scalars,
                "inputResponses": values,
                "requestState": scalars,
            },
        ),
    }
)
header_names = st.sampled_from(
    [
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-param-x",
        "Mcp-Param-Y",
        "MCP-Protocol-Version",
        "content-type",
    ]
) | st.text(max_size=6)
header_values = st.sampled_from(
    ["tools/call", MODERN_VERSION, "=?base64?dG9vbHMvY2FsbA==?=", "=?base64?%%?=", " x ", ""]
) | st.text(max_size=10)
header_pairs = st.lists(st.tuples(header_names, header_values), max_size=6)


def _only_bridge_errors(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call `function`; a raised exception must be a `BridgeError` (returns None then)."""
    try:
        return function(*args, **kwargs)
    except BridgeError:
        return None


# ---- the front's ladder -------------------------------------------------------------------------


@FUZZ
@given(
    raw=st.binary(max_size=200) | values.map(lambda v: json.dumps(v).encode()),
    depth=st.integers(1, 6),
)
@example(raw=b"[" * 5000, depth=64)
@example(raw=b'{"a": NaN}', depth=64)
@example(raw=b"1" * 5000, depth=64)
def test_any_body_decodes_or_raises_a_bridge_error(raw: bytes, depth: int) -> None:
    """Arbitrary bytes (deep nesting, NaN, huge integers, bad UTF-8) either decode or raise a
    ParseError."""
    decoded = _only_bridge_errors(decode_json, raw, depth)
    if decoded is not None:
        message_id(decoded)
        _only_bridge_errors(check_envelope, decoded)


@FUZZ
@given(message=requests | objects, pairs=header_pairs)
def test_any_request_passes_the_ladder_or_raises_a_bridge_error(
    message: JsonObject, pairs: list[Any]
) -> None:
    """Any JSON request with any headers is routed or refused with a BridgeError, never anything
    else."""
    headers = _only_bridge_errors(fold_headers, pairs)
    if headers is None:
        return
    param_headers_of(headers)
    envelope = _only_bridge_errors(check_envelope, message)
    if envelope is None or "id" not in envelope:
        return
    for transport_headers in (headers, None):
        route = _only_bridge_errors(validate_request, envelope, transport_headers)
        if route is not None:
            assert route.method in MODERN_METHODS
            assert route.protocol_version == MODERN_VERSION


@FUZZ
@given(
    value=st.text(max_size=40)
    | st.binary(max_size=30).map(lambda blob: "=?base64?" + base64.b64encode(blob).decode() + "?=")
)
def test_any_header_value_decodes_or_is_a_mismatch(value: str) -> None:
    """A header value is returned, decoded from its Base64 sentinel, or refused as a
    HeaderMismatch."""
    decoded = _only_bridge_errors(decode_header_value, value, header="Mcp-Name")
    assert decoded is None or isinstance(decoded, str)


@FUZZ
@given(
    schema=objects
    | st.fixed_dictionaries(
        {
            "type": st.just("object"),
            "properties": st.dictionaries(
                st.text(max_size=3),
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["string", "integer", "boolean"]) | scalars},
                    optional={"x-mcp-header": scalars},
                ),
                max_size=3,
            ),
        }
    ),
    arguments=objects,
    headers=st.dictionaries(st.text(max_size=4), header_values, max_size=3),
)
def test_any_tool_schema_and_arguments_check_param_headers(
    schema: JsonObject, arguments: JsonObject, headers: dict[str, str]
) -> None:
    """x-mcp-header checks accept or refuse with a BridgeError for any schema, arguments and
    headers."""
    problem = x_mcp_header_problem(schema)
    assert problem is None or isinstance(problem, str)
    _only_bridge_errors(check_param_headers, schema, arguments, headers)


# ---- decoders of upstream bytes -----------------------------------------------------------------


@FUZZ
@given(
    chunks=st.lists(
        st.binary(max_size=60)
        | st.sampled_from(
            [
                b"data: x\n\n",
                b"\r",
                b"\n",
                b"retry: 9\n",
                b"id: \x00\n",
                b"\xef\xbb\xbf",
                b": c\r\n",
            ]
        ),
        max_size=8,
    )
)
def test_any_sse_bytes_decode_or_raise_a_bridge_error(chunks: list[bytes]) -> None:
    """Arbitrary bytes on an upstream SSE stream yield events or an UpstreamProtocolError, never a
    crash."""
    decoder = SSEDecoder(max_event_size=64)
    for chunk in chunks:
        events = _only_bridge_errors(decoder.feed, chunk)
        if events is None:
            return
        assert all(isinstance(event.data, str) for event in events)


@FUZZ
@given(
    chunks=st.lists(
        st.binary(max_size=80) | values.map(lambda v: json.dumps(v).encode() + b"\n"), max_size=6
    )
)
def test_any_stdio_bytes_frame_into_messages_or_framing_errors(chunks: list[bytes]) -> None:
    """Arbitrary stdio bytes become JSON objects or FramingError values; nothing is raised."""
    decoder = LineDecoder(128)
    for chunk in chunks:
        for item in decoder.feed(chunk):
            assert isinstance(item, dict | FramingError)
        assert decoder.buffered <= 128


@FUZZ
@given(message=objects)
def test_framed_messages_decode_to_themselves(message: JsonObject) -> None:
    """Any JSON object framed for stdio decodes back to an equal object on one line."""
    line = frame(message)
    assert line.count(b"\n") == 1
    assert decode_line(line[:-1]) == json.loads(json.dumps(message))


# ---- listen filters and unowned pushes ----------------------------------------------------------


@FUZZ
@given(
    params=objects | st.fixed_dictionaries({"notifications": objects}),
    capabilities=objects,
    message=st.fixed_dictionaries(
        {
            "method": st.sampled_from(  # upstream transports pass string methods only
                ["notifications/tools/list_changed", "notifications/resources/updated"]
            )
            | st.text(max_size=8)
        },
        optional={"params": values},
    ),
    session_stream=st.booleans(),
)
def test_any_listen_filter_parses_or_is_invalid_params(
    params: JsonObject, capabilities: JsonObject, message: JsonObject, session_stream: bool
) -> None:
    """Listen filters parse or raise InvalidParams; honoured subsets and tagged notifications never
    raise."""
    wanted = _only_bridge_errors(parse_listen_filter, params)
    if wanted is None:
        wanted = ListenFilter(frozenset(), frozenset())
    honoured = honoured_filter(wanted, capabilities, session_stream=session_stream)
    assert honoured.list_changed <= wanted.list_changed
    assert honoured.resource_uris <= wanted.resource_uris
    listen_notification(message, honoured, 1)


@FUZZ
@given(
    push=objects
    | st.fixed_dictionaries(
        {"id": scalars, "method": st.sampled_from([ELICIT, SAMPLE, ROOTS]), "params": values}
    ),
    roots=st.lists(st.text(max_size=8), max_size=3).map(tuple),
)
def test_unowned_pushes_always_get_an_answer(push: JsonObject, roots: tuple[str, ...]) -> None:
    """Any push nobody owns gets exactly one of result or error, never an exception."""
    answer = unowned_push_answer(push, roots)
    assert isinstance(answer, PushAnswer)
    assert (answer.result is None) != (answer.error is None)
    for method in (ELICIT, SAMPLE, ROOTS):
        assert isinstance(refusal(method), PushAnswer)


# ---- requestState at the byte level -------------------------------------------------------------

OLD = KeyRing({"old": bytes(KEY_SIZE)}, "old")
ROTATED = KeyRing({"old": bytes(KEY_SIZE), "new": bytes(range(KEY_SIZE))}, "new")
claims = st.builds(
    StateClaims,
    continuation_id=st.binary(min_size=16, max_size=16),
    round=st.integers(0, 65535),
    replica_id=st.text(max_size=16).filter(lambda r: len(r.encode()) <= 16),
    principal_digest=st.binary(min_size=16, max_size=16),
    method=st.sampled_from(sorted(MRTR_METHODS)),
    params_digest=st.binary(min_size=16, max_size=16),
    keys_digest=st.binary(min_size=8, max_size=8),
    expires_at_ms=st.integers(0, 2**64 - 1),
)
nonces = st.binary(min_size=NONCE_SIZE, max_size=NONCE_SIZE)


def _blob(token: str) -> bytearray:
    body = token[len(PREFIX) :]
    return bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _token(blob: bytes) -> str:
    return PREFIX + base64.urlsafe_b64encode(blob).rstrip(b"=").decode()


@FUZZ
@given(
    sealed=claims,
    nonce=nonces,
    data=st.data(),
    aead=st.sampled_from(["aes-256-gcm", "chacha20-poly1305"]),
)
def test_any_single_byte_change_of_the_sealed_blob_fails(
    sealed: StateClaims, nonce: bytes, data: st.DataObject, aead: Any
) -> None:
    """Changing any one byte of the decoded state (key id, nonce, ciphertext or tag) never
    opens it."""
    ring = KeyRing({"k1": bytes(range(KEY_SIZE))}, "k1", aead)
    blob = _blob(seal(sealed, ring, nonce))
    position = data.draw(st.integers(0, len(blob) - 1))
    blob[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(InvalidRequestState):
        open_state(_token(bytes(blob)), ring)


@FUZZ
@given(sealed=claims, nonce=nonces, aead=st.sampled_from(["aes-256-gcm", "chacha20-poly1305"]))
def test_both_aeads_round_trip(sealed: StateClaims, nonce: bytes, aead: Any) -> None:
    """Sealing and opening round-trips with either configured AEAD, within the 300-character
    budget."""
    ring = KeyRing({"k1": bytes(range(KEY_SIZE))}, "k1", aead)
    token = seal(sealed, ring, nonce)
    assert len(token) <= 300
    assert open_state(token, ring) == sealed


@FUZZ
@given(sealed=claims, nonce=nonces)
def test_rotation_old_key_opens_new_key_seals(sealed: StateClaims, nonce: bytes) -> None:
    """After rotation, states sealed with the old key still open and new states are sealed with the
    new key."""
    before = seal(sealed, OLD, nonce)
    after = seal(sealed, ROTATED, nonce)
    assert open_state(before, ROTATED) == sealed
    assert open_state(after, ROTATED) == sealed
    assert bytes(_blob(after)[1:4]) == b"new"
    with pytest.raises(InvalidRequestState) as refused:
        open_state(after, OLD)  # a replica not yet given the new key refuses, without crashing
    assert refused.value.reason == "unknown_key"


@FUZZ
@given(sealed=claims, nonce=nonces)
def test_a_state_sealed_under_one_key_id_never_opens_under_another(
    sealed: StateClaims, nonce: bytes
) -> None:
    """Relabelling a state with another known key id fails authentication (the key id is bound as
    data)."""
    blob = _blob(seal(sealed, ROTATED, nonce))
    relabelled = bytes([3]) + b"old" + bytes(blob[4:])
    with pytest.raises(InvalidRequestState) as refused:
        open_state(_token(relabelled), ROTATED)
    assert refused.value.reason == "authentication_failed"
