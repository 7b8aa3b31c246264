"""Legacy tools made valid 2026-07-28 tools where the fix is unambiguous (docs/decisions.md § 23).

A legacy client takes a tool whatever its `inputSchema` says; a modern client validates every tool
of a `tools/list` page against the 2026-07-28 schema, and one invalid tool fails the whole page
(`@modelcontextprotocol/server-gitlab` 2025.4.25 sends `{"$schema": "...draft-07..."}` alone). Tool
arguments are always a JSON object, so:

- a missing or non-object `inputSchema` becomes `{"type": "object"}` (any arguments, as before);
- an `inputSchema` without `type` gets `"type": "object"`: the only arguments a tool can receive;
- a `type` list that includes `"object"` becomes `"object"`: the only type arguments can have;
- a non-object `outputSchema` is dropped (the result is then unchecked, as a legacy client does).

A tool whose `inputSchema` names a `type` that excludes objects, or that has no string `name`, has
no unambiguous repair: it is left out of the list (a modern client would reject the whole page for
it) and `mrtr-bridge check` names it. Everything else in a tool is passed through untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

OBJECT: Final = "object"


@dataclass(frozen=True)
class ToolRepair:
    """What was done to one tool: `tool` is None when it is left out; `notes` say why or what."""

    tool: dict[str, Any] | None
    notes: tuple[str, ...]


def repair_tool(tool: Any) -> ToolRepair:
    """`tool` as a valid 2026-07-28 tool (unchanged when it already is), or left out."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return ToolRepair(None, ("no string name: left out of tools/list",))
    notes: list[str] = []
    repaired = tool
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        repaired = {**tool, "inputSchema": {"type": OBJECT}}
        notes.append('inputSchema missing or not an object: replaced by {"type": "object"}')
    elif "type" not in schema:
        repaired = {**tool, "inputSchema": {"type": OBJECT, **schema}}
        notes.append('inputSchema without "type": "type": "object" added')
    elif schema["type"] != OBJECT:
        kind = schema["type"]
        if isinstance(kind, list) and OBJECT in kind:
            repaired = {**tool, "inputSchema": {**schema, "type": OBJECT}}
            notes.append(f'inputSchema "type" {kind}: narrowed to "object"')
        else:
            return ToolRepair(
                None, (f'inputSchema "type" is {kind!r}, not "object": left out of tools/list',)
            )
    if "outputSchema" in tool and not isinstance(tool["outputSchema"], dict):
        repaired = {k: v for k, v in repaired.items() if k != "outputSchema"}
        notes.append("outputSchema not an object: dropped")
    return ToolRepair(repaired, tuple(notes))


def repair_tools(tools: list[Any]) -> list[Any]:
    """The tools of a `tools/list` page, each repaired or left out (on the hot path: a valid tool
    is returned as the same object)."""
    kept: list[Any] = []
    for tool in tools:
        if (
            isinstance(tool, dict)
            and isinstance(tool.get("name"), str)
            and isinstance(schema := tool.get("inputSchema"), dict)
            and schema.get("type") == OBJECT
            and isinstance(tool.get("outputSchema", {}), dict)
        ):
            kept.append(tool)
            continue
        repaired = repair_tool(tool).tool
        if repaired is not None:
            kept.append(repaired)
    return kept


__all__ = ["ToolRepair", "repair_tool", "repair_tools"]
