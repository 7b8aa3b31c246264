"""Property-based tests on translators/: arbitrary JSON raises only BridgeError, sealing round-
trips, tampered states never open, and random held-call scripts keep the machine's invariants."""

from __future__ import annotations

import base64
import json
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from schema_check import assert_valid, errors

from translators.held.events import (
    AnswerPush,
    BatchWindowClosed,
    ClientDisconnected,
    ClientRetried,
    DeadlinePassed,
    Event,
    ReplyError,
    ReplyInputRequired,
    ReplyResult,
    ReportBug,
    UpstreamErrorArrived,
    UpstreamPushArrived,
    UpstreamPushCancelled,
    UpstreamResultArrived,
)
from translators.held.machine import HeldCall, HeldCallState, Limits
from translators.held.request_state import (
    KEY_SIZE,
    NONCE_SIZE,
    PREFIX,
    KeyRing,
    StateClaims,
    check_claims,
    open_state,
    seal,
)
from translators.protocol.capabilities import (
    capability_fingerprint,
    elicitation_modes,
    legacy_server_capabilities_to_modern,
    modern_client_capabilities_to_legacy,
)
from translators.protocol.eras import (
    CACHEABLE_METHODS,
    ELICIT,
    FORWARDED_METHODS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_INPUT_KEY_HINT,
    META_PREFIX,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    MRTR_METHODS,
    PROGRESS,
    RESULT_COMPLETE,
    ROOTS,
    SAMPLE,
)
from translators.protocol.eras import LOG_MESSAGE as MESSAGE
from translators.protocol.notifications import route_notification
from translators.protocol.pushes import (
    PendingPush,
    PushAnswer,
    input_key,
    input_response_to_legacy,
    legacy_push_to_input_request,
)
from translators.protocol.requests import (
    modern_params_to_legacy,
    require_upstream_capability,
    salient_params,
)
from translators.protocol.results import (
    CacheHints,
    discover_result,
    input_required_result,
    legacy_error_to_modern,
    legacy_result_to_modern,
)
from translators.wire.errors import (
    INTERNAL_ERROR,
    LEGACY_RESOURCE_NOT_FOUND,
    LEGACY_URL_ELICITATION_REQUIRED,
    MISSING_CLIENT_CAPABILITY,
    RESERVED_RANGE,
    InvalidParams,
    InvalidRequestState,
    MethodNotFound,
)
from translators.wire.fast_json import digest
from translators.wire.jsonrpc import JsonObject

PROPERTY = settings(
    max_examples=80,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
LONE_SURROGATE = json.loads('"\\ud800"')  # what `json.loads` makes of a `\ud800` escape on the wire
PUSH_METHODS = (ELICIT, SAMPLE, ROOTS)
SCHEMA: JsonObject = {"type": "object", "properties": {"ok": {"type": "boolean"}}}

# ---- arbitrary JSON, biased towards the names the translators look at ---------------------------

_WORDS = [
    "",
    "_meta",
    "mode",
    "form",
    "url",
    "message",
    "requestedSchema",
    "elicitationId",
    "tools",
    "toolChoice",
    "includeContext",
    "thisServer",
    "allServers",
    "none",
    "context",
    "sampling",
    "elicitation",
    "roots",
    "experimental",
    "tasks",
    "listChanged",
    "subscribe",
    "code",
    "message",
    "data",
    "uri",
    "elicitations",
    "action",
    "accept",
    "decline",
    "content",
    "type",
    "text",
    "role",
    "assistant",
    "model",
    "name",
    "arguments",
    "inputResponses",
    "requestState",
    "progressToken",
    "level",
    "params",
    "method",
    "capabilities",
    "instructions",
    "resultType",
    "execution",
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_INPUT_KEY_HINT,
    META_PREFIX,
    *PUSH_METHODS,
    *LOG_LEVELS,
    LONE_SURROGATE,
    "x\x00y",
    "é東",
]
json_keys = st.sampled_from(_WORDS) | st.text(max_size=5)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.just(f"x{LONE_SURROGATE}")
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_keys
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(json_keys, children, max_size=4)
    ),
    max_leaves=10,
)
json_objects = st.dictionaries(json_keys, json_values, max_size=6)
tokens = st.none() | st.integers(-5, 5) | st.sampled_from(["t", "u", ""])


