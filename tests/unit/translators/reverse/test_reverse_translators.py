"""The reverse direction's pure mapping (translators/reverse): initialize from server/discover,
the per-request `_meta`, results, input requests as pushes and answers as inputResponses."""

from __future__ import annotations

from typing import Any

import pytest

from translators.check_report import directions
from translators.protocol.revisions import REVISIONS
from translators.reverse.inputs import Push, Refused, input_response, pushes_for
from translators.reverse.session import (
    ClientView,
    initialize_result,
    legacy_result,
    modern_params,
    negotiate,
    open_client,
)
from translators.wire.header_values import encode_header_value, param_headers_for

DISCOVER: dict[str, Any] = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "completions": {},
        "extensions": {"io.example/x": {}},
    },
    "instructions": "Be kind.",
    "ttlMs": 1000,
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up", "version": "2"}},
}


def view(version: str = "2025-11-25", **caps: Any) -> ClientView:
    return ClientView(REVISIONS[version], caps, {"name": "c", "version": "1"})


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        (None, "2025-11-25"),
    ],
)
def test_the_version_is_negotiated_down_as_a_2025_11_25_server_does(
    asked: Any, answered: str
) -> None:
    assert negotiate(asked).version == answered


def test_initialize_result_from_discover() -> None:
    result = initialize_result(view(), DISCOVER, listen_supported=True)
    assert result == {
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "completions": {},
            "logging": {},
        },
        "serverInfo": {"name": "up", "version": "2"},
        "instructions": "Be kind.",
    }
    oldest = initialize_result(view("2024-11-05"), DISCOVER, listen_supported=False)
    assert oldest["capabilities"] == {"tools": {}, "resources": {}, "logging": {}}
    assert initialize_result(view(), {}, listen_supported=True)["serverInfo"] == {
        "name": "mcp-server",
        "version": "unknown",
    }


def test_open_client_keeps_only_object_capabilities() -> None:
    opened = open_client(
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {"roots": {"listChanged": True}, "sampling": True},
            "clientInfo": {"name": "c", "version": "1"},
        }
    )
    assert (opened.revision.version, opened.capabilities) == (
        "2025-06-18",
        {"roots": {"listChanged": True}},
    )


def test_each_request_carries_the_sessions_meta_and_keeps_its_own() -> None:
    session = view(elicitation={}, tasks={})
    session.log_level = "info"
    params = modern_params(
        session,
        {
            "name": "t",
            "_meta": {"progressToken": 7, "io.modelcontextprotocol/protocolVersion": "forged"},
        },
        {"requestState": "s"},
    )
    assert params == {
        "name": "t",
        "requestState": "s",
        "_meta": {
            "progressToken": 7,
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "io.modelcontextprotocol/logLevel": "info",
        },
    }


def test_results_lose_what_only_the_modern_era_has() -> None:
    result = {
        "resultType": "complete",
        "ttlMs": 5,
        "cacheScope": "public",
        "tools": [],
        "nextCursor": "c2",
        "_meta": {"io.modelcontextprotocol/serverInfo": {}, "com.example/x": 1},
    }
    assert legacy_result(result) == {"tools": [], "nextCursor": "c2", "_meta": {"com.example/x": 1}}


def elicit(mode: str = "form", **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"mode": mode, "message": "m", **extra}
    return {"method": "elicitation/create", "params": params}


def test_input_requests_become_pushes_in_order() -> None:
    requests = {
        "a": elicit(requestedSchema={"type": "object"}),
        "b": elicit("url", url="https://x.example"),
        "c": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}},
        "d": {"method": "roots/list"},
    }
    client = view(elicitation={"form": {}, "url": {}}, sampling={}, roots={})
    assert pushes_for(requests, client, lambda: "minted") == [
        Push(
            "a",
            "elicitation/create",
            {"mode": "form", "message": "m", "requestedSchema": {"type": "object"}},
        ),
        Push(
            "b",
            "elicitation/create",
            {"mode": "url", "message": "m", "url": "https://x.example", "elicitationId": "minted"},
        ),
        Push("c", "sampling/createMessage", {"messages": [], "maxTokens": 5}),
        Push("d", "roots/list", {}),
    ]


