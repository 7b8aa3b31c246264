"""Legacy pushes <-> modern input requests and responses (translators.protocol.pushes;
docs/decisions.md § 10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from schema_check import assert_valid

from translators.protocol.eras import (
    ELICIT,
    LEGACY_PING,
    META_INPUT_KEY_HINT,
    PUSH_KINDS,
    ROOTS,
    SAMPLE,
)
from translators.protocol.pushes import (
    MAX_KEY_LENGTH,
    PendingPush,
    PushAnswer,
    input_key,
    input_response_to_legacy,
    is_push,
    legacy_push_to_input_request,
    refusal,
    unowned_push_answer,
)
from translators.wire.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LEGACY_SAMPLING_REJECTED,
    METHOD_NOT_FOUND,
    InvalidParams,
)
from translators.wire.jsonrpc import JsonObject

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PAIRS: list[JsonObject] = json.loads((FIXTURES / "pushes.json").read_text(encoding="utf-8"))[
    "pairs"
]
REQUEST_DEFS = {ELICIT: "ElicitRequest", SAMPLE: "CreateMessageRequest", ROOTS: "ListRootsRequest"}
RESULT_DEFS = {ELICIT: "ElicitResult", SAMPLE: "CreateMessageResult", ROOTS: "ListRootsResult"}
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
EVERYTHING: JsonObject = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}


def _push(method: str, params: JsonObject | None = None, push_id: int | str = 1) -> JsonObject:
    push: JsonObject = {"jsonrpc": "2.0", "id": push_id, "method": method}
    if params is not None:
        push["params"] = params
    return push


def _form(**extra: Any) -> JsonObject:
    return _push(
        ELICIT, {"mode": "form", "message": "Confirm?", "requestedSchema": SCHEMA, **extra}
    )


def _url(**extra: Any) -> JsonObject:
    return _push(
        ELICIT,
        {
            "mode": "url",
            "message": "Sign in",
            "url": "https://legacy.example/login",
            "elicitationId": "e-1",
            **extra,
        },
    )


def _sampling(**extra: Any) -> JsonObject:
    message = {"role": "user", "content": {"type": "text", "text": "hi"}}
    return _push(SAMPLE, {"messages": [message], "maxTokens": 10, **extra})


def _assert_refused(answer: JsonObject | PushAnswer, code: int, push_id: int | str = 1) -> None:
    assert isinstance(answer, PushAnswer)
    assert answer.result is None and answer.error is not None
    assert answer.error["code"] == code
    assert_valid(
        {"jsonrpc": "2.0", "id": push_id, "error": answer.error}, "JSONRPCErrorResponse", "legacy"
    )


def _assert_answered(answer: PushAnswer, method: str, push_id: int | str = 1) -> None:
    assert answer.error is None and answer.result is not None
    assert_valid(answer.result, RESULT_DEFS[method], "legacy")
    assert_valid(
        {"jsonrpc": "2.0", "id": push_id, "result": answer.result},
        "JSONRPCResultResponse",
        "legacy",
    )


def _pending(method: str, push_id: int | str | None = 1) -> PendingPush:
    return PendingPush(key="k", push_id=push_id, method=method, input_request={"method": method})


# ---- wire pairs -------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=[pair["name"] for pair in PAIRS])
def test_wire_pairs_push_to_input_request(pair: JsonObject) -> None:
    """Each fixture push becomes exactly its modern input request, under the key the server
    hinted."""
    push, method = pair["push"], pair["push"]["method"]
    assert_valid(push, REQUEST_DEFS[method], "legacy")
    translated = legacy_push_to_input_request(push, pair["client_capabilities"])
    assert translated == pair["input_request"]
    assert_valid(translated, REQUEST_DEFS[method], "modern")
    assert_valid(translated, "InputRequest", "modern")
    assert input_key(push, set()) == pair["key"]


@pytest.mark.parametrize("pair", PAIRS, ids=[pair["name"] for pair in PAIRS])
def test_wire_pairs_input_response_to_legacy(pair: JsonObject) -> None:
    """Each fixture's modern input response becomes exactly its legacy JSON-RPC response."""
    push, method = pair["push"], pair["push"]["method"]
    assert_valid(pair["input_response"], RESULT_DEFS[method], "modern")
    pending = PendingPush(pair["key"], push["id"], method, pair["input_request"])
    answer = input_response_to_legacy(pair["key"], pending, pair["input_response"])
    assert {"jsonrpc": "2.0", "id": push["id"], "result": answer.result} == pair["legacy_response"]
    _assert_answered(answer, method, push["id"])