# ---- capabilities, requests, results, errors, notifications --------------------------------------


@PROPERTY
@given(declared=json_objects, listen_supported=st.booleans())
def test_capability_mapping_never_raises(declared: JsonObject, listen_supported: bool) -> None:
    """Any declared capability object maps to a legacy object without raising."""
    legacy = modern_client_capabilities_to_legacy(declared)
    assert set(legacy) <= {"elicitation", "sampling", "roots", "experimental"}
    assert elicitation_modes(declared) <= {"form", "url"}
    modern = legacy_server_capabilities_to_modern(declared, listen_supported=listen_supported)
    assert "tasks" not in modern


@PROPERTY
@given(value=json_values)
@example(value={"message": LONE_SURROGATE})
def test_canonical_digest_accepts_any_parsed_json(value: Any) -> None:
    """Every value `json.loads` can produce (lone surrogates included) has a digest."""
    assert len(digest(value)) == 16


@PROPERTY
@given(declared=json_objects)
@example(declared={"experimental": {"com.example/x": {"label": LONE_SURROGATE}}})
def test_capability_fingerprint_never_raises(declared: JsonObject) -> None:
    """Every capability set a client can declare gets a pool fingerprint."""
    assert len(capability_fingerprint(modern_client_capabilities_to_legacy(declared))) == 12


@PROPERTY
@given(params=json_objects, method=st.sampled_from(sorted(FORWARDED_METHODS)), token=tokens)
def test_request_translation_never_raises(
    params: JsonObject, method: str, token: str | int | None
) -> None:
    """Arbitrary params translate without raising and never carry modern-only data upstream."""
    legacy = modern_params_to_legacy(params, upstream_progress_token=token)
    assert "inputResponses" not in legacy and "requestState" not in legacy
    meta = legacy.get("_meta", {})
    assert not any(key.startswith(META_PREFIX) for key in meta)
    assert meta.get(META_PROGRESS_TOKEN) == token
    assert set(salient_params(method, params)) == {"m", "n", "a"}
    try:
        require_upstream_capability(method, params)
    except MethodNotFound:
        pass


@PROPERTY
@given(
    result=json_objects,
    method=st.sampled_from(sorted(FORWARDED_METHODS)),
    server_info=st.none() | json_objects,
    ttl_ms=st.integers(0, 10**9),
    scope=st.sampled_from(["private", "public"]),
)
def test_result_translation_never_raises(
    result: JsonObject, method: str, server_info: JsonObject | None, ttl_ms: int, scope: Any
) -> None:
    """Arbitrary upstream results are stamped complete, with cache hints exactly on cacheable
    methods."""
    cache = CacheHints(ttl_ms, scope)
    modern = legacy_result_to_modern(method, result, server_info=server_info, cache=cache)
    assert modern["resultType"] == RESULT_COMPLETE
    assert ("ttlMs" in modern) is (method in CACHEABLE_METHODS)
    assert "_meta" not in modern or modern["_meta"]
    discover = discover_result(result, server_info=server_info, cache=cache, listen_supported=True)
    assert discover["resultType"] == RESULT_COMPLETE
    input_required_result({"k": result}, "v1.x", server_info=server_info)


@PROPERTY
@given(
    error=json_objects
    | st.fixed_dictionaries(
        {
            "code": st.integers(-33000, 1)
            | st.sampled_from([LEGACY_RESOURCE_NOT_FOUND, LEGACY_URL_ELICITATION_REQUIRED]),
            "message": json_values,
            "data": json_values,
        }
    ),
    request_uri=st.none() | st.text(max_size=5),
)
def test_error_mapping_never_emits_forbidden_codes(
    error: JsonObject, request_uri: str | None
) -> None:
    """Any upstream error maps to a valid modern error whose code is allowed on the modern wire."""
    mapped = legacy_error_to_modern(error, request_uri=request_uri)
    code = mapped["code"]
    assert code != LEGACY_RESOURCE_NOT_FOUND
    assert code not in RESERVED_RANGE or code == MISSING_CLIENT_CAPABILITY
    assert_valid(mapped, "Error", "modern")


