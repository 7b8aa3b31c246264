"""What one client saw of a server (`Seen`), made comparable across the eras, and the comparison
of a legacy client's direct view with a modern client's view through the bridge.

The direct view gets the bridge's documented changes before it is compared, and nothing else:
tools that run only as tasks are hidden from clients that did not declare the Tasks extension
(docs/tasks.md), and tool schemas are repaired for modern clients with the bridge's own
`repair_tool` (docs/decisions.md § 23). Then it is read with the modern client's own models, as
the bridged view was: a field outside the 2026-07-28 schema never reaches a modern client's code,
whatever the bridge sends. Keys that belong to one era's envelope (`_meta`,
`resultType`, cache hints, a tool's `execution`) and a default `isError: false` are left out of
both views."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ValidationError

from translators.protocol.tool_repair import repair_tool

LIST_NAMES = ("tools", "prompts", "resources", "templates")
ENVELOPE = frozenset({"_meta", "resultType", "ttlMs", "cacheScope", "execution"})
KEYS = {"tools": "name", "prompts": "name", "resources": "uri", "templates": "uriTemplate"}
MODELS: dict[str, type[BaseModel]] = {
    "tools": types.Tool,
    "prompts": types.Prompt,
    "resources": types.Resource,
    "templates": types.ResourceTemplate,
}


@dataclass
class Seen:
    """One client's view: the lists the server declares, the safe call's and the push call's
    results (or `{"error": ...}`), and the methods the server asked the client."""

    lists: dict[str, list[Any]] = field(default_factory=dict)
    result: Any = None
    pushed: Any = None
    asked: list[str] = field(default_factory=list)


def plain(value: Any) -> Any:
    """`value` without envelope keys (at any depth) and without a default `isError: false`."""
    if isinstance(value, dict):
        return {
            key: plain(inner)
            for key, inner in value.items()
            if key not in ENVELOPE and not (key == "isError" and inner is False)
        }
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def as_bridged(tools: list[Any]) -> list[Any]:
    """A legacy `tools/list` as the bridge documents it to a modern client without Tasks."""
    shown = []
    for tool in tools:
        if (tool.get("execution") or {}).get("taskSupport") == "required":
            continue
        repaired = repair_tool(tool).tool
        if repaired is not None:
            shown.append(repaired)
    return shown


def as_read(value: Any, model: type[BaseModel]) -> Any:
    """`value` as the modern client reads it (its `mcp` 2.x model: fields outside the
    2026-07-28 schema dropped, defaults filled in); an error or an invalid value as it is."""
    if not isinstance(value, dict) or "error" in value:
        return value
    try:
        return model.model_validate(value).model_dump(mode="json", by_alias=True, exclude_none=True)
    except ValidationError:
        return value


def expected(direct: Seen) -> Seen:
    """What a modern client should see through the bridge, given the direct view: the documented
    changes, then read as the modern client reads what it receives."""
    lists = dict(direct.lists)
    if isinstance(lists.get("tools"), list):
        lists["tools"] = as_bridged(lists["tools"])
    lists = {
        name: [as_read(item, MODELS[name]) for item in items] if isinstance(items, list) else items
        for name, items in lists.items()
    }
    result, pushed = (as_read(r, types.CallToolResult) for r in (direct.result, direct.pushed))
    return Seen(lists, result, pushed, list(direct.asked))


def _list_difference(name: str, want: Any, got: Any) -> str | None:
    if not isinstance(want, list) or not isinstance(got, list):  # an error answered
        return None if want == got else f"{name}: {_short(want)} vs {_short(got)}"
    key = KEYS[name]
    want_ids = [item.get(key) for item in want]
    got_ids = [item.get(key) for item in got]
    if set(want_ids) != set(got_ids):
        missing = sorted(set(want_ids) - set(got_ids), key=str)
        extra = sorted(set(got_ids) - set(want_ids), key=str)
        return f"{name}: missing {missing[:5]}, extra {extra[:5]}"
    if want_ids != got_ids:
        return f"{name}: the same {len(want)} in another order"
    for wanted, gotten in zip(want, got, strict=True):
        if wanted != gotten:
            fields = sorted(k for k in set(wanted) | set(gotten) if wanted.get(k) != gotten.get(k))
            return f"{name}: {wanted.get(key)} differs in {', '.join(fields)}"
    return None


def differences(direct: Seen, bridged: Seen) -> list[str]:
    """Every way the bridged view differs from the direct one (after the documented changes)."""
    want = plain(expected(direct).__dict__)
    got = plain(bridged.__dict__)
    found: list[str] = []
    if set(want["lists"]) != set(got["lists"]):
        found.append(f"lists declared: {sorted(want['lists'])} vs {sorted(got['lists'])}")
    for name in LIST_NAMES:
        if name in want["lists"] and name in got["lists"]:
            difference = _list_difference(name, want["lists"][name], got["lists"][name])
            if difference is not None:
                found.append(difference)
    for part in ("result", "pushed"):
        if want[part] != got[part]:
            found.append(f"{part}: {_short(want[part])} vs {_short(got[part])}")
    if asked(direct.asked) != asked(bridged.asked):
        found.append(f"asked: {asked(direct.asked)} vs {asked(bridged.asked)}")
    return found


def asked(methods: list[str]) -> list[str]:
    """The kinds of question a server asked, roots aside: a direct client is asked for roots when
    the server chooses, a modern client when the bridge needs them for a session (docs/
    architecture.md, "Roots"); what the server does with them shows in its own calls."""
    return sorted(set(methods) - {"roots/list"})


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
