"""The two clients of a compatibility row, with the integration tests' own helpers: the `mcp` 1.x
client directly (`tests/peers/legacy_probe_client.py` through `integration.test_real_servers.
direct`), and the `mcp` 2.x client through the bridge (`integration.harness.modern_client` on
`mrtr-bridge serve`, or launching `mrtr-bridge stdio`), each answering the server's questions the
same way."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from integration.harness import InputAnswers, modern_client
from integration.test_real_servers import PROFILES, Upstream, direct
from mcp import Client, MCPError, StdioServerParameters

from compat.catalog import Call
from compat.compare import Seen
from translators.protocol.eras import MODERN_VERSION

LISTED = {  # list name: (capability, Client method, result field)
    "tools": ("tools", "list_tools", "tools"),
    "prompts": ("prompts", "list_prompts", "prompts"),
    "resources": ("resources", "list_resources", "resources"),
    "templates": ("resources", "list_resource_templates", "resource_templates"),
}


def answers() -> InputAnswers:
    """The modern client's answers: what the legacy probe client answers (decline, "ok")."""
    return InputAnswers(elicit_action="decline", sample_text="ok")


def _call_flags(flag: str, call: Call | None) -> list[str]:
    if call is None:
        return []
    return [f"--{flag}", call.tool, f"--{flag}-arguments", json.dumps(call.arguments)]


async def seen_directly(
    target: list[str], profile: str, call: Call | None, push: Call | None
) -> tuple[Seen, dict[str, Any]]:
    """The legacy client's view (and its whole report: revision, serverInfo, capabilities)."""
    flags = ["--lists"]
    if call is not None:
        flags += ["--call", call.tool, "--arguments", json.dumps(call.arguments)]
    flags += _call_flags("push", push)
    report = await direct(Upstream(target, ""), profile, *flags)
    seen = Seen(report["lists"], report.get("result"), report.get("pushed"), report["asked"])
    return seen, report


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _pages(list_page: Callable[..., Awaitable[Any]], field: str) -> Any:
    """Every page of a list, or the error answered (as the legacy probe client records it)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        try:
            page = await list_page(cursor=cursor)
        except MCPError as error:
            return {"error": {"code": error.error.code, "message": error.error.message}}
        items += [_dump(item) for item in getattr(page, field)]
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def _call(client: Client, call: Call | None) -> Any:
    if call is None:
        return None
    try:
        return _dump(await client.call_tool(call.tool, call.arguments))
    except MCPError as error:
        return {"error": {"code": error.error.code, "message": error.error.message}}


@contextlib.asynccontextmanager
async def _modern(bridge: str | StdioServerParameters, **callbacks: Any) -> AsyncIterator[Client]:
    """The modern client on the bridge's URL, or launching `mrtr-bridge stdio` (pinned to the
    modern revision and uncached, as `modern_client` is)."""
    if isinstance(bridge, str):
        async with modern_client(bridge, **callbacks) as client:
            yield client
        return
    async with Client(bridge, mode=MODERN_VERSION, cache=None, **callbacks) as client:
        yield client


async def seen_through_bridge(
    bridge: str | StdioServerParameters, profile: str, call: Call | None, push: Call | None
) -> Seen:
    """The modern client's view through the bridge (`mrtr-bridge serve`'s URL, or `mrtr-bridge
    stdio` launched): the lists its `server/discover` declares, then the same calls."""
    given = answers()
    callbacks = {name: given.client_kwargs()[name] for name in PROFILES[profile][1]}
    async with _modern(bridge, **callbacks) as client:
        discover = await client.session.send_discover(MODERN_VERSION)
        declared = discover.get("capabilities", {})
        lists = {
            name: await _pages(getattr(client, method), field)
            for name, (capability, method, field) in LISTED.items()
            if capability in declared
        }
        result = await _call(client, call)
        pushed = await _call(client, push)
    return Seen(lists, result, pushed, [method for method, _ in given.asked])
