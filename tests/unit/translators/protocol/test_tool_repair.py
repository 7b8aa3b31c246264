"""Legacy tools made valid 2026-07-28 tools (translators/protocol/tool_repair.py) and what `check`
says."""

from __future__ import annotations

from typing import Any

import pytest
from schema_check import errors

from translators.check_report import Observed, build_report
from translators.protocol.era_detection import SILENT
from translators.protocol.results import CacheHints, legacy_result_to_modern
from translators.protocol.tool_repair import repair_tool, repair_tools

DRAFT7 = {"$schema": "http://json-schema.org/draft-07/schema#"}
VALID = {"name": "ok", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}


@pytest.mark.parametrize(
    ("tool", "schema", "note"),
    [
        (
            {"name": "gitlab", "inputSchema": DRAFT7},
            {"type": "object", **DRAFT7},
            'inputSchema without "type": "type": "object" added',
        ),
        (
            {"name": "none"},
            {"type": "object"},
            'inputSchema missing or not an object: replaced by {"type": "object"}',
        ),
        (
            {"name": "list", "inputSchema": "x"},
            {"type": "object"},
            'inputSchema missing or not an object: replaced by {"type": "object"}',
        ),
        (
            {"name": "nullable", "inputSchema": {"type": ["object", "null"], "required": ["a"]}},
            {"type": "object", "required": ["a"]},
            "inputSchema \"type\" ['object', 'null']: narrowed to \"object\"",
        ),
    ],
)
def test_unambiguous_repairs(tool: dict[str, Any], schema: dict[str, Any], note: str) -> None:
    repair = repair_tool(tool)
    assert repair.tool == {**tool, "inputSchema": schema}
    assert repair.notes == (note,)


@pytest.mark.parametrize(
    ("tool", "note"),
    [
        ({"name": "s", "inputSchema": {"type": "string"}}, "'string'"),
        ({"name": "n", "inputSchema": {"type": ["array", "null"]}}, "['array', 'null']"),
        ({"inputSchema": {"type": "object"}}, "no string name"),
        ("not a tool", "no string name"),
    ],
)
def test_tools_without_an_unambiguous_repair_are_left_out(tool: Any, note: str) -> None:
    repair = repair_tool(tool)
    assert repair.tool is None
    (text,) = repair.notes
    assert note in text and "left out of tools/list" in text


def test_a_valid_tool_is_passed_as_is_and_a_bad_output_schema_dropped() -> None:
    assert repair_tool(VALID).tool is VALID and repair_tool(VALID).notes == ()
    assert repair_tools([VALID])[0] is VALID
    out = repair_tool({**VALID, "outputSchema": True})
    assert out.tool == VALID and out.notes == ("outputSchema not an object: dropped",)


def test_every_translated_tools_list_validates_against_the_modern_schema() -> None:
    tools = [
        {"name": "gitlab", "inputSchema": DRAFT7, "description": "d"},
        {"name": "string", "inputSchema": {"type": "string"}},
        {"name": "none"},
        VALID,
    ]
    result = legacy_result_to_modern(
        "tools/list", {"tools": tools}, server_info=None, cache=CacheHints(0, "private")
    )
    assert [tool["name"] for tool in result["tools"]] == ["gitlab", "none", "ok"]
    assert errors(result, "ListToolsResult", "modern") == []
    # without the repair, the modern schema refuses the page
    assert errors({**result, "tools": tools}, "ListToolsResult", "modern") != []


def test_check_lists_each_repair_and_each_tool_left_out() -> None:
    seen = Observed(
        upstream="stdio:node",
        transport="stdio",
        discover=SILENT,
        init_result={
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "gitlab-mcp-server", "version": "0.5.1"},
        },
        tools=[
            {"name": "a", "inputSchema": DRAFT7},
            {"name": "b", "inputSchema": DRAFT7},
            {"name": "s", "inputSchema": {"type": "string"}},
            VALID,
        ],
    )
    report = build_report(seen)
    entries = {tool["name"]: tool for tool in report["tools"]}
    assert entries["a"]["bridged"] is True
    assert entries["a"]["repairs"] == ['inputSchema without "type": "type": "object" added']
    assert "repairs" not in entries["ok"]
    assert entries["s"]["bridged"] is False
    assert report["bridges"][-1] == (
        'repaired for modern clients (inputSchema without "type": "type": "object" added): a, b'
    )
    assert (
        "tool 's': inputSchema \"type\" is 'string', not \"object\": left out of tools/list"
        in report["problems"]
    )
