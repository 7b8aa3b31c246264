"""The wire checks of the older-revision tests (`wire_records.py`) catch what they must: no peers
needed."""

from __future__ import annotations

from typing import Any

import pytest

from .wire_records import front_problems, upstream_problems

SESSION = "s1"


def sent(
    message: Any, *, version: str | None = None, http: str | None = "POST", xid: int = 1
) -> dict[str, Any]:
    return {
        "dir": "sent",
        "xid": xid,
        "session": SESSION,
        "version": version,
        "http": http,
        "path": "/mcp",
        "message": message,
    }


def received(message: Any, *, xid: int = 1) -> dict[str, Any]:
    return {
        "dir": "received",
        "xid": xid,
        "session": SESSION,
        "version": None,
        "http": "POST",
        "path": "/mcp",
        "message": message,
    }


def initialize(capabilities: dict[str, Any]) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "mrtr-bridge", "version": "0.1.0"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


ELICIT_PUSH = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "elicitation/create",
    "params": {"message": "Pick", "requestedSchema": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-03-26", "2024-11-05"])
def test_a_valid_exchange_has_no_problems(revision: str) -> None:
    version = revision if revision >= "2025-06-18" else None
    records = [
        sent(initialize({"sampling": {}, "roots": {"listChanged": True}})),
        sent({"jsonrpc": "2.0", "method": "notifications/initialized"}, version=version),
        sent(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "x", "_meta": {"progressToken": 1}},
            },
            version=version,
        ),
        received({"jsonrpc": "2.0", "id": 9, "method": "roots/list"}),
        sent(
            {"jsonrpc": "2.0", "id": 9, "result": {"roots": [{"uri": "file:///r"}]}},
            version=version,
        ),
        sent(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
            version=version,
        ),
    ]
    assert upstream_problems(records, revision) == []


@pytest.mark.parametrize(
    ("revision", "capabilities", "expected"),
    [
        ("2025-03-26", {"elicitation": {}}, "'elicitation' was unexpected"),
        ("2024-11-05", {"tasks": {}}, "'tasks' was unexpected"),
    ],
)
def test_a_capability_the_revision_lacks_is_a_problem_on_a_used_session(
    revision: str, capabilities: Any, expected: str
) -> None:
    used = [
        sent(initialize(capabilities)),
        sent({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]
    (problem,) = upstream_problems(used, revision)
    assert problem == (
        f"[POST /mcp session s1] initialize: {revision} capabilities: <root>: "
        f"Additional properties are not allowed ({expected})"
    )


def test_a_first_session_shaped_for_2025_11_25_and_closed_unused_is_no_problem() -> None:
    """The opener's first initialize offers 2025-11-25 with its capabilities; on an older answer
    that session is closed before any request, so only the offered revision's schema applies to it.
    """
    first = initialize({"elicitation": {"form": {}, "url": {}}, "sampling": {}})
    assert (
        upstream_problems(
            [sent(first), sent({"jsonrpc": "2.0", "method": "notifications/initialized"})],
            "2024-11-05",
        )
        == []
    )
    garbled = initialize({"elicitation": "yes"})
    assert upstream_problems([sent(garbled)], "2024-11-05") == [
        "[POST /mcp session s1] initialize: params/capabilities/elicitation: 'yes' is not of type "
        "'object'"
    ]


def test_a_multi_select_answer_is_a_problem_at_2025_06_18() -> None:
    answer = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"action": "accept", "content": {"tags": ["a", "b"]}},
    }
    problems = upstream_problems(
        [received(ELICIT_PUSH), sent(answer, version="2025-06-18")], "2025-06-18"
    )
    assert problems == [
        "[POST /mcp session s1] result: content/tags: ['a', 'b'] is not of type 'string', "
        "'integer', 'boolean'"
    ]


def test_methods_the_revision_lacks_and_stray_responses_are_problems() -> None:
    records = [
        sent(
            {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "t"}},
            version="2025-06-18",
        ),
        sent({"jsonrpc": "2.0", "id": 99, "result": {}}, version="2025-06-18"),
    ]
    assert upstream_problems(records, "2025-06-18") == [
        "[POST /mcp session s1] tasks/get: 'tasks/get' is not a client message of 2025-06-18",
        "[POST /mcp session s1] result: a response to no request the server sent",
    ]


def test_the_protocol_version_header_is_checked_over_http() -> None:
    ping = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert upstream_problems([sent(ping)], "2025-06-18") == [
        "[POST /mcp session s1] notifications/initialized: no MCP-Protocol-Version header"
    ]
    assert upstream_problems([sent(ping, version="2025-11-25")], "2025-03-26") == [
        "[POST /mcp session s1] notifications/initialized: MCP-Protocol-Version '2025-11-25' on a "
        "2025-03-26 session"
    ]
    assert upstream_problems([sent(ping)], "2025-03-26") == []
    assert upstream_problems([sent(ping, http=None)], "2025-06-18") == []  # stdio has no headers


def test_front_results_are_checked_against_their_method() -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}
    good = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}}
    bad = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": "not a list"}}
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 1},
    }
    assert front_problems([sent(request), received(progress), received(good)]) == []
    problems = front_problems([sent(request), received(bad)])
    assert problems and all(p.startswith("[POST /mcp session s1] result: ") for p in problems)
    assert any("content: 'not a list' is not of type 'array'" in p for p in problems)