@PROPERTY
@given(
    message=json_objects
    | st.fixed_dictionaries(
        {"method": st.sampled_from([PROGRESS, MESSAGE]), "params": json_objects}
    ),
    upstream=tokens,
    front=tokens,
    level=st.none() | st.sampled_from(LOG_LEVELS) | json_keys,
)
def test_notification_routing_never_raises(
    message: JsonObject, upstream: Any, front: Any, level: Any
) -> None:
    """Arbitrary notifications are routed or dropped, and routed progress always carries the front
    token."""
    routed = route_notification(message, upstream, front, level)
    if routed is not None and routed["method"] == PROGRESS:
        assert routed["params"]["progressToken"] == front


# ---- pushes --------------------------------------------------------------------------------------

_PUSH_FIELDS = [
    "mode",
    "message",
    "url",
    "elicitationId",
    "requestedSchema",
    "messages",
    "maxTokens",
    "tools",
    "toolChoice",
    "includeContext",
    "task",
    "_meta",
]
push_params = (
    st.fixed_dictionaries({}, optional=dict.fromkeys(_PUSH_FIELDS, json_values)) | json_objects
)
pushes = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.integers(0, 9),
        "method": st.sampled_from(PUSH_METHODS),
        "params": push_params,
    }
) | st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": json_values, "method": json_keys, "params": json_values}
)
capability_objects = st.dictionaries(
    st.sampled_from(["elicitation", "sampling", "roots"]) | json_keys,
    st.dictionaries(
        st.sampled_from(["form", "url", "tools", "context"]), st.just({}) | json_values, max_size=3
    )
    | json_values,
    max_size=3,
)


@PROPERTY
@given(push=pushes, declared=capability_objects)
@example(
    push={"jsonrpc": "2.0", "id": 1, "method": ELICIT, "params": {"mode": ["form"]}}, declared={}
)
def test_push_translation_never_raises(push: JsonObject, declared: JsonObject) -> None:
    """Any push from upstream becomes an input request or a refusal, never an exception."""
    translated = legacy_push_to_input_request(push, declared)
    assert isinstance(translated, dict | PushAnswer)


@PROPERTY
@given(push=pushes, taken=st.sets(st.text(max_size=4), max_size=3))
@example(
    push={"jsonrpc": "2.0", "id": 1, "method": ELICIT, "params": {"message": LONE_SURROGATE}},
    taken=set(),
)
def test_input_key_never_raises(push: JsonObject, taken: set[str]) -> None:
    """Any push gets a fresh input key that is stable across calls."""
    key = input_key(push, taken)
    assert key not in taken and key == input_key(push, taken)


@PROPERTY
@given(method=st.sampled_from(PUSH_METHODS), value=json_values)
def test_input_response_raises_only_invalid_params(method: str, value: Any) -> None:
    """An arbitrary answer is either a PushAnswer or an InvalidParams naming the key."""
    try:
        answer = input_response_to_legacy("k", PendingPush("k", 1, method, {}), value)
    except InvalidParams as exc:
        assert exc.data == {"inputKey": "k"}
    else:
        assert answer.result == value