# ---- elicitation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("push", "capabilities", "forwarded"),
    [
        (_form(), {"elicitation": {}}, True),
        (_form(), {"elicitation": {"form": {}}}, True),
        (_form(), {"elicitation": {"url": {}}}, False),
        (_form(), {}, False),
        (
            _push(ELICIT, {"message": "m", "requestedSchema": SCHEMA}),
            {"elicitation": {"url": {}}},
            False,
        ),
        (_url(), {"elicitation": {"url": {}}}, True),
        (_url(), {"elicitation": {"form": {}, "url": {}}}, True),
        (_url(), {"elicitation": {}}, False),
        (_url(), {"elicitation": {"form": {}}}, False),
        (_url(), {"sampling": {}, "roots": {}}, False),
        (_form(mode="telepathy"), EVERYTHING, False),
    ],
)
def test_elicitation_needs_the_declared_mode(
    push: JsonObject, capabilities: JsonObject, forwarded: bool
) -> None:
    """An elicitation whose mode the request did not declare is refused upstream with -32602."""
    translated = legacy_push_to_input_request(push, capabilities)
    if forwarded:
        assert isinstance(translated, dict)
        assert_valid(translated, "InputRequest", "modern")
    else:
        _assert_refused(translated, INVALID_PARAMS)


def test_form_elicitation_keeps_only_modern_fields() -> None:
    """`_meta` and `task` are dropped and the form mode is made explicit."""
    push = _push(
        ELICIT,
        {
            "message": "m",
            "requestedSchema": SCHEMA,
            "task": {"ttl": 1000},
            "_meta": {"progressToken": 4},
        },
    )
    assert_valid(push, "ElicitRequest", "legacy")
    translated = legacy_push_to_input_request(push, {"elicitation": {}})
    assert translated == {
        "method": ELICIT,
        "params": {"mode": "form", "message": "m", "requestedSchema": SCHEMA},
    }


@pytest.mark.parametrize("mode", [[], {}, ["form"], None, 1])
def test_elicitation_with_a_non_string_mode_is_refused(mode: Any) -> None:
    """A malformed `mode` (any JSON value) is refused upstream with -32602 instead of raising."""
    translated = legacy_push_to_input_request(_form(mode=mode), EVERYTHING)
    _assert_refused(translated, INVALID_PARAMS)


def test_url_elicitation_drops_the_elicitation_id() -> None:
    """Modern URL elicitations have no `elicitationId`; the bridge keeps it only in its pending
    record."""
    translated = legacy_push_to_input_request(_url(), {"elicitation": {"url": {}}})
    assert translated == {
        "method": ELICIT,
        "params": {"mode": "url", "message": "Sign in", "url": "https://legacy.example/login"},
    }
    assert_valid(translated, "ElicitRequest", "modern")


