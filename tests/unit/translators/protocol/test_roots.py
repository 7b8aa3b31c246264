"""Roots-affine sessions, the pure parts (translators.protocol.roots; issue 10)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_check import assert_valid

from translators.protocol.eras import ROOTS
from translators.protocol.pushes import input_key
from translators.protocol.results import input_required_result
from translators.protocol.roots import (
    ROOTS_INPUT_KEY,
    client_roots,
    declares_roots,
    is_roots_ask,
    legacy_capabilities_without_roots,
    roots_digest,
    roots_input_requests,
)
from translators.wire.errors import InvalidParams
from translators.wire.jsonrpc import JsonObject

A: JsonObject = {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///shared"}]}


def test_the_stable_key_is_the_key_of_a_plain_roots_push() -> None:
    """The bridge's own question and a server's in-call roots/list push share one key, whatever the
    push's id or _meta: one pre-answer serves both."""
    push = {"jsonrpc": "2.0", "id": 41, "method": ROOTS, "params": {"_meta": {"progressToken": 3}}}
    assert input_key(push, set()) == ROOTS_INPUT_KEY
    assert ROOTS_INPUT_KEY == input_key({"method": ROOTS}, set())
    assert ROOTS_INPUT_KEY == "roots-ddbcb6"  # docs/migration.md: clients may hard-code it


def test_the_question_is_a_valid_input_required_result_without_request_state() -> None:
    result = input_required_result(roots_input_requests(), None, server_info=None)
    assert result == {
        "resultType": "input_required",
        "inputRequests": {ROOTS_INPUT_KEY: {"method": ROOTS, "params": {}}},
    }
    assert_valid(result, "InputRequiredResult", "modern")


def test_client_roots_absent_is_none() -> None:
    assert client_roots({}) is None
    assert client_roots({"elicit-abc": {"action": "accept"}}) is None


def test_client_roots_are_checked_and_normalized() -> None:
    answer = {"roots": [{"uri": "file:///a", "name": "A", "_meta": {"x": 1}}, {"uri": "file:///b"}]}
    assert client_roots({ROOTS_INPUT_KEY: answer}) == {
        "roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]
    }
    assert client_roots({ROOTS_INPUT_KEY: {"roots": []}}) == {"roots": []}


@pytest.mark.parametrize(
    "bad",
    [
        {"roots": [{"uri": ""}]},
        {"roots": "file:///a"},
        {"roots": [{"name": "no uri"}]},
        {},
        [],
        None,
        {"roots": [{"uri": 7}]},
    ],
)
def test_a_malformed_roots_answer_is_invalid_params(bad: Any) -> None:
    with pytest.raises(InvalidParams) as caught:
        client_roots({ROOTS_INPUT_KEY: bad})
    assert caught.value.data == {"inputKey": ROOTS_INPUT_KEY}


def test_the_digest_names_the_set_of_roots() -> None:
    reordered = {"roots": list(reversed(A["roots"]))}
    assert roots_digest(A) == roots_digest(reordered)
    assert len(roots_digest(A)) == 24
    # name counts
    assert roots_digest(A) != roots_digest(
        {"roots": [{"uri": "file:///a"}, {"uri": "file:///shared"}]}
    )
    assert roots_digest(A) != roots_digest({"roots": A["roots"][:1]})
    assert roots_digest({"roots": []}) != roots_digest(A)


def test_roots_capability_and_asks() -> None:
    assert declares_roots({"roots": {}}) and declares_roots({"roots": {"listChanged": True}})
    assert not declares_roots({}) and not declares_roots({"roots": True})
    assert is_roots_ask({"jsonrpc": "2.0", "id": 1, "method": ROOTS})
    assert not is_roots_ask({"jsonrpc": "2.0", "method": ROOTS})
    assert not is_roots_ask({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create"})


def test_requests_that_cannot_be_asked_declare_everything_but_roots() -> None:
    legacy = {"roots": {}, "elicitation": {"form": {}}, "sampling": {}}
    assert legacy_capabilities_without_roots(legacy) == {
        "elicitation": {"form": {}},
        "sampling": {},
    }
    assert legacy == {"roots": {}, "elicitation": {"form": {}}, "sampling": {}}  # not modified


_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["roots", "uri", "name", "_meta"]) | st.text(max_size=4),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


_answers = st.fixed_dictionaries(
    {
        "roots": st.lists(
            st.fixed_dictionaries(
                {"uri": st.text(max_size=5) | _scalars},
                optional={"name": st.text(max_size=3) | _scalars, "_meta": _values},
            ),
            max_size=3,
        )
    }
)


@settings(max_examples=300, deadline=None)
@given(_answers | _values)
def test_any_pre_answer_is_accepted_normalized_or_invalid_params(value: Any) -> None:
    """Whatever a client sends under the roots key: a normalized answer with a stable digest, or
    -32602."""
    try:
        roots = client_roots({ROOTS_INPUT_KEY: value})
    except InvalidParams:
        return
    assert roots is not None
    assert all(
        isinstance(root["uri"], str) and root["uri"] and set(root) <= {"uri", "name"}
        for root in roots["roots"]
    )
    assert roots_digest(roots) == roots_digest({"roots": list(reversed(roots["roots"]))})