_maybe_null = st.none() | st.text(max_size=3)
_content_blocks = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "bogus"])},
    optional={"text": _maybe_null, "data": st.just("aGk="), "mimeType": st.just("image/png")},
)
near_valid_answers = {
    ELICIT: st.fixed_dictionaries(
        {"action": st.sampled_from(["accept", "decline", "cancel"])},
        optional={
            "content": st.none()
            | st.dictionaries(
                st.text(max_size=3),
                st.none()
                | st.text(max_size=3)
                | st.integers()
                | st.booleans()
                | st.lists(st.text(max_size=2), max_size=2),
                max_size=3,
            )
        },
    ),
    SAMPLE: st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant"]),
            "model": st.text(max_size=3),
            "content": _content_blocks | st.lists(_content_blocks, max_size=2),
        },
        optional={"stopReason": _maybe_null},
    ),
    ROOTS: st.fixed_dictionaries(
        {
            "roots": st.lists(
                st.fixed_dictionaries(
                    {"uri": st.sampled_from(["file:///a", "file:///srv/b"])},
                    optional={"name": _maybe_null},
                ),
                max_size=2,
            )
        }
    ),
}


@PROPERTY
@given(
    method_value=st.one_of(
        *(st.tuples(st.just(method), answers) for method, answers in near_valid_answers.items())
    )
)
@example(method_value=(ELICIT, {"action": "accept", "content": None}))
def test_accepted_input_responses_are_valid_legacy_results(method_value: tuple[str, Any]) -> None:
    """Whatever answer the bridge accepts and sends upstream is a schema-valid legacy result."""
    method, value = method_value
    try:
        answer = input_response_to_legacy("k", PendingPush("k", 1, method, {}), value)
    except InvalidParams:
        return
    definition = {ELICIT: "ElicitResult", SAMPLE: "CreateMessageResult", ROOTS: "ListRootsResult"}[
        method
    ]
    assert errors(answer.result, definition, "legacy") == []


valid_pushes: st.SearchStrategy[tuple[str, JsonObject]] = st.one_of(
    st.fixed_dictionaries(
        {"message": st.text(max_size=5), "requestedSchema": st.just(SCHEMA)},
        optional={"mode": st.just("form"), "task": st.just({"ttl": 5})},
    ).map(lambda params: (ELICIT, params)),
    st.fixed_dictionaries(
        {
            "mode": st.just("url"),
            "message": st.text(max_size=5),
            "url": st.just("https://a.example/x"),
            "elicitationId": st.text(max_size=4),
        }
    ).map(lambda params: (ELICIT, params)),
    st.fixed_dictionaries(
        {
            "messages": st.just([{"role": "user", "content": {"type": "text", "text": "q"}}]),
            "maxTokens": st.integers(1, 100),
        },
        optional={
            "includeContext": st.sampled_from(["none", "thisServer", "allServers"]),
            "tools": st.just([{"name": "t", "inputSchema": {"type": "object"}}]),
            "temperature": st.floats(0, 1),
            "systemPrompt": st.text(max_size=4),
        },
    ).map(lambda params: (SAMPLE, params)),
    st.just((ROOTS, {})),
)


@PROPERTY
@given(method_params=valid_pushes, declared=capability_objects)
def test_valid_pushes_become_valid_input_requests(
    method_params: tuple[str, JsonObject], declared: JsonObject
) -> None:
    """A schema-valid legacy push is forwarded as a schema-valid modern input request, or
    refused."""
    method, params = method_params
    push = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    assume(
        not errors(
            push,
            {ELICIT: "ElicitRequest", SAMPLE: "CreateMessageRequest", ROOTS: "ListRootsRequest"}[
                method
            ],
            "legacy",
        )
    )
    translated = legacy_push_to_input_request(push, declared)
    if isinstance(translated, PushAnswer):
        assert translated.error is not None
        assert_valid(
            {"jsonrpc": "2.0", "id": 1, "error": translated.error}, "JSONRPCErrorResponse", "legacy"
        )
    else:
        assert_valid(translated, "InputRequest", "modern")


# ---- requestState --------------------------------------------------------------------------------

RING = KeyRing({"k1": bytes(range(KEY_SIZE))}, "k1")
claims_strategy = st.builds(
    StateClaims,
    continuation_id=st.binary(min_size=16, max_size=16),
    round=st.integers(0, 65535),
    replica_id=st.text(max_size=16),
    principal_digest=st.binary(min_size=16, max_size=16),
    method=st.sampled_from(sorted(MRTR_METHODS)),
    params_digest=st.binary(min_size=16, max_size=16),
    keys_digest=st.binary(min_size=8, max_size=8),
    expires_at_ms=st.integers(0, 2**64 - 1),
)
nonces = st.binary(min_size=NONCE_SIZE, max_size=NONCE_SIZE)
URLSAFE_ALPHABET = string.ascii_letters + string.digits + "-_"