# ---- sampling ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("push", "capabilities", "forwarded"),
    [
        (_sampling(), {"sampling": {}}, True),
        (_sampling(), {"elicitation": {}, "roots": {}}, False),
        (
            _sampling(tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
            {"sampling": {"tools": {}}},
            True,
        ),
        (
            _sampling(tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
            {"sampling": {}},
            False,
        ),
        (
            _sampling(tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
            {"sampling": {"context": {}}},
            False,
        ),
        (_sampling(toolChoice={"mode": "none"}), {"sampling": {}}, False),
        (_sampling(toolChoice={"mode": "none"}), {"sampling": {"tools": {}}}, True),
        (_sampling(), {"sampling": True}, False),
    ],
)
def test_sampling_needs_sampling_and_tools(
    push: JsonObject, capabilities: JsonObject, forwarded: bool
) -> None:
    """Sampling needs `sampling`, and sampling with tools needs `sampling.tools`; refusals are
    legacy -1."""
    assert_valid(push, "CreateMessageRequest", "legacy")
    translated = legacy_push_to_input_request(push, capabilities)
    if forwarded:
        assert isinstance(translated, dict)
        assert translated["params"] == push["params"]
        assert_valid(translated, "CreateMessageRequest", "modern")
    else:
        _assert_refused(translated, LEGACY_SAMPLING_REJECTED)


@pytest.mark.parametrize(
    ("include_context", "capabilities", "forwarded_context"),
    [
        ("thisServer", {"sampling": {}}, "none"),
        ("allServers", {"sampling": {}}, "none"),
        ("thisServer", {"sampling": {"context": {}}}, "thisServer"),
        ("allServers", {"sampling": {"context": {}}}, "allServers"),
        ("none", {"sampling": {}}, "none"),
    ],
)
def test_include_context_is_downgraded_without_sampling_context(
    include_context: str, capabilities: JsonObject, forwarded_context: str
) -> None:
    """Deprecated context inclusion survives only when the request declared `sampling.context`."""
    translated = legacy_push_to_input_request(
        _sampling(includeContext=include_context), capabilities
    )
    assert isinstance(translated, dict)
    assert translated["params"]["includeContext"] == forwarded_context
    assert_valid(translated, "CreateMessageRequest", "modern")


def test_sampling_drops_meta_and_task() -> None:
    """The push's `_meta` (key hint, progress token) and `task` never reach the client."""
    push = _sampling(
        task={"ttl": 5}, _meta={META_INPUT_KEY_HINT: "k", "progressToken": 1}, temperature=0.5
    )
    translated = legacy_push_to_input_request(push, {"sampling": {}})
    assert isinstance(translated, dict)
    assert set(translated["params"]) == {"messages", "maxTokens", "temperature"}


# ---- roots and others --------------------------------------------------------------------------


def test_roots_push_with_roots_declared() -> None:
    """A roots push becomes a bare modern `roots/list` request."""
    push = _push(ROOTS, {"_meta": {"progressToken": 1}})
    translated = legacy_push_to_input_request(push, {"roots": {}})
    assert translated == {"method": ROOTS, "params": {}}
    assert_valid(translated, "ListRootsRequest", "modern")


@pytest.mark.parametrize("capabilities", [{}, {"roots": True}, {"elicitation": {}, "sampling": {}}])
def test_roots_push_without_roots_is_refused(capabilities: JsonObject) -> None:
    """Without a declared `roots` capability the push is answered -32601, the legacy 'not
    supported'."""
    _assert_refused(legacy_push_to_input_request(_push(ROOTS), capabilities), METHOD_NOT_FOUND)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", LEGACY_PING, "x/unknown"])
def test_unknown_pushes_are_refused(method: str) -> None:
    """A push that is not elicitation, sampling or roots is answered Method not found."""
    _assert_refused(legacy_push_to_input_request(_push(method, {}), EVERYTHING), METHOD_NOT_FOUND)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": ELICIT}, True),
        ({"jsonrpc": "2.0", "id": None, "method": ROOTS}, True),
        ({"jsonrpc": "2.0", "method": "notifications/progress"}, False),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, False),
    ],
)
def test_is_push(message: JsonObject, expected: bool) -> None:
    """A push is a message with an id and a string method."""
    assert is_push(message) is expected


# ---- input keys -------------------------------------------------------------------------------


def test_input_key_honours_the_server_hint() -> None:
    """A server-chosen key in `_meta` is used as is."""
    assert input_key(_form(_meta={META_INPUT_KEY_HINT: "confirm"}), set()) == "confirm"


@pytest.mark.parametrize("hint", ["", "x" * (MAX_KEY_LENGTH + 1), 42, None, ["k"]])
def test_input_key_ignores_unusable_hints(hint: Any) -> None:
    """Empty, over-long or non-string hints fall back to the content digest."""
    assert input_key(_form(_meta={META_INPUT_KEY_HINT: hint}), set()) == input_key(_form(), set())


def test_input_key_accepts_a_hint_of_maximum_length() -> None:
    """A hint of exactly the maximum key length is honoured."""
    hint = "k" * MAX_KEY_LENGTH
    assert input_key(_form(_meta={META_INPUT_KEY_HINT: hint}), set()) == hint


@pytest.mark.parametrize(
    "push",
    [_form(), _url(), _sampling(), _push(ROOTS), _push(ROOTS, {})],
    ids=["form", "url", "sampling", "roots-no-params", "roots-empty-params"],
)
def test_input_key_is_kind_and_content_digest(push: JsonObject) -> None:
    """Without a hint the key is `<kind>-<6 hex digits>` of the content, identical on every call."""
    key = input_key(push, set())
    kind, _, digest = key.partition("-")
    assert kind == PUSH_KINDS[push["method"]]
    assert len(digest) == 6 and int(digest, 16) >= 0
    assert input_key(json.loads(json.dumps(push)), set()) == key


def test_input_key_ignores_key_order_push_id_and_meta() -> None:
    """The digest depends on the question only, not on key order, the push id or `_meta`."""
    forward = _push(ELICIT, {"mode": "form", "message": "Confirm?", "requestedSchema": SCHEMA})
    backward = _push(
        ELICIT,
        {
            "requestedSchema": dict(reversed(SCHEMA.items())),
            "message": "Confirm?",
            "mode": "form",
            "_meta": {"progressToken": 9},
        },
        push_id=999,
    )
    assert input_key(forward, set()) == input_key(backward, set())


