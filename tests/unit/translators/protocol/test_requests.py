"""Modern request -> legacy request (translators.protocol.requests)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from schema_check import assert_valid

from translators.protocol.eras import (
    COMPLETION_COMPLETE,
    DISCOVER,
    FORWARDED_METHODS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PREFIX,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    METHOD_CAPABILITY,
    MODERN_VERSION,
    NAMED_METHODS,
    PROMPTS_GET,
    PROMPTS_LIST,
    RESOURCES_LIST,
    RESOURCES_READ,
    RESOURCES_TEMPLATES_LIST,
    SUBSCRIPTIONS_LISTEN,
    TOOLS_CALL,
    TOOLS_LIST,
    TRACE_META_KEYS,
)
from translators.protocol.requests import (
    modern_params_to_legacy,
    require_upstream_capability,
    salient_params,
)
from translators.wire.errors import METHOD_NOT_FOUND, MethodNotFound
from translators.wire.jsonrpc import JsonObject

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PAIRS: list[JsonObject] = json.loads((FIXTURES / "requests.json").read_text(encoding="utf-8"))[
    "pairs"
]

REQUEST_DEFS: dict[str, str] = {
    TOOLS_CALL: "CallToolRequest",
    PROMPTS_GET: "GetPromptRequest",
    RESOURCES_READ: "ReadResourceRequest",
    TOOLS_LIST: "ListToolsRequest",
    PROMPTS_LIST: "ListPromptsRequest",
    RESOURCES_LIST: "ListResourcesRequest",
    RESOURCES_TEMPLATES_LIST: "ListResourceTemplatesRequest",
    COMPLETION_COMPLETE: "CompleteRequest",
}


def _request(request_id: str | int, method: str, params: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _modern_meta(**extra: Any) -> JsonObject:
    return {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}, **extra}


def test_every_forwarded_method_has_a_schema_definition_in_this_table() -> None:
    """The request table covers every method the bridge forwards upstream."""
    assert set(REQUEST_DEFS) == set(FORWARDED_METHODS)


@pytest.mark.parametrize("pair", PAIRS, ids=[pair["name"] for pair in PAIRS])
def test_wire_pairs(pair: JsonObject) -> None:
    """Each fixture's modern params become exactly its legacy params, and both sides are
    schema-valid."""
    method = pair["method"]
    assert_valid(_request("c-1", method, pair["modern"]), REQUEST_DEFS[method], "modern")
    legacy = modern_params_to_legacy(
        pair["modern"], upstream_progress_token=pair["upstream_progress_token"]
    )
    assert legacy == pair["legacy"]
    assert_valid(_request(2, method, legacy), REQUEST_DEFS[method], "legacy")


@pytest.mark.parametrize(
    "reserved",
    [
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
        META_CLIENT_INFO,
        META_LOG_LEVEL,
        f"{META_PREFIX}not-yet-defined",
    ],
)
def test_reserved_meta_keys_are_stripped(reserved: str) -> None:
    """No `io.modelcontextprotocol/*` key reaches the legacy server."""
    params = {"_meta": {**_modern_meta(), reserved: "value"}, "name": "t"}
    assert modern_params_to_legacy(params, upstream_progress_token=None) == {"name": "t"}


@pytest.mark.parametrize("trace_key", sorted(TRACE_META_KEYS))
def test_trace_context_keys_pass_through(trace_key: str) -> None:
    """W3C trace context keys are forwarded unchanged."""
    params = {"_meta": _modern_meta(**{trace_key: "v"}), "name": "t"}
    assert modern_params_to_legacy(params, upstream_progress_token=None) == {
        "name": "t",
        "_meta": {trace_key: "v"},
    }


def test_vendor_meta_keys_pass_through() -> None:
    """Keys under a vendor prefix are the caller's business and are kept."""
    vendor = {"com.example/tenant": "acme", "dev.tool/flags": [1, 2], "plain": {"x": None}}
    params = {"_meta": _modern_meta(**vendor), "name": "t"}
    assert modern_params_to_legacy(params, upstream_progress_token=None) == {
        "name": "t",
        "_meta": vendor,
    }


