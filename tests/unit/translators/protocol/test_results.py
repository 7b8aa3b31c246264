"""Legacy result/error -> modern result (translators.protocol.results)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from schema_check import assert_valid

from translators.protocol.eras import (
    CACHEABLE_METHODS,
    COMPLETION_COMPLETE,
    ELICIT,
    FORWARDED_METHODS,
    META_RELATED_TASK,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    PROMPTS_GET,
    PROMPTS_LIST,
    RESOURCES_LIST,
    RESOURCES_READ,
    RESOURCES_TEMPLATES_LIST,
    RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
    ROOTS,
    TOOLS_CALL,
    TOOLS_LIST,
)
from translators.protocol.results import (
    CacheHints,
    discover_result,
    input_required_result,
    legacy_error_to_modern,
    legacy_result_to_modern,
)
from translators.wire.errors import (
    BRIDGE_MARKER,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_RESOURCE_NOT_FOUND,
    LEGACY_SAMPLING_REJECTED,
    LEGACY_URL_ELICITATION_REQUIRED,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RESERVED_RANGE,
    UNSUPPORTED_VERSION,
)
from translators.wire.jsonrpc import JsonObject

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
FIXTURE: JsonObject = json.loads((FIXTURES / "results.json").read_text(encoding="utf-8"))
PAIRS: list[JsonObject] = FIXTURE["pairs"]
SERVER_INFO: JsonObject = FIXTURE["server_info"]
PRIVATE_NO_TTL = CacheHints(ttl_ms=0, scope="private")
PUBLIC_MINUTE = CacheHints(ttl_ms=60_000, scope="public")
PRIVATE_NONE = CacheHints(ttl_ms=0, scope="private")

RESULT_DEFS: dict[str, str] = {
    TOOLS_CALL: "CallToolResult",
    PROMPTS_GET: "GetPromptResult",
    RESOURCES_READ: "ReadResourceResult",
    TOOLS_LIST: "ListToolsResult",
    PROMPTS_LIST: "ListPromptsResult",
    RESOURCES_LIST: "ListResourcesResult",
    RESOURCES_TEMPLATES_LIST: "ListResourceTemplatesResult",
    COMPLETION_COMPLETE: "CompleteResult",
}
MINIMAL_LEGACY: dict[str, JsonObject] = {
    TOOLS_CALL: {"content": []},
    PROMPTS_GET: {"messages": []},
    RESOURCES_READ: {"contents": []},
    TOOLS_LIST: {"tools": []},
    PROMPTS_LIST: {"prompts": []},
    RESOURCES_LIST: {"resources": []},
    RESOURCES_TEMPLATES_LIST: {"resourceTemplates": []},
    COMPLETION_COMPLETE: {"completion": {"values": []}},
}
FORM_REQUEST: JsonObject = {
    "method": ELICIT,
    "params": {
        "mode": "form",
        "message": "Confirm?",
        "requestedSchema": {"type": "object", "properties": {}},
    },
}


def test_every_forwarded_method_has_a_result_definition_in_this_table() -> None:
    """The result table covers every method whose result the bridge translates."""
    assert set(RESULT_DEFS) == set(FORWARDED_METHODS) == set(MINIMAL_LEGACY)


@pytest.mark.parametrize("pair", PAIRS, ids=[pair["name"] for pair in PAIRS])
def test_wire_pairs(pair: JsonObject) -> None:
    """Each fixture's legacy result becomes exactly its modern result, valid against the modern
    schema."""
    method = pair["method"]
    assert_valid(pair["legacy"], RESULT_DEFS[method], "legacy")
    modern = legacy_result_to_modern(
        method, pair["legacy"], server_info=SERVER_INFO, cache=PRIVATE_NO_TTL
    )
    assert modern == pair["modern"]
    assert_valid(modern, RESULT_DEFS[method], "modern")
    assert_valid(
        {"jsonrpc": "2.0", "id": "c-1", "result": modern}, "JSONRPCResultResponse", "modern"
    )


@pytest.mark.parametrize("method", sorted(RESULT_DEFS))
def test_cache_hints_only_on_cacheable_results(method: str) -> None:
    """`ttlMs`/`cacheScope` are stamped on discover/list/read results and nowhere else."""
    modern = legacy_result_to_modern(
        method, MINIMAL_LEGACY[method], server_info=None, cache=PUBLIC_MINUTE
    )
    assert modern["resultType"] == RESULT_COMPLETE
    if method in CACHEABLE_METHODS:
        assert (modern["ttlMs"], modern["cacheScope"]) == (
            PUBLIC_MINUTE.ttl_ms,
            PUBLIC_MINUTE.scope,
        )
    else:
        assert "ttlMs" not in modern and "cacheScope" not in modern
    assert_valid(modern, RESULT_DEFS[method], "modern")


@pytest.mark.parametrize("method", sorted(RESULT_DEFS))
def test_an_upstream_cache_claim_is_replaced_by_the_bridges(method: str) -> None:
    """A legacy server's own `ttlMs`/`cacheScope` never reach the client (found by
    test_properties: `{"ttlMs": null}` on `completion/complete` was passed through)."""
    claim = {**MINIMAL_LEGACY[method], "ttlMs": None, "cacheScope": "public"}
    modern = legacy_result_to_modern(method, claim, server_info=None, cache=PRIVATE_NONE)
    if method in CACHEABLE_METHODS:
        assert (modern["ttlMs"], modern["cacheScope"]) == (0, "private")
    else:
        assert "ttlMs" not in modern and "cacheScope" not in modern


@pytest.mark.parametrize("method", sorted(RESULT_DEFS))
def test_no_server_info_means_no_empty_meta(method: str) -> None:
    """Without a serverInfo and without upstream `_meta` the result carries no `_meta` at all."""
    modern = legacy_result_to_modern(
        method, MINIMAL_LEGACY[method], server_info=None, cache=PRIVATE_NO_TTL
    )
    assert "_meta" not in modern


def test_related_task_meta_alone_leaves_no_meta() -> None:
    """A `_meta` that held only the related-task key disappears with it."""
    legacy = {"content": [], "_meta": {META_RELATED_TASK: {"taskId": "t"}}}
    modern = legacy_result_to_modern(TOOLS_CALL, legacy, server_info=None, cache=PRIVATE_NO_TTL)
    assert modern == {"content": [], "resultType": RESULT_COMPLETE}


def test_server_info_overrides_an_upstream_claim() -> None:
    """The bridge's serverInfo replaces any serverInfo key the upstream put in `_meta`."""
    legacy = {"content": [], "_meta": {META_SERVER_INFO: {"name": "spoof", "version": "0"}}}
    modern = legacy_result_to_modern(
        TOOLS_CALL, legacy, server_info=SERVER_INFO, cache=PRIVATE_NO_TTL
    )
    assert modern["_meta"] == {META_SERVER_INFO: SERVER_INFO}


