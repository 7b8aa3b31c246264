"""The `check` report from what was observed (translators.check_report)."""

from __future__ import annotations

from typing import Any

from translators.check_report import (
    ALL_TOGETHER,
    EVERY_CAPABILITY,
    Observed,
    build_report,
    tool_entry,
    tool_visibility,
)
from translators.protocol.era_detection import SILENT, verdict_of_reply

INIT: dict[str, Any] = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}, "logging": {}},
    "serverInfo": {"name": "old", "version": "1"},
}
DISCOVERED = verdict_of_reply(
    {
        "result": {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "new"}},
        }
    }
)


def test_task_tools_are_bridged_through_the_tasks_extension() -> None:
    entry = tool_entry(
        {
            "name": "t",
            "execution": {"taskSupport": "required"},
            "annotations": {"readOnlyHint": True, "title": "T"},
        }
    )
    assert entry["bridged"] is True
    assert entry["annotations"] == {"readOnlyHint": True}
    assert entry["taskSupport"] == "required"
    assert entry["task"].startswith("runs only as a task: through the Tasks extension")
    optional = tool_entry({"name": "o", "execution": {"taskSupport": "optional"}})
    assert optional["bridged"] is True
    assert optional["task"].startswith("a task for clients that declare the Tasks extension")
    assert "task" not in tool_entry({"name": "p", "execution": {"taskSupport": "forbidden"}})


def test_legacy_report_lists_what_bridges_and_problems() -> None:
    seen = Observed(
        "http://u/mcp",
        transport="sse",
        discover=SILENT,
        init_result=INIT,
        tools=[{"name": "ok"}, {"name": "task", "execution": {"taskSupport": "required"}}],
        roots_at_initialized=False,
    )
    report = build_report(seen)
    assert (report["era"], report["protocolVersion"], report["transport"]) == (
        "legacy",
        "2025-06-18",
        "sse",
    )
    assert report["serverInfo"] == {"name": "old", "version": "1"}
    assert report["bridgeable"] is True
    assert report["problems"][0].startswith("HTTP+SSE transport")
    assert len(report["problems"]) == 1


def test_revision_without_elicitation_is_a_problem() -> None:
    report = build_report(
        Observed(
            "stdio:x",
            transport="stdio",
            discover=SILENT,
            init_result={**INIT, "protocolVersion": "2024-11-05"},
            tools=[],
        )
    )
    assert report["problems"] == [
        "revision 2024-11-05 has no elicitation: the server cannot ask the user for input"
    ]
    assert report["bridgeable"] is True


def test_unsupported_legacy_version_is_not_bridgeable() -> None:
    report = build_report(
        Observed("stdio:x", transport="stdio", discover=SILENT, unsupported_version="2023-01-01")
    )
    assert (report["era"], report["protocolVersion"], report["bridgeable"]) == (
        "legacy",
        "2023-01-01",
        False,
    )
    assert report["problems"][0].startswith("answers initialize with protocol version '2023-01-01'")


def test_modern_only_report_uses_the_discover_result() -> None:
    report = build_report(
        Observed(
            "http://u/mcp",
            transport="streamable-http",
            discover=DISCOVERED,
            legacy_error="HTTP 400",
        )
    )
    assert (report["era"], report["protocolVersion"], report["bridgeable"]) == (
        "modern",
        "2026-07-28",
        True,
    )
    stdio = build_report(
        Observed("stdio:x", transport="stdio", discover=DISCOVERED, legacy_error="-32601")
    )
    assert (stdio["era"], stdio["bridgeable"], stdio["problems"]) == ("modern", True, [])
    assert stdio["directions"] == {"modernClients": "relayed", "legacyClients": "reverse"}
    assert report["serverInfo"] == {"name": "new"}
    assert report["capabilities"] == {"tools": {}}


def test_dual_report_is_bridgeable() -> None:
    report = build_report(
        Observed(
            "http://u/mcp",
            transport="streamable-http",
            discover=DISCOVERED,
            init_result=INIT,
            tools=[],
        )
    )
    assert (report["era"], report["protocolVersion"], report["bridgeable"]) == (
        "dual",
        "2025-06-18",
        True,
    )
    assert report["supportedVersions"] == ["2026-07-28"]


def test_unreachable_report() -> None:
    report = build_report(Observed("http://u/mcp", unreachable="refused"))
    assert (report["reachable"], report["era"], report["bridgeable"], report["problems"]) == (
        False,
        None,
        False,
        ["unreachable: refused"],
    )


def test_a_redirect_off_the_origin_is_reported_with_the_fix() -> None:
    """An upstream that redirects to another origin answered, but is not bridgeable as set: the
    problem names where it points and the setting to change."""
    report = build_report(Observed("http://u/mcp", redirected="https://v:8443/mcp"))
    assert (report["reachable"], report["era"], report["bridgeable"], report["problems"]) == (
        True,
        None,
        False,
        [
            "redirects to another origin (https://v:8443/mcp): the bridge never follows a redirect"
            " off the origin of upstream.url; set upstream.url to the final URL"
        ],
    )


def _tools(*names: str) -> list[Any]:
    return [{"name": name, "inputSchema": {"type": "object"}} for name in names]


def test_tool_visibility_names_what_each_capability_adds_and_what_only_all_together_do() -> None:
    """A tool no single capability reveals, but all of them together do, is listed as such; each
    tool a client declaring nothing does not see says what reveals it."""
    seen = Observed(
        upstream="u",
        discover=SILENT,
        init_result=INIT,
        tools=_tools("echo", "ask", "sample", "both"),
        tools_without=_tools("echo"),
        tools_alone={
            "elicitation.form": _tools("echo", "ask"),
            "elicitation.url": _tools("echo", "ask"),
            "sampling": _tools("echo", "sample"),
            "roots": _tools("echo"),
        },
    )
    assert tool_visibility(seen) == {
        "declared": EVERY_CAPABILITY,
        "withoutCapabilities": ["echo"],
        "revealedBy": {
            "elicitation.form": ["ask"],
            "elicitation.url": ["ask"],
            "sampling": ["sample"],
            ALL_TOGETHER: ["both"],
        },
    }
    needs = {tool["name"]: tool.get("revealedBy") for tool in build_report(seen)["tools"]}
    assert needs == {
        "echo": None,
        "ask": ["elicitation.form", "elicitation.url"],
        "sample": ["sampling"],
        "both": [ALL_TOGETHER],
    }


def test_no_visibility_unless_listed_both_ways_and_a_tool_seen_only_declaring_nothing_stays() -> (
    None
):
    """Not listed both ways: no `toolVisibility`; a tool shown only to a client declaring nothing
    is still in the report's tools."""
    partial = Observed(upstream="u", discover=SILENT, init_result=INIT, tools=_tools("echo"))
    assert build_report(partial)["toolVisibility"] is None
    odd = Observed(
        upstream="u",
        discover=SILENT,
        init_result=INIT,
        tools=_tools("echo"),
        tools_without=_tools("echo", "plain-only"),
    )
    report = build_report(odd)
    assert [tool["name"] for tool in report["tools"]] == ["echo", "plain-only"]
    assert report["toolVisibility"]["revealedBy"] == {}