def test_input_key_differs_for_different_questions() -> None:
    """Two different questions of the same kind get different keys."""
    assert input_key(_form(message="A?"), set()) != input_key(_form(message="B?"), set())
    assert input_key(_sampling(maxTokens=1), set()) != input_key(_sampling(maxTokens=2), set())


def test_input_key_suffixes_duplicates() -> None:
    """The same question asked twice in one round gets `-2`, then `-3`."""
    first = input_key(_form(), set())
    assert input_key(_form(), {first}) == f"{first}-2"
    assert input_key(_form(), {first, f"{first}-2"}) == f"{first}-3"
    hinted = _form(_meta={META_INPUT_KEY_HINT: "confirm"})
    assert input_key(hinted, {"confirm"}) == "confirm-2"
    assert input_key(hinted, {"other"}) == "confirm"


def test_input_key_hints_give_the_same_keys_in_constant_checks() -> None:
    """With hints, the n-th identical question gets the same `-n` key as by scanning, and each
    key is found with at most two membership checks."""

    class Counting(set[str]):
        checks = 0

        def __contains__(self, key: object) -> bool:
            Counting.checks += 1
            return super().__contains__(key)

    taken, plain, hints = Counting(), set[str](), dict[str, int]()
    for _ in range(200):
        key = input_key(_form(), taken, hints)
        assert key == input_key(_form(), plain)
        taken.add(key)
        plain.add(key)
    assert len(taken) == 200 and Counting.checks <= 2 * 200


def test_input_key_of_a_question_with_lone_surrogates() -> None:
    """`json.loads` yields lone surrogates from `\\ud800` escapes; such a push still gets a stable
    key."""
    lone_surrogate = json.loads('"\\ud800"')
    push = _form(message=f"{lone_surrogate}?")
    key = input_key(push, set())
    assert key.startswith(f"{PUSH_KINDS[ELICIT]}-")
    assert input_key(push, set()) == key


def test_input_key_for_unknown_methods_uses_a_generic_kind() -> None:
    """A method without a known kind still gets a usable key."""
    assert input_key(_push("x/unknown", {}), set()).startswith("input-")


# ---- input responses --------------------------------------------------------------------------