def test_pushes_follow_the_revision_and_what_the_client_declared() -> None:
    older = pushes_for({"a": elicit()}, view("2025-06-18", elicitation={}), lambda: "x")
    assert older == [Push("a", "elicitation/create", {"message": "m"})]
    form_only = pushes_for({"u": elicit("url", url="u")}, view(elicitation={}), lambda: "x")
    assert form_only == Refused(
        {
            "code": -32602,
            "message": "Client does not support elicitation mode 'url'",
            "data": {"inputKey": "u"},
        }
    )
    sampling = {"method": "sampling/createMessage", "params": {"tools": [], "maxTokens": 1}}
    assert pushes_for({"s": sampling}, view("2025-06-18", sampling={}), lambda: "x") == [
        Push("s", "sampling/createMessage", {"maxTokens": 1})
    ]
    for request, message in (
        (sampling, "Client does not support sampling"),
        ({"method": "roots/list"}, "Client does not support roots"),
        (elicit(), "Client does not support elicitation"),
    ):
        refused = pushes_for({"k": request}, view("2025-03-26", elicitation={}), lambda: "x")
        assert refused == Refused({"code": -32602, "message": message, "data": {"inputKey": "k"}})
    too_many = pushes_for(
        {str(n): {"method": "roots/list"} for n in range(33)}, view(roots={}), str
    )
    assert isinstance(too_many, Refused) and too_many.error["code"] == -32603
    odd = pushes_for({"z": {"method": "tasks/get"}}, view(), str)
    assert odd == Refused(
        {
            "code": -32603,
            "message": "The server asked for an unknown input: 'tasks/get'",
            "data": {"inputKey": "z"},
        }
    )


def test_answers_become_input_responses_and_errors_fail_the_request() -> None:
    push = Push("k", "elicitation/create", {})
    assert input_response(
        push, {"result": {"action": "accept", "content": {"a": 1}, "_meta": {}}}
    ) == {
        "action": "accept",
        "content": {"a": 1},
    }
    assert input_response(push, {"error": {"code": -1, "message": "no"}}) == Refused(
        {"code": -1, "message": "no", "data": {"inputKey": "k"}}
    )
    assert input_response(push, {}) == Refused(
        {"code": -32603, "message": "elicitation/create failed", "data": {"inputKey": "k"}}
    )


@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("get_weather", "get_weather"),
        ("file:///a b", "file:///a b"),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("héllo", "=?base64?aMOpbGxv?="),
        ("=?base64?x?=", "=?base64?PT9iYXNlNjQ/eD89?="),
    ],
)
def test_mcp_name_header_values(value: str, header: str) -> None:
    assert encode_header_value(value) == header


def test_check_names_the_direction_of_each_kind_of_client() -> None:
    assert directions("legacy", "streamable-http") == {
        "modernClients": "translated",
        "legacyClients": "relayed",
    }
    assert directions("modern", "streamable-http") == {
        "modernClients": "relayed",
        "legacyClients": "reverse",
    }
    assert directions("dual", "stdio") == {
        "modernClients": "translated",
        "legacyClients": "refused",
    }
    assert directions(None, None) == {"modernClients": None, "legacyClients": None}


def test_param_headers_mirror_annotated_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "note": {"type": "string"},
        },
    }
    assert param_headers_for(schema, {"region": "ünïcode", "n": 3, "note": "x"}) == {
        "Mcp-Param-Region": "=?base64?w7xuw69jb2Rl?=",
        "Mcp-Param-N": "3",
    }
    assert param_headers_for(schema, {}) == {}
    bad = {"type": "object", "properties": {"a": {"type": "object", "x-mcp-header": "A"}}}
    assert param_headers_for(bad, {"a": {}}) == {}