@PROPERTY
@given(claims=claims_strategy, nonce=nonces)
def test_sealing_round_trips(claims: StateClaims, nonce: bytes) -> None:
    """Any claims sealed with any nonce open to the same claims."""
    assert open_state(seal(claims, RING, nonce), RING) == claims


@PROPERTY
@given(claims=claims_strategy, nonce=nonces, data=st.data())
def test_any_single_byte_change_fails(
    claims: StateClaims, nonce: bytes, data: st.DataObject
) -> None:
    """Changing any one character of a sealed state to any other printable character never
    opens it."""
    token = seal(claims, RING, nonce)
    # base64 look-alikes, last
    twins = [n for n, char in enumerate(token) if char in "-_"] + [len(token) - 1]
    position = data.draw(st.integers(0, len(token) - 1) | st.sampled_from(twins))
    replacement = data.draw(
        st.sampled_from(URLSAFE_ALPHABET + "+/=") | st.sampled_from(string.printable)
    )
    assume(replacement != token[position])
    with pytest.raises(InvalidRequestState):
        open_state(token[:position] + replacement + token[position + 1 :], RING)


@PROPERTY
@given(
    token=json_values
    | st.text(max_size=40).map(lambda body: PREFIX + body)
    | st.binary(max_size=120).map(lambda blob: PREFIX + base64.urlsafe_b64encode(blob).decode())
)
def test_open_state_raises_only_invalid_request_state(token: Any) -> None:
    """Opening arbitrary JSON or garbage bodies fails with InvalidRequestState and nothing else."""
    with pytest.raises(InvalidRequestState):
        open_state(token, RING)


@PROPERTY
@given(
    claims=claims_strategy,
    now_ms=st.integers(0, 2**64),
    principal=st.text(max_size=5),
    method=st.sampled_from(sorted(MRTR_METHODS)),
    params_digest=st.binary(min_size=16, max_size=16),
    replica_id=st.text(max_size=4),
)
def test_check_claims_raises_only_invalid_request_state(
    claims: StateClaims,
    now_ms: int,
    principal: str,
    method: str,
    params_digest: bytes,
    replica_id: str,
) -> None:
    """Claim checks either pass or raise InvalidRequestState."""
    try:
        check_claims(
            claims,
            now_ms=now_ms,
            principal=principal,
            method=method,
            params_digest=params_digest,
            replica_id=replica_id,
        )
    except InvalidRequestState as exc:
        assert exc.reason in {"expired", "other_principal", "other_request", "other_replica"}


# ---- held calls: random scripts ------------------------------------------------------------------

LIMITS = Limits(
    batch_quiet_s=0.25, batch_max_s=1.0, attempt_timeout_s=30.0, held_ttl_s=300.0, max_rounds=3
)
CAPABILITIES: JsonObject = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
GOOD_ANSWERS = {
    ELICIT: {"action": "accept", "content": {"ok": True}},
    ROOTS: {"roots": []},
    SAMPLE: {"role": "assistant", "content": {"type": "text", "text": "t"}, "model": "m"},
}
EVENT_KINDS = ["push", "cancel", "result", "error", "batch", "retry", "disconnect", "deadline"]