@pytest.mark.parametrize(
    ("front_token", "upstream_token", "expected_meta"),
    [
        ("front-1", 17, {META_PROGRESS_TOKEN: 17}),
        (5, "up-5", {META_PROGRESS_TOKEN: "up-5"}),
        (None, 18, {META_PROGRESS_TOKEN: 18}),
        ("front-2", None, None),
    ],
)
def test_progress_token_is_rewritten(
    front_token: str | int | None,
    upstream_token: str | int | None,
    expected_meta: JsonObject | None,
) -> None:
    """The front's token never goes upstream; the bridge's own token replaces it when one is
    given."""
    meta = (
        _modern_meta()
        if front_token is None
        else _modern_meta(**{META_PROGRESS_TOKEN: front_token})
    )
    legacy = modern_params_to_legacy(
        {"_meta": meta, "name": "t"}, upstream_progress_token=upstream_token
    )
    assert legacy.get("_meta") == expected_meta


@pytest.mark.parametrize("dropped", ["inputResponses", "requestState"])
def test_modern_only_fields_are_dropped(dropped: str) -> None:
    """`inputResponses` and `requestState` are consumed by the bridge and never forwarded."""
    params = {"_meta": _modern_meta(), "name": "t", "arguments": {"a": 1}, dropped: {"k": {}}}
    assert modern_params_to_legacy(params, upstream_progress_token=None) == {
        "name": "t",
        "arguments": {"a": 1},
    }


def test_arguments_named_like_modern_fields_are_untouched() -> None:
    """Only top-level params are stripped: tool arguments with the same names are the tool's."""
    arguments = {"inputResponses": 1, "requestState": "x", "_meta": {META_PROTOCOL_VERSION: "?"}}
    params = {"_meta": _modern_meta(), "name": "t", "arguments": arguments}
    assert modern_params_to_legacy(params, upstream_progress_token=None) == {
        "name": "t",
        "arguments": arguments,
    }


def test_non_object_meta_is_dropped() -> None:
    """A `_meta` that is not an object forwards nothing but the bridge's progress token."""
    assert modern_params_to_legacy({"_meta": [1], "name": "t"}, upstream_progress_token=None) == {
        "name": "t"
    }
    assert modern_params_to_legacy({"_meta": "x"}, upstream_progress_token=3) == {
        "_meta": {META_PROGRESS_TOKEN: 3}
    }


def test_translation_does_not_mutate_the_front_request() -> None:
    """The front params (kept for retries and logging) are left as they were."""
    params = copy.deepcopy(PAIRS[2]["modern"])
    before = copy.deepcopy(params)
    modern_params_to_legacy(params, upstream_progress_token=1)
    assert params == before


@pytest.mark.parametrize(("method", "capability"), sorted(METHOD_CAPABILITY.items()))
def test_gated_methods_need_the_upstream_capability(method: str, capability: str) -> None:
    """A method whose upstream capability is absent (or not an object) answers Method not found."""
    require_upstream_capability(method, {capability: {}})
    for offered in ({}, {capability: True}, {capability: None}):
        with pytest.raises(MethodNotFound) as caught:
            require_upstream_capability(method, offered)
        assert caught.value.code == METHOD_NOT_FOUND


@pytest.mark.parametrize("method", [DISCOVER, SUBSCRIPTIONS_LISTEN])
def test_ungated_methods_need_no_upstream_capability(method: str) -> None:
    """Methods the bridge serves itself are never gated."""
    require_upstream_capability(method, {})


@pytest.mark.parametrize(("method", "field"), sorted(NAMED_METHODS.items()))
def test_salient_params_name_the_target_and_arguments(method: str, field: str) -> None:
    """The requestState binding covers the method, the name or uri, and the arguments,
    nothing else."""
    params = {field: "target", "arguments": {"a": 1}, "_meta": _modern_meta(), "requestState": "s"}
    assert salient_params(method, params) == {"m": method, "n": "target", "a": {"a": 1}}
    assert salient_params(method, {**params, "inputResponses": {"k": {}}}) == salient_params(
        method, params
    )
    assert salient_params(method, {**params, field: "other"}) != salient_params(method, params)
    assert salient_params(method, {**params, "arguments": {"a": 2}}) != salient_params(
        method, params
    )