def test_tool_execution_is_dropped_from_every_tool() -> None:
    """`Tool.execution` does not exist in the modern era and is removed from each listed tool."""
    tools = [
        {
            "name": f"t{n}",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "optional"},
        }
        for n in range(3)
    ]
    modern = legacy_result_to_modern(
        TOOLS_LIST, {"tools": tools}, server_info=None, cache=PRIVATE_NO_TTL
    )
    assert all("execution" not in tool for tool in modern["tools"])
    assert [tool["name"] for tool in modern["tools"]] == ["t0", "t1", "t2"]
    assert all("execution" in tool for tool in tools)


def test_legacy_result_is_not_mutated() -> None:
    """Translation copies: the upstream result object is left as received."""
    legacy = json.loads(json.dumps(PAIRS[1]["legacy"]))
    legacy_result_to_modern(TOOLS_LIST, legacy, server_info=SERVER_INFO, cache=PRIVATE_NO_TTL)
    assert legacy == PAIRS[1]["legacy"]


def test_input_required_result() -> None:
    """An interim result carries its requests, the state and serverInfo, and never cache hints."""
    result = input_required_result({"confirm": FORM_REQUEST}, "v1.state", server_info=SERVER_INFO)
    assert result == {
        "resultType": RESULT_INPUT_REQUIRED,
        "requestState": "v1.state",
        "inputRequests": {"confirm": FORM_REQUEST},
        "_meta": {META_SERVER_INFO: SERVER_INFO},
    }
    assert_valid(result, "InputRequiredResult", "modern")