def _draw_event(data: st.DataObject, call: HeldCall, next_id: int) -> Event:
    kind = data.draw(st.sampled_from(EVENT_KINDS))
    timer_token = data.draw(st.integers(0, 6))
    if kind == "push":
        method = data.draw(st.sampled_from(PUSH_METHODS))
        push = {
            "jsonrpc": "2.0",
            "id": next_id,
            "method": method,
            "params": {"mode": "form", "message": f"q{next_id % 3}", "requestedSchema": SCHEMA}
            if method == ELICIT
            else {"messages": [], "maxTokens": 1 + next_id % 2}
            if method == SAMPLE
            else {},
        }
        request = legacy_push_to_input_request(push, CAPABILITIES)
        assert isinstance(request, dict)
        return UpstreamPushArrived(
            PendingPush(input_key(push, set(call.pending)), next_id, method, request)
        )
    if kind == "retry":
        answers = {
            key: data.draw(st.sampled_from([GOOD_ANSWERS[push.method], 12345]))
            for key, push in call.pending.items()
            if data.draw(st.booleans())
        }
        return ClientRetried(
            next_id,
            data.draw(st.sampled_from([call.round, call.round + 1, call.round - 1])),
            answers,
        )
    simple: dict[str, Event] = {
        "cancel": UpstreamPushCancelled(data.draw(st.integers(0, next_id))),
        "result": UpstreamResultArrived({"content": []}),
        "error": UpstreamErrorArrived(
            error={
                "code": LEGACY_URL_ELICITATION_REQUIRED,
                "message": "m",
                "data": {"elicitations": [{"mode": "url", "url": "https://a/x", "message": "go"}]},
            }
            if data.draw(st.booleans())
            else {"code": INTERNAL_ERROR, "message": "m"}
        ),
        "batch": BatchWindowClosed(timer_token),
        "disconnect": ClientDisconnected(data.draw(st.sampled_from([call.attempt or 0, next_id]))),
        "deadline": DeadlinePassed(timer_token),
    }
    return simple[kind]


def _check_invariants(
    call: HeldCall,
    before: HeldCallState,
    event: Event,
    actions: list[Any],
    replied: set[int],
    answered: set[int | str],
    cancelled: set[int | str],
) -> None:
    if before is HeldCallState.DONE:
        assert call.state is HeldCallState.DONE
        # found the call just before the driver dropped it: rejected
        if isinstance(event, ClientRetried):
            assert [(type(a), a.attempt, getattr(a.fault, "reason", None)) for a in actions] == [
                (ReplyError, event.attempt, "unknown_held_call")
            ]
        else:
            assert actions == []
        return
    assert not any(isinstance(action, ReportBug) for action in actions)
    assert (call.attempt is not None) is (
        call.state in (HeldCallState.RUNNING, HeldCallState.COLLECTING)
    )
    assert call.state is not HeldCallState.COLLECTING or call.pending
    assert call.round <= LIMITS.max_rounds
    for action in actions:
        if isinstance(action, ReplyInputRequired | ReplyResult | ReplyError):
            assert action.attempt not in replied
            replied.add(action.attempt)
        if isinstance(action, ReplyInputRequired):
            assert action.input_requests and action.round == call.round
            assert_valid(
                input_required_result(action.input_requests, "v1.s", server_info=None),
                "InputRequiredResult",
                "modern",
            )
        if isinstance(action, AnswerPush):
            assert action.push_id not in answered and action.push_id not in cancelled
            answered.add(action.push_id)


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_random_held_call_scripts_keep_the_invariants(data: st.DataObject) -> None:
    """Any sequence of events yields actions without raising and keeps the machine's invariants."""
    call = HeldCall(LIMITS, attempt=0)
    call.start(0.0)
    replied: set[int] = set()
    answered: set[int | str] = set()
    cancelled: set[int | str] = set()
    for step in range(1, data.draw(st.integers(1, 25)) + 1):
        event = _draw_event(data, call, 100 + step)
        before = call.state
        if (
            isinstance(event, ClientRetried | ClientDisconnected)
            and event.attempt in replied
            and before is not HeldCallState.DONE
        ):
            continue
        actions = call.handle(event, float(step))
        if isinstance(event, UpstreamPushCancelled):
            cancelled.add(event.push_id)
        _check_invariants(call, before, event, actions, replied, answered, cancelled)
    for action in call.abort("shutdown", 1000.0):
        assert not isinstance(action, ReportBug)
    assert call.state is HeldCallState.DONE
