#!/usr/bin/env python3
"""A legacy (mcp 1.x) client that records what a server shows one client: run it from
`.venv-legacy` (tests/integration/test_real_servers.py and tests/compat/ run the same steps
through the bridge).

Connects to URL over Streamable HTTP (`--url`) or HTTP+SSE (`--sse`), or launches COMMAND over
stdio, declaring the capabilities asked for (`--roots`, `--elicitation`, `--sampling`: a callback
each, answering as `tests/integration/harness.py`'s `InputAnswers(elicit_action="decline",
sample_text="ok")` does), lists the tools, optionally subscribes to a resource (`--subscribe URI`),
calls a tool (`--call NAME` with `--arguments JSON`, after `--delay` seconds) and a tool that asks
the client (`--push NAME` with `--push-arguments JSON`), and waits up to `--wait` seconds for that
resource's first `notifications/resources/updated`. Prints one JSON line:
`{"tools": [sorted names], "updated": [URIs of the updates received], "text": [the call's text
blocks], "result": the call's result or {"error": {code, message}}, "pushed": the push call's,
"asked": [methods the server asked]}`; with `--lists`, also the negotiated `protocolVersion`,
`serverInfo`, `capabilities` and `lists`: every page of the tools, prompts, resources and resource
templates the server declares, as sent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from typing import Any

from mcp import ClientSession, McpError, StdioServerParameters, types
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

ROOT = "file:///test/root"
LISTS = {  # capability: (list name, session method, result field)
    "tools": ("tools", "list_tools", "tools"),
    "prompts": ("prompts", "list_prompts", "prompts"),
    "resources": ("resources", "list_resources", "resources"),
}


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _pages(session: ClientSession, method: str, field: str) -> Any:
    """Every page of a list, or the server's error (a server may declare resources and answer
    no `resources/templates/list`: a client then gets that error, and goes on)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        try:
            result = await getattr(session, method)(cursor=cursor)
        except McpError as error:
            return {"error": {"code": error.error.code, "message": error.error.message}}
        items += [_dump(item) for item in getattr(result, field)]
        cursor = result.nextCursor
        if not cursor:
            break
    return items


async def _lists(session: ClientSession, capabilities: types.ServerCapabilities) -> Any:
    lists: dict[str, Any] = {}
    for capability, (name, method, field) in LISTS.items():
        if getattr(capabilities, capability) is not None:
            lists[name] = await _pages(session, method, field)
    if capabilities.resources is not None:
        lists["templates"] = await _pages(session, "list_resource_templates", "resourceTemplates")
    return lists


async def _call(session: ClientSession, name: str, arguments: str) -> Any:
    try:
        return _dump(await session.call_tool(name, json.loads(arguments)))
    except McpError as error:
        return {"error": {"code": error.error.code, "message": error.error.message}}


async def _exercise(session: ClientSession, args: argparse.Namespace, seen: dict[str, Any]) -> Any:
    init = await session.initialize()
    tools = sorted(tool.name for tool in (await session.list_tools()).tools)
    report: dict[str, Any] = {"tools": tools, "text": [], "asked": seen["asked"]}
    if args.lists:
        report |= {
            "protocolVersion": str(init.protocolVersion),
            "serverInfo": _dump(init.serverInfo),
            "capabilities": _dump(init.capabilities),
            "lists": await _lists(session, init.capabilities),
        }
    if args.subscribe:
        await session.subscribe_resource(args.subscribe)  # type: ignore[arg-type]
    if args.call:
        await asyncio.sleep(args.delay)  # e.g. for the server to have asked for roots
        report["result"] = await _call(session, args.call, args.arguments)
        blocks = report["result"].get("content", [])
        report["text"] = [block["text"] for block in blocks if block.get("type") == "text"]
    if args.push:
        report["pushed"] = await _call(session, args.push, args.push_arguments)
    if args.subscribe:
        try:
            async with asyncio.timeout(args.wait):
                while not seen["updated"]:
                    await asyncio.sleep(0.05)
        except TimeoutError:
            pass
    return report | {"updated": list(seen["updated"])}


def _callbacks(args: argparse.Namespace, seen: dict[str, Any]) -> dict[str, Any]:
    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            seen["updated"].append(str(message.root.params.uri))

    async def roots(_ctx: Any) -> types.ListRootsResult:
        seen["asked"].append("roots/list")
        return types.ListRootsResult(roots=[types.Root(uri=ROOT)])  # type: ignore[arg-type]

    async def elicit(_ctx: Any, _params: Any) -> types.ElicitResult:
        seen["asked"].append("elicitation/create")
        return types.ElicitResult(action="decline")

    async def sample(_ctx: Any, _params: Any) -> types.CreateMessageResult:
        seen["asked"].append("sampling/createMessage")
        text = types.TextContent(type="text", text="ok")
        return types.CreateMessageResult(role="assistant", content=text, model="canned-model")

    callbacks: dict[str, Any] = {"message_handler": on_message}
    if args.roots:
        callbacks["list_roots_callback"] = roots
    if args.elicitation:
        callbacks["elicitation_callback"] = elicit
    if args.sampling:
        callbacks["sampling_callback"] = sample
    return callbacks


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--sse")
    parser.add_argument("--command")
    parser.add_argument("--roots", action="store_true")
    parser.add_argument("--elicitation", action="store_true")
    parser.add_argument("--sampling", action="store_true")
    parser.add_argument("--lists", action="store_true")
    parser.add_argument("--subscribe")
    parser.add_argument("--call")
    parser.add_argument("--arguments", default="{}")
    parser.add_argument("--push")
    parser.add_argument("--push-arguments", default="{}")
    parser.add_argument("--wait", type=float, default=15.0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before the call")
    return parser


async def main() -> None:
    args = _parser().parse_args()
    seen: dict[str, Any] = {"updated": [], "asked": []}
    callbacks = _callbacks(args, seen)
    # the report is printed before the session closes: a server's late roots/list ask may break
    # the client's teardown, which is not what is being compared
    if args.url or args.sse:
        transport = streamablehttp_client(args.url) if args.url else sse_client(args.sse)
        async with transport as streams:
            async with ClientSession(streams[0], streams[1], **callbacks) as session:
                print(json.dumps(await _exercise(session, args, seen)), flush=True)
    else:
        argv = shlex.split(args.command)
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **callbacks) as session:
                print(json.dumps(await _exercise(session, args, seen)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