def test_input_required_result_with_only_a_state() -> None:
    """With nothing to ask, the result is a state-only InputRequiredResult without
    `inputRequests`."""
    result = input_required_result({}, "v1.state", server_info=None)
    assert result == {"resultType": RESULT_INPUT_REQUIRED, "requestState": "v1.state"}
    assert_valid(result, "InputRequiredResult", "modern")


def test_input_required_result_with_several_kinds() -> None:
    """Elicitation, sampling and roots requests validate together as modern `InputRequests`."""
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    requests = {"a": FORM_REQUEST, "b": sampling, "c": {"method": ROOTS, "params": {}}}
    result = input_required_result(requests, "v1.s", server_info=SERVER_INFO)
    assert_valid(result, "InputRequiredResult", "modern")
    assert "ttlMs" not in result and "cacheScope" not in result


@pytest.mark.parametrize(
    ("listen_supported", "expected"),
    [(True, "modern_with_listen"), (False, "modern_without_listen")],
)
def test_discover_result(listen_supported: bool, expected: str) -> None:
    """`server/discover` is synthesized from the InitializeResult: versions, capabilities,
    instructions."""
    pair = FIXTURE["discover"]
    assert_valid(pair["initialize_result"], "InitializeResult", "legacy")
    result = discover_result(
        pair["initialize_result"],
        server_info=SERVER_INFO,
        cache=PRIVATE_NO_TTL,
        listen_supported=listen_supported,
    )
    assert result == pair[expected]
    assert result["supportedVersions"] == list(MODERN_VERSIONS)
    assert_valid(result, "DiscoverResult", "modern")


def test_discover_result_from_a_sparse_initialize_result() -> None:
    """Missing or malformed capabilities and instructions still give a valid DiscoverResult."""
    result = discover_result(
        {"capabilities": "nope", "instructions": 7},
        server_info=None,
        cache=PUBLIC_MINUTE,
        listen_supported=True,
    )
    assert result == {
        "resultType": RESULT_COMPLETE,
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": {},
        "ttlMs": PUBLIC_MINUTE.ttl_ms,
        "cacheScope": PUBLIC_MINUTE.scope,
    }
    assert_valid(result, "DiscoverResult", "modern")


# ---- errors -----------------------------------------------------------------------------------

