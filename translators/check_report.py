"""What `mrtr-bridge check` reports, from what it saw of the upstream (pure; `proxy.app.check` does
the I/O).

The report is one JSON object (docs/operations.md, "Checking an upstream"): the upstream's era and
negotiated revision, its transport, `serverInfo` and capabilities, its tools with the annotations
the bridge acts on, whether it pushes outside a call, which direction each kind of client takes
(`directions`), what will bridge (`bridges`) and what will not
(`problems`, each with its reason). `bridgeable` is false when the upstream cannot be served at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from translators.protocol.era_detection import DUAL, LEGACY, MODERN, DiscoverVerdict, Era, era_of
from translators.protocol.eras import MODERN_VERSION
from translators.protocol.revisions import REVISIONS, SUPPORTED
from translators.protocol.tool_repair import repair_tool
from translators.wire.fast_json import as_object
from translators.wire.header_values import x_mcp_header_problem

_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
# What a modern client may declare (2026-07-28 `clientCapabilities`) that an upstream may show
# more tools for, one at a time; `check` declares all of them for its main listing and, when that
# shows more than declaring nothing does, lists the tools once per entry to say which reveals what.
DECLARABLE: Final[dict[str, dict[str, Any]]] = {
    "elicitation.form": {"elicitation": {"form": {}}},
    "elicitation.url": {"elicitation": {"url": {}}},
    "sampling": {"sampling": {"tools": {}}},  # with tools, the widest sampling a client declares
    "roots": {"roots": {}},
}
EVERY_CAPABILITY: Final[dict[str, Any]] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}},
    "roots": {},
}
ALL_TOGETHER: Final = "all together"
_SERVED: Final = (
    ("tools", "tools (tools/list, tools/call)"),
    ("prompts", "prompts (prompts/list, prompts/get)"),
    ("resources", "resources (resources/list, resources/templates/list, resources/read)"),
    ("completions", "completion/complete"),
)


@dataclass
class Observed:
    """What `check` saw. `legacy_error` is why a legacy `initialize` failed (None if it was not
    tried or succeeded); `unreachable` is why nothing answered at all (refused, silent, not HTTP,
    a command that died or hung); `not_mcp` why something answered, but not as an MCP server;
    `redirected` where it redirected to, off the origin of `upstream.url` (never followed);
    `stderr_tail` what a stdio server that died wrote last to stderr; `sessions` how many sessions
    an HTTP upstream serves at a time, as learned or configured (`SessionLimit.describe`), and
    `one_session` whether that is one."""

    upstream: str
    proxy: str | None = None  # the forward proxy on the way, as logs show it, and who chose it
    transport: str | None = None
    discover: DiscoverVerdict | None = None
    init_result: dict[str, Any] | None = None
    legacy_error: str | None = None
    unsupported_version: str | None = None
    tools: list[Any] | None = None
    tools_error: str | None = None
    roots_at_initialized: bool | None = None
    unreachable: str | None = None
    not_mcp: str | None = None
    redirected: str | None = None
    stderr_tail: list[str] | None = None
    sessions: str | None = None
    one_session: bool = False
    notes: list[str] = field(default_factory=list)
    tools_without: list[Any] | None = None  # a client declaring no capability sees these
    tools_alone: dict[str, list[Any]] = field(default_factory=dict)  # by `DECLARABLE` name


_ONE_SESSION: Final = (
    "it serves one session at a time (a second initialize takes it over): the bridge keeps one"
    " upstream session for every caller, in turn, and never deletes it (docs/operations.md,"
    ' "Servers that work with one session only")'
)
_REDIRECTED: Final = (
    "redirects to another origin ({target}): the bridge never follows a redirect off the origin"
    " of upstream.url; set upstream.url to the final URL"
)


def _era(seen: Observed) -> Era | None:
    """legacy, modern or dual only after the server answered as one: a `DiscoverResult` (or a
    modern error), an `InitializeResult` (or one naming a revision the bridge does not speak)."""
    if seen.unreachable is not None or seen.discover is None:
        return None
    answered_initialize = seen.init_result is not None or seen.unsupported_version is not None
    if not (seen.discover.modern or answered_initialize):
        return None
    return era_of(seen.discover, answered_initialize)


def _protocol_version(seen: Observed, era: Era | None) -> str | None:
    if era in (LEGACY, DUAL) and seen.init_result is not None:
        version = seen.init_result.get("protocolVersion")
        return version if isinstance(version, str) else None
    if era == LEGACY:
        return seen.unsupported_version
    if era == MODERN and seen.discover is not None:
        versions = seen.discover.supported_versions
        return MODERN_VERSION if MODERN_VERSION in versions else (versions[0] if versions else None)
    return None


# How a legacy task tool reaches modern clients (docs/tasks.md).
TASK_NOTES = {
    "required": "runs only as a task: through the Tasks extension (io.modelcontextprotocol/tasks) "
    "for clients that declare it; -32021 for the others (or tasks.run_in_bridge)",
    "optional": "a task for clients that declare the Tasks extension, a plain call for the others",
}


def tool_entry(tool: Any) -> dict[str, Any]:
    """One tool as reported: its name, the hints among its annotations, and what the bridge does
    with it."""
    tool = as_object(tool)
    annotations = as_object(tool.get("annotations"))
    entry: dict[str, Any] = {
        "name": tool.get("name"),
        "annotations": {hint: annotations[hint] for hint in _HINTS if hint in annotations},
    }
    task_support = as_object(tool.get("execution")).get("taskSupport")
    if task_support is not None:
        entry["taskSupport"] = task_support
    header_problem = x_mcp_header_problem(tool.get("inputSchema"))
    repair = repair_tool(tool)
    if repair.notes:
        entry["repairs"] = list(repair.notes)
    if repair.tool is None:
        entry["bridged"], entry["reason"] = False, "; ".join(repair.notes)
    elif header_problem is not None:
        entry["bridged"], entry["reason"] = (
            False,
            f"invalid x-mcp-header annotation ({header_problem}); modern clients drop the tool",
        )
    else:
        entry["bridged"] = True
    if task_support in ("optional", "required"):
        entry["task"] = TASK_NOTES[task_support]
    return entry


def _served(capabilities: dict[str, Any]) -> list[str]:
    return [f"{text}: translated per request" for name, text in _SERVED if name in capabilities]


def _legacy_findings(seen: Observed, revision: str | None) -> tuple[list[str], list[str]]:
    """(what bridges, what does not) for an upstream served through its legacy side."""
    capabilities = as_object(as_object(seen.init_result).get("capabilities"))
    bridges = _served(capabilities)
    problems: list[str] = []
    info = REVISIONS.get(revision or "")
    if info is not None and info.elicitation:
        bridges.append(
            "elicitation/create, sampling/createMessage and roots/list pushes during a call: "
            "InputRequiredResult to the client, answers relayed back"
        )
    elif info is not None:
        bridges.append(
            "sampling/createMessage and roots/list pushes during a call: InputRequiredResult"
        )
        problems.append(
            f"revision {revision} has no elicitation: the server cannot ask the user for input"
        )
    if "logging" in capabilities:
        bridges.append("log messages during a call: relayed at the client's _meta logLevel")
    if seen.roots_at_initialized:
        bridges.append(
            "asks roots/list right after initialized (outside any call): calls of clients that "
            "declare "
            "roots get upstream sessions of their own (upstream.roots_affinity)"
        )
    if seen.transport == "sse":
        problems.append(
            "HTTP+SSE transport: a call that asks for input needs an upstream session of its own "
            "(pushes carry no request to attribute them to)"
        )
    repaired: dict[str, list[str]] = {}  # repair -> the tools it was made to, in order
    for entry in (tool_entry(tool) for tool in seen.tools or []):
        if not entry["bridged"]:
            problems.append(f"tool {entry['name']!r}: {entry['reason']}")
            continue
        for repair in entry.get("repairs", ()):
            repaired.setdefault(repair, []).append(str(entry["name"]))
    bridges += [
        f"repaired for modern clients ({repair}): {', '.join(names)}"
        for repair, names in repaired.items()
    ]
    if seen.tools_error is not None:
        problems.append(f"tools/list failed: {seen.tools_error}")
    return bridges, problems


_RELAYED: Final = (
    "modern requests: relayed untranslated (the upstream's own InputRequiredResult and "
    "requestState "
    "pass untouched)"
)


_REVERSE: Final = (
    "legacy clients: their sessions served by the bridge, each request sent upstream as 2026-07-28 "
    "(inputRequests pushed to the client, its answers sent back as inputResponses)"
)


def directions(era: Era | None, transport: str | None) -> dict[str, str | None]:
    """Which direction each kind of client takes (docs/directions.md): modern clients
    `translated` to a legacy upstream or `relayed` to a modern one; legacy clients `relayed` to a
    legacy side, served by the bridge in `reverse` in front of a modern HTTP upstream, or
    `refused`."""
    http = transport != "stdio"
    if era == LEGACY:
        return {"modernClients": "translated", "legacyClients": "relayed" if http else "refused"}
    if era == MODERN or (era == DUAL and http):
        return {"modernClients": "relayed", "legacyClients": "reverse"}
    if era == DUAL:
        return {"modernClients": "translated", "legacyClients": "refused"}
    return {"modernClients": None, "legacyClients": None}


def _modern_only(seen: Observed) -> tuple[bool, list[str], list[str]]:
    """A modern-only upstream: modern clients relayed, legacy clients served in reverse (over
    stdio too: `serve` keeps one process of it, the stdio front one per legacy client)."""
    return True, [_RELAYED, _REVERSE], []


def _verdict(
    seen: Observed, era: Era | None, revision: str | None
) -> tuple[bool, list[str], list[str]]:
    """(bridgeable, bridges, problems)."""
    if seen.unreachable is not None:
        return False, [], [f"unreachable: {seen.unreachable}"]
    if seen.redirected is not None:
        return False, [], [_REDIRECTED.format(target=seen.redirected)]
    if seen.not_mcp is not None:
        return False, [], [f"not an MCP server: {seen.not_mcp}"]
    if era == MODERN:
        return _modern_only(seen)
    if seen.unsupported_version is not None:
        return (
            False,
            [],
            [
                f"answers initialize with protocol version {seen.unsupported_version!r}; the "
                "bridge "
                f"supports {', '.join(SUPPORTED)} upstream"
            ],
        )
    if seen.init_result is None:
        return False, [], [f"initialize failed: {seen.legacy_error or 'no answer'}"]
    bridges, problems = _legacy_findings(seen, revision)
    if era == DUAL and seen.transport == "stdio":
        bridges.insert(
            0, "dual-era upstream over stdio: served through its legacy side (initialize)"
        )
    elif era == DUAL:
        bridges[:0] = [_RELAYED, _REVERSE]
    return True, bridges, problems


def tool_names(tools: list[Any] | None) -> list[str]:
    return [str(as_object(tool).get("name")) for tool in tools or []]


def tool_visibility(seen: Observed) -> dict[str, Any] | None:
    """Which tools a client sees by what it declares: without any capability, then the extra ones
    each `DECLARABLE` capability reveals alone (`ALL_TOGETHER`: those only all of them reveal).
    None when the tools were not listed both ways."""
    if seen.tools is None or seen.tools_without is None:
        return None
    without = tool_names(seen.tools_without)
    revealed = {
        name: [tool for tool in tool_names(tools) if tool not in without]
        for name, tools in seen.tools_alone.items()
    }
    alone = {tool for tools in revealed.values() for tool in tools}
    together = [
        tool for tool in tool_names(seen.tools) if tool not in without and tool not in alone
    ]
    return {
        "declared": EVERY_CAPABILITY,
        "withoutCapabilities": without,
        "revealedBy": {name: tools for name, tools in revealed.items() if tools}
        | ({ALL_TOGETHER: together} if together else {}),
    }


def _revealed_by(visibility: dict[str, Any] | None) -> dict[str, list[str]]:
    """Tool name -> the capabilities that reveal it, for the tools a client declaring nothing
    does not see."""
    by_tool: dict[str, list[str]] = {}
    for capability, tools in (visibility or {}).get("revealedBy", {}).items():
        for tool in tools:
            by_tool.setdefault(tool, []).append(capability)
    return by_tool


def _tools(seen: Observed, era: Era | None) -> list[dict[str, Any]] | None:
    """Every tool seen, declaring every capability or none, each with what reveals it when a client
    that declares nothing does not see it."""
    if seen.tools is None:
        return None
    listed = tool_names(seen.tools)
    tools = seen.tools + [
        tool for tool in seen.tools_without or [] if as_object(tool).get("name") not in listed
    ]
    needs = _revealed_by(tool_visibility(seen))
    entries = []
    for tool in tools:
        entry = tool_entry(tool)
        if era == MODERN:
            entry["bridged"] = True  # relayed as they are
        if entry["name"] in needs:
            entry["revealedBy"] = needs[entry["name"]]
        entries.append(entry)
    return entries


def build_report(seen: Observed) -> dict[str, Any]:
    """The report object `check --json` prints."""
    era = _era(seen)
    revision = _protocol_version(seen, era)
    bridgeable, bridges, problems = _verdict(seen, era, revision)
    init = as_object(seen.init_result)
    discover = seen.discover
    server_info = as_object(init.get("serverInfo")) or (discover.server_info if discover else {})
    capabilities = as_object(init.get("capabilities")) or (
        discover.capabilities if discover else {}
    )
    return {
        "upstream": seen.upstream,
        "proxy": seen.proxy,
        "reachable": seen.unreachable is None,
        "era": era,
        "protocolVersion": revision,
        "supportedVersions": discover.supported_versions if discover and discover.modern else [],
        "transport": seen.transport,
        "serverInfo": server_info or None,
        "capabilities": capabilities or None,
        "tools": _tools(seen, era),
        "toolVisibility": tool_visibility(seen),
        "pushesOutsideCall": {"rootsListAtInitialized": seen.roots_at_initialized},
        "directions": directions(era, seen.transport),
        "bridgeable": bridgeable,
        "bridges": bridges,
        "problems": problems,
        "sessionLimit": seen.sessions,
        "notes": [*seen.notes, *([_ONE_SESSION] if seen.one_session else [])],
        "stderrTail": seen.stderr_tail,
    }


__all__ = [
    "ALL_TOGETHER",
    "DECLARABLE",
    "EVERY_CAPABILITY",
    "Observed",
    "build_report",
    "directions",
    "tool_entry",
    "tool_names",
    "tool_visibility",
]