VALID_RESPONSES: list[tuple[str, Any]] = [
    (
        ELICIT,
        {"action": "accept", "content": {"name": "a", "n": 3, "ok": True, "tags": ["x", "y"]}},
    ),
    (ELICIT, {"action": "accept"}),
    (ELICIT, {"action": "decline"}),
    (ELICIT, {"action": "cancel"}),
    (SAMPLE, {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}),
    (
        SAMPLE,
        {
            "role": "assistant",
            "content": {"type": "text", "text": "hi"},
            "model": "m",
            "stopReason": "endTurn",
        },
    ),
    (
        SAMPLE,
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "model": "m",
        },
    ),
    (
        SAMPLE,
        {
            "role": "user",
            "content": {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            "model": "m",
        },
    ),
    (ROOTS, {"roots": []}),
    (ROOTS, {"roots": [{"uri": "file:///home/a"}, {"uri": "file:///srv", "name": "srv"}]}),
]
INVALID_RESPONSES: list[tuple[str, Any]] = [
    *((method, 12345) for method in (ELICIT, SAMPLE, ROOTS)),
    *((method, "12345") for method in (ELICIT, SAMPLE, ROOTS)),
    *((method, None) for method in (ELICIT, SAMPLE, ROOTS)),
    *((method, []) for method in (ELICIT, SAMPLE, ROOTS)),
    *((method, {}) for method in (ELICIT, SAMPLE, ROOTS)),
    (ELICIT, {"action": "maybe"}),
    (ELICIT, {"action": 12345}),
    (ELICIT, {"action": "accept", "content": {"nested": {"x": 1}}}),
    (ELICIT, {"action": "accept", "content": {"tags": [1, 2]}}),
    (ELICIT, {"action": "accept", "content": 12345}),
    (SAMPLE, {"role": "system", "content": {"type": "text", "text": "hi"}, "model": "m"}),
    (SAMPLE, {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": 12345}),
    (SAMPLE, {"role": "assistant", "content": {"type": "text", "text": "hi"}}),
    (SAMPLE, {"role": "assistant", "content": "hi", "model": "m"}),
    (SAMPLE, {"role": "assistant", "content": {"text": "hi"}, "model": "m"}),
    (ROOTS, {"roots": "file:///"}),
    (ROOTS, {"roots": [{"uri": ""}]}),
    (ROOTS, {"roots": [{"name": "no uri"}]}),
    (ROOTS, {"roots": [12345]}),
]
# Accepted today but not valid legacy results: the legacy server would receive a malformed response.
SCHEMA_INVALID_RESPONSES = [
    pytest.param(
        SAMPLE,
        {"role": "assistant", "content": {"type": "text"}, "model": "m"},
        id="text-without-text",
    ),
    pytest.param(
        SAMPLE,
        {"role": "assistant", "content": {"type": "bogus"}, "model": "m"},
        id="unknown-content",
    ),
    pytest.param(
        SAMPLE,
        {
            "role": "assistant",
            "content": {"type": "text", "text": "hi"},
            "model": "m",
            "stopReason": None,
        },
        id="null-stop-reason",
    ),
    pytest.param(ELICIT, {"action": "accept", "content": None}, id="null-content"),
    pytest.param(ELICIT, {"action": "accept", "content": {"name": None}}, id="null-content-value"),
    pytest.param(ROOTS, {"roots": [{"uri": "file:///a", "name": None}]}, id="null-root-name"),
]


@pytest.mark.parametrize(("method", "value"), VALID_RESPONSES)
def test_valid_input_responses_become_legacy_results(method: str, value: Any) -> None:
    """A valid answer is sent upstream unchanged as the push's JSON-RPC result."""
    assert_valid(value, RESULT_DEFS[method], "modern")
    answer = input_response_to_legacy("k", _pending(method, push_id=7), value)
    assert answer == PushAnswer(result=value)
    _assert_answered(answer, method, 7)


@pytest.mark.parametrize(("method", "value"), INVALID_RESPONSES)
def test_invalid_input_responses_are_rejected(method: str, value: Any) -> None:
    """An answer that is not a valid result of its push's kind is a -32602 naming the key."""
    with pytest.raises(InvalidParams) as caught:
        input_response_to_legacy("the-key", _pending(method), value)
    assert caught.value.code == INVALID_PARAMS
    assert caught.value.data == {"inputKey": "the-key"}


@pytest.mark.parametrize(("method", "value"), SCHEMA_INVALID_RESPONSES)
def test_answers_that_are_not_schema_valid_legacy_results_are_rejected(
    method: str, value: Any
) -> None:
    """Whatever is accepted must be a schema-valid legacy result; malformed content and nulls are
    not."""
    with pytest.raises(InvalidParams):
        input_response_to_legacy("k", _pending(method), value)


def test_input_response_result_is_a_copy() -> None:
    """The answer sent upstream does not alias the client's request object."""
    value = {"action": "decline"}
    answer = input_response_to_legacy("k", _pending(ELICIT), value)
    assert answer.result == value and answer.result is not value


# ---- refusals and unowned pushes ----------------------------------------------------------------


def test_refusal_of_an_elicitation_is_a_cancel() -> None:
    """An abandoned elicitation is answered `{action: cancel}`."""
    answer = refusal(ELICIT)
    assert answer == PushAnswer(result={"action": "cancel"})
    _assert_answered(answer, ELICIT)


@pytest.mark.parametrize(
    ("method", "code"),
    [(SAMPLE, LEGACY_SAMPLING_REJECTED), (ROOTS, INTERNAL_ERROR), ("x/unknown", INTERNAL_ERROR)],
)
def test_refusal_of_other_pushes_is_an_error(method: str, code: int) -> None:
    """Abandoned sampling is 'user rejected' (-1); anything else is -32603."""
    _assert_refused(refusal(method), code)


@pytest.mark.parametrize("roots", [(), ("file:///srv/a", "file:///srv/b")])
def test_unowned_roots_are_answered_from_configuration(roots: tuple[str, ...]) -> None:
    """A roots push no call owns gets the configured roots."""
    answer = unowned_push_answer(_push(ROOTS), roots)
    assert answer == PushAnswer(result={"roots": [{"uri": uri} for uri in roots]})
    _assert_answered(answer, ROOTS)


def test_unowned_elicitation_is_declined() -> None:
    """An elicitation no call owns is declined."""
    answer = unowned_push_answer(_form(), ("file:///x",))
    assert answer == PushAnswer(result={"action": "decline"})
    _assert_answered(answer, ELICIT)


@pytest.mark.parametrize(
    ("method", "code"), [(SAMPLE, LEGACY_SAMPLING_REJECTED), ("tasks/get", METHOD_NOT_FOUND)]
)
def test_unowned_other_pushes_get_errors(method: str, code: int) -> None:
    """Unowned sampling is rejected with -1 and unknown methods with -32601."""
    _assert_refused(unowned_push_answer(_push(method, {}), ()), code)