SERVER_ERROR_TOP = RESERVED_RANGE.stop + 19  # -32000: implementation-defined server errors may pass
PASSED_THROUGH = [
    PARSE_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    INVALID_PARAMS,
    INTERNAL_ERROR,
    MISSING_CLIENT_CAPABILITY,
    RESERVED_RANGE.stop,
    RESERVED_RANGE.start - 1,
    SERVER_ERROR_TOP,
    LEGACY_SAMPLING_REJECTED,
    0,
    42,
]
REMAPPED = [
    RESERVED_RANGE.start,
    RESERVED_RANGE[-1],
    HEADER_MISMATCH,
    UNSUPPORTED_VERSION,
    LEGACY_URL_ELICITATION_REQUIRED,
    RESERVED_RANGE[len(RESERVED_RANGE) // 2],
]
STANDARD_DEFS = {
    PARSE_ERROR: "ParseError",
    INVALID_REQUEST: "InvalidRequestError",
    METHOD_NOT_FOUND: "MethodNotFoundError",
    INVALID_PARAMS: "InvalidParamsError",
    INTERNAL_ERROR: "InternalError",
    MISSING_CLIENT_CAPABILITY: "Error",
}


def _assert_valid_error(error: JsonObject) -> None:
    assert_valid({"jsonrpc": "2.0", "id": "c-1", "error": error}, "JSONRPCErrorResponse", "modern")
    assert_valid(error, STANDARD_DEFS.get(error["code"], "Error"), "modern")


@pytest.mark.parametrize("code", PASSED_THROUGH)
def test_error_codes_that_pass_through(code: int) -> None:
    """Standard codes, -32021 and codes outside the reserved range keep code, message and data."""
    error = {"code": code, "message": "Upstream says no", "data": {"detail": [1, 2]}}
    mapped = legacy_error_to_modern(error)
    assert mapped == error
    _assert_valid_error(mapped)


def test_error_without_data_gets_no_data() -> None:
    """A passed-through error without `data` does not grow one."""
    assert legacy_error_to_modern({"code": INVALID_PARAMS, "message": "m"}) == {
        "code": INVALID_PARAMS,
        "message": "m",
    }


@pytest.mark.parametrize("code", REMAPPED)
def test_reserved_range_codes_become_internal_errors(code: int) -> None:
    """A code in the spec-reserved range is not emitted; the front sees -32603 with the original in
    `data`."""
    mapped = legacy_error_to_modern({"code": code, "message": "Reserved thing", "data": {"x": 1}})
    assert mapped == {
        "code": INTERNAL_ERROR,
        "message": "Reserved thing",
        "data": {"source": BRIDGE_MARKER, "upstreamCode": code, "upstreamData": {"x": 1}},
    }
    _assert_valid_error(mapped)


@pytest.mark.parametrize(
    ("data", "request_uri", "expected_data"),
    [
        ({"uri": "file:///a"}, "file:///b", {"uri": "file:///a"}),
        ({"uri": "file:///a", "hint": "gone"}, None, {"uri": "file:///a", "hint": "gone"}),
        (None, "file:///b", {"uri": "file:///b"}),
        ({"hint": "gone"}, "file:///b", {"hint": "gone", "uri": "file:///b"}),
        ({"uri": 7}, "file:///b", {"uri": "file:///b"}),
        ("not an object", "file:///b", {"uri": "file:///b"}),
        (None, None, {"uri": ""}),
    ],
)
def test_resource_not_found_becomes_invalid_params(
    data: Any, request_uri: str | None, expected_data: JsonObject
) -> None:
    """Legacy -32002 becomes -32602 whose `data.uri` names the resource."""
    error: JsonObject = {"code": LEGACY_RESOURCE_NOT_FOUND, "message": "Resource not found"}
    if data is not None:
        error["data"] = data
    mapped = legacy_error_to_modern(error, request_uri=request_uri)
    assert mapped == {
        "code": INVALID_PARAMS,
        "message": "Resource not found",
        "data": expected_data,
    }
    _assert_valid_error(mapped)


@pytest.mark.parametrize(
    "error",
    [
        {},
        {"message": "no code"},
        {"code": str(INTERNAL_ERROR), "message": "m"},
        {"code": True, "message": "m"},
        {"code": float(INTERNAL_ERROR), "message": "m"},
        {"code": None},
    ],
)
def test_malformed_errors_become_bridge_internal_errors(error: JsonObject) -> None:
    """An error object without an integer code is answered as a bridge-local -32603."""
    mapped = legacy_error_to_modern(error)
    assert mapped["code"] == INTERNAL_ERROR
    assert mapped["data"] == {"source": BRIDGE_MARKER}
    _assert_valid_error(mapped)


@pytest.mark.parametrize("message", [None, 7, ["x"], {"m": 1}])
def test_non_string_error_messages_are_replaced(message: Any) -> None:
    """The front always gets a string message, even when the upstream sent none."""
    mapped = legacy_error_to_modern({"code": INVALID_PARAMS, "message": message})
    assert isinstance(mapped["message"], str) and mapped["message"]
    _assert_valid_error(mapped)


def test_tools_that_need_tasks_are_hidden() -> None:
    """A legacy tool with execution.taskSupport "required" cannot be called without tasks: it is not
    listed."""
    tools = [
        {"name": "plain", "inputSchema": {"type": "object"}},
        {
            "name": "optional",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "optional"},
        },
        {
            "name": "required",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"},
        },
    ]
    modern = legacy_result_to_modern(
        TOOLS_LIST, {"tools": tools}, server_info=None, cache=CacheHints(0, "private")
    )
    assert [tool["name"] for tool in modern["tools"]] == ["plain", "optional"]
    assert all("execution" not in tool for tool in modern["tools"])
